"""The GL producer's scoring run through a daemon, and its host-uploaded twin (R13).

:func:`gl_session` is what a capture tool does: per frame it uploads the
reference planes into textures, renders the distorted ones with the dither
shader, fences, checks the acquire (:func:`vmafx.gl.wait_sync_acquire`),
exports both frames (their buffers registered once, on the first frame),
submits, waits for both ``released`` and marks the exporters' buffers
released before the next frame overwrites them.  Around every export the
producer's GL state is put off its defaults and compared before and after,
through ``vmafx.gl`` and through PyOpenGL.  The rendered textures are read
back on the host afterwards: that read-back must equal the numpy dither of
the same frame, and it is the distorted input of the twin.

:func:`memfd_session` scores the same frames uploaded from the host (sealed
memfds, refilled after each release).  The two runs' per-frame metrics are
compared bit for bit by the tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from OpenGL import GL

from vmafx import gl as vg
from vmafx.gl import entry_points as gle
from vmafx.gl.producer_state import _KeepProducerState
from vmafx.frames import FrameBuffer, memfd_buffer_from_planes
from vmafx.protocol import Status

from .producer import BusyState, Case, GlProducer, dither_expected, load_case, pyopengl_state

MODELS = ("version=vmaf_v0.6.1",)
FEATURES = ("psnr", "float_ssim", "float_ms_ssim")


def register(c, buf: FrameBuffer) -> tuple[int, bool]:
    """register_buffer for a vmafx FrameBuffer through the raw client: (buffer id, zero_copy)."""
    msg = buf.register_message(c.conn.next_seq())
    reply = c.request(msg, msg.fds)
    assert reply.TYPE == "buffer_registered", f"{buf!r} refused: {reply}"
    return reply.buffer, reply.zero_copy


def wait_released(c, session: int, index: int, timeout: float = 120.0) -> None:
    """Until both roles of the frame were released; other messages stay in the client's inbox."""
    end = time.monotonic() + timeout
    while {r.role for r in c.released if (r.session, r.index) == (session, index)} != {"ref", "dist"}:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"frame {index} of session {session} was not released within {timeout:g} s")
        # a fresh packet (the raw client's _recv records released/outcomes); wait_for would hand back
        # what is already in the inbox and never read on
        c.inbox.append(c._recv(left))


def host_copies(c) -> int:
    return c.request(Status(seq=c.conn.next_seq())).status["host_copies"]


@dataclass
class GlRun:
    width: int
    height: int
    fmt: object
    bitdepth: int
    results: dict[int, dict] = field(default_factory=dict)
    refs: list = field(default_factory=list)
    host_dists: list = field(default_factory=list)
    copies_before: int = 0
    copies_after: int = 0
    zero_copy: tuple = ()
    state_checks: int = 0
    exports: list = field(default_factory=list)


def gl_session(c, egl, case: Case, make_exporter: Callable, *, frames: int | None = None,
               models=MODELS, features=FEATURES, check_buffers: Callable | None = None,
               trace: Callable[[str], None] = print) -> GlRun:
    """Score ``case``'s frames produced in GL and exported by ``make_exporter(producer, w, h, fmt, bitdepth)``."""
    egl.make_current()
    w, h, fmt, bitdepth, refs, dists = load_case(case, frames)
    formats = vg.plane_formats(fmt, w, h, bitdepth)
    run = GlRun(w, h, fmt, bitdepth, refs=refs)
    p = GlProducer()
    busy = BusyState()
    ref_t = p.make_textures(w, h, fmt, bitdepth)
    src_t = p.make_textures(w, h, fmt, bitdepth)
    dst_t = p.make_textures(w, h, fmt, bitdepth)
    rx = dx = None
    ids: dict[str, int] = {}
    try:
        rx = make_exporter(p, w, h, fmt, bitdepth)
        dx = make_exporter(p, w, h, fmt, bitdepth)
        run.copies_before = host_copies(c)
        s = c.open_ok(models=list(models), features=list(features), width=w, height=h, pixel_format=fmt.value,
                      bitdepth=bitdepth).session
        for i in range(len(refs)):
            p.upload(ref_t, refs[i], formats)
            p.upload(src_t, dists[i], formats)
            p.render_dither(src_t, dst_t, formats, i, case.step, case.maxcode)
            sync = p.fence()
            tries = vg.wait_sync_acquire(sync, timeout_s=10.0)
            busy.apply()
            before, before_py = vg.gl_state_snapshot(), pyopengl_state()
            assert before == before_py
            fr = rx.export(ref_t, sync=sync)
            fd = dx.export(dst_t, sync=sync)
            after, after_py = vg.gl_state_snapshot(), pyopengl_state()
            assert after == before, f"frame {i}: the producer's GL state changed:\n{before}\n{after}"
            assert after_py == before_py, f"frame {i}: PyOpenGL reads a changed state:\n{before_py}\n{after_py}"
            run.state_checks += 1
            busy.reset()
            GL.glDeleteSync(sync)
            host = p.read_back(dst_t, formats)
            want = dither_expected(dists[i], i, case.step, case.maxcode, formats)
            for k, (a, b) in enumerate(zip(host, want)):
                assert np.array_equal(a, b), (f"frame {i} plane {k}: the rendered texture differs from the numpy "
                                              f"dither in {int(np.count_nonzero(a != b))} samples")
            run.host_dists.append(host)
            run.exports.append((fr.path, fr.copied, fd.path, fd.copied))
            for role, frame in (("ref", fr), ("dist", fd)):
                if frame.new_buffer:
                    ids[role], zc = register(c, frame.buffer)
                    run.zero_copy += ((role, zc),)
                    trace(f"registered the {role} buffer: {frame.buffer!r} -> id {ids[role]}, zero_copy={zc}")
            if i == 0:
                trace(f"frame 0: acquire passed after {tries} E_BUSY retries; exports {run.exports[0]}")
                if check_buffers is not None:
                    check_buffers(rx, refs[0], "ref")
                    check_buffers(dx, want, "dist")
            c.submit(s, i, ids["ref"], ids["dist"])
            wait_released(c, s, i)
            rx.mark_released()
            dx.mark_released()
        closed = c.close_session(s, timeout=300)
        assert (closed.frames, closed.failed) == (len(refs), 0), closed
        run.results = {i: c.outcomes[(s, i)].metrics for i in range(len(refs))}
        run.copies_after = host_copies(c)
        for bid in ids.values():
            c.unregister(bid)
    finally:
        egl.make_current()
        for x in (rx, dx):
            if x is not None:
                x.close()
        busy.close()
        p.close()
    return run


def memfd_session(c, run: GlRun, *, models=MODELS, features=FEATURES) -> dict[int, dict]:
    """The same frames uploaded from the host: the reference planes and the GL read-back of the rendered ones."""
    rb = memfd_buffer_from_planes(run.refs[0], run.fmt, run.bitdepth)
    db = memfd_buffer_from_planes(run.host_dists[0], run.fmt, run.bitdepth)
    try:
        rid, _ = register(c, rb)
        did, _ = register(c, db)
        s = c.open_ok(models=list(models), features=list(features), width=run.width, height=run.height,
                      pixel_format=run.fmt.value, bitdepth=run.bitdepth).session
        for i in range(len(run.refs)):
            if i:
                rb.write_frame(run.refs[i])
                db.write_frame(run.host_dists[i])
            c.submit(s, i, rid, did)
            wait_released(c, s, i)
        closed = c.close_session(s, timeout=300)
        assert (closed.frames, closed.failed) == (len(run.refs), 0), closed
        out = {i: c.outcomes[(s, i)].metrics for i in range(len(run.refs))}
        c.unregister(rid)
        c.unregister(did)
        return out
    finally:
        rb.close()
        db.close()


def differing(a: dict[int, dict], b: dict[int, dict]) -> list[tuple[int, str, object, object]]:
    """(frame, metric, a's, b's) for every cell that is not bit-identical."""
    out = []
    for i in sorted(set(a) | set(b)):
        ma, mb = a.get(i, {}), b.get(i, {})
        for k in sorted(set(ma) | set(mb)):
            if ma.get(k, "missing") != mb.get(k, "missing"):
                out.append((i, k, ma.get(k, "missing"), mb.get(k, "missing")))
    return out


class HostReadbackExporter:
    """A *test stand-in* with GlFrameExporter's interface for machines where no GL export path runs
    (llvmpipe): it reads the textures back through the host into a memfd -- the very host copy the real
    paths avoid -- so that the harness above (registration once, acquire, state checks, release before
    reuse) can be exercised here.  It keeps the producer's state with the exporter's own guard."""

    def __init__(self, producer: GlProducer, w, h, fmt, bitdepth):
        from vmafx.frames import memfd_buffer

        self.producer = producer
        self.formats = vg.plane_formats(fmt, w, h, bitdepth)
        self.buf = memfd_buffer(w, h, fmt, bitdepth)
        self.new = True
        self.in_flight = False

    def export(self, textures, *, sync=None):
        vg.check_sync_acquire(sync)
        if self.in_flight:
            raise vg.GlBusy("buffer", "not released")
        g = gle._gl()
        with _KeepProducerState(g, gle._gl_context_info(g)):
            planes = self.producer.read_back(textures, self.formats)
        self.buf.write_frame(planes)
        new, self.new = self.new, False
        self.in_flight = True
        return vg.GlFrame(self.buf, "host-readback-stand-in", True, new)

    def mark_released(self):
        self.in_flight = False

    def close(self):
        self.buf.close()
