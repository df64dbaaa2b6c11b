#!/usr/bin/env python3
"""Render frames with GL in an offscreen EGL context, hand them to vmafxd without a host copy, print VMAF.

    python3 scripts/gl_score.py [--socket PATH | --lane cuda] [--case yuv420p-R8] [--frames N]
                                [--path auto|memory_object|dmabuf] [--platform auto|device|surfaceless]
                                [--features psnr,float_ssim,float_ms_ssim] [--twin] [--quiet]

The producer (PyOpenGL) uploads the bundled reference clip's planes into
textures (R8, GR88, R16, GR1616 per the case) and *renders* the distorted
clip through a dither shader into render-target textures.  Each frame is
fenced, the acquire checked on the host (``vmafx.gl.wait_sync_acquire``),
and both frames exported with ``vmafx.gl.GlFrameExporter`` -- the
memory-object path into a CUDA VMM buffer on NVIDIA, the EGL dma-buf path
where the display can export (R11) -- then registered once, submitted, and
the buffers rewritten only after the daemon released them.

Without ``--socket`` a private daemon is started (``python -m vmafxd --lane
LANE``, default cuda).  ``--twin`` also scores the same frames uploaded from
the host (memfds) and compares every metric bit for bit (exit status 1 when
they differ).  A GL path that cannot run here is reported with its typed
refusal (exit status 3): on the development machine (llvmpipe) both paths are
refused -- no dma-buf export, no CUDA.

Needs: PyOpenGL (``vmafxd[gl]``), EGL with a desktop-GL driver; for the
memory-object path cuda-bindings and an NVIDIA driver whose EGL offers
``GL_EXT_memory_object_fd``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from _checkout import ROOT
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def start_daemon(lane: str, sock: str) -> subprocess.Popen:
    r, wfd = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "vmafxd", "--socket", sock, "--lane", lane, "--ready-fd", str(wfd),
                             "--log-level", "warning"], pass_fds=(wfd,), cwd=str(ROOT))
    os.close(wfd)
    try:
        line = os.read(r, 16)
    finally:
        os.close(r)
    if line != b"READY\n":
        proc.kill()
        proc.wait()
        raise SystemExit(f"gl_score: the daemon (--lane {lane}) did not start")
    return proc


def main(argv=None) -> int:
    from tests.gl.producer import CASES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", help="a running daemon's socket (default: start a private one)")
    ap.add_argument("--lane", default="cuda", help="lane of the private daemon (default cuda)")
    ap.add_argument("--case", default=CASES[0].id, choices=[c.id for c in CASES])
    ap.add_argument("--frames", type=int, default=None, help="at most N frames (default: the whole clip)")
    ap.add_argument("--path", default="auto", choices=("auto", "memory_object", "dmabuf"))
    ap.add_argument("--platform", default="auto", choices=("auto", "device", "surfaceless", "default"))
    ap.add_argument("--features", default="psnr,float_ssim,float_ms_ssim")
    ap.add_argument("--twin", action="store_true", help="also score the frames uploaded from the host and compare")
    ap.add_argument("--quiet", action="store_true", help="no per-step trace")
    args = ap.parse_args(argv)
    trace = None if args.quiet else print

    from vmafx import gl as vg

    try:
        ctx = vg.EglOffscreenContext(args.platform, trace=trace)
    except vg.GlExportError as e:
        print(f"gl_score: no EGL context: {e}", file=sys.stderr)
        return 2
    print(ctx.info().describe())

    proc = None
    tmp = None
    sock = args.socket
    if sock is None:
        tmp = tempfile.mkdtemp(prefix="vxgl", dir="/tmp")
        sock = os.path.join(tmp, "vmafxd.sock")
        proc = start_daemon(args.lane, sock)
    try:
        return score(ctx, sock, args, trace)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        ctx.close()


def score(ctx, sock: str, args, trace) -> int:
    import numpy as np
    from OpenGL import GL

    from tests.gl.producer import CASES, GlProducer, dither_expected, load_case
    from vmafx import gl as vg
    from vmafx.blocking import BlockingClient
    from vmafx.frames import ALLOW_COPY, memfd_buffer_from_planes

    case = next(c for c in CASES if c.id == args.case)
    features = [f for f in args.features.split(",") if f]
    models = ["version=vmaf_v0.6.1"]
    w, h, fmt, bitdepth, refs, dists = load_case(case, args.frames)
    formats = vg.plane_formats(fmt, w, h, bitdepth)
    print(f"case {case.id}: {w}x{h} {fmt.value} {bitdepth}-bit, {len(refs)} frames, planes "
          f"{[pf.name for _, pf in formats]}")

    with BlockingClient.connect(sock, name="gl-score") as client:
        device = vg.DaemonDevice.from_lanes(client.lanes)
        print(f"daemon device: {device}")
        p = GlProducer()
        ref_t, src_t, dst_t = (p.make_textures(w, h, fmt, bitdepth) for _ in range(3))
        rx = vg.GlFrameExporter(w, h, fmt, bitdepth, device=device, flags=ALLOW_COPY, path=args.path, trace=trace)
        dx = vg.GlFrameExporter(w, h, fmt, bitdepth, device=device, flags=ALLOW_COPY, path=args.path, trace=trace)
        handles: dict[str, object] = {}
        host_dists = []
        try:
            copies0 = client.status()["host_copies"]
            session = client.open_session(width=w, height=h, pixel_format=fmt.value, bitdepth=bitdepth,
                                          models=models, features=features)
            start = time.monotonic()
            for i in range(len(refs)):
                p.upload(ref_t, refs[i], formats)
                p.upload(src_t, dists[i], formats)
                p.render_dither(src_t, dst_t, formats, i, case.step, case.maxcode)
                sync = p.fence()
                vg.wait_sync_acquire(sync, timeout_s=10.0)
                try:
                    fr = rx.export(ref_t, sync=sync)
                    fd = dx.export(dst_t, sync=sync)
                except vg.GlExportError as e:
                    print(f"gl_score: the {rx.path} path is refused here: {type(e).__name__} {e}")
                    return 3
                finally:
                    GL.glDeleteSync(sync)
                for role, frame in (("ref", fr), ("dist", fd)):
                    if frame.new_buffer:
                        handles[role] = client.register_buffer(frame.buffer)
                        print(f"registered {role}: {frame.buffer!r} (path {frame.path}, copied on the GPU: "
                              f"{frame.copied}, zero_copy for the daemon: {handles[role].zero_copy})")
                session.submit(i, handles["ref"], handles["dist"])
                handles["ref"].wait_released(timeout=60)
                handles["dist"].wait_released(timeout=60)
                rx.mark_released()
                dx.mark_released()
                if args.twin:
                    host = p.read_back(dst_t, formats)
                    want = dither_expected(dists[i], i, case.step, case.maxcode, formats)
                    assert all(np.array_equal(a, b) for a, b in zip(host, want)), f"frame {i}: render differs"
                    host_dists.append(host)
            summary = session.close(timeout=300)
            took = time.monotonic() - start
            results = {r.index: r.metrics for r in session.results()}
            copies1 = client.status()["host_copies"]
            for i in sorted(results):
                print(f"frame {i:3d}: vmaf {results[i].get('vmaf')!r}  psnr_y {results[i].get('psnr_y')!r}")
            print(f"VMAF (mean of {summary.frames} frames, {summary.failed} failed): "
                  f"{summary.pooled.get('vmaf', {}).get('mean')!r}  [{took:.2f} s]")
            print(f"host copies during the GL session: {copies1 - copies0}")
            for handle in handles.values():
                client.unregister_buffer(handle)
        finally:
            ctx.make_current()
            rx.close()
            dx.close()
            p.close()
        if not args.twin:
            return 0
        rb = memfd_buffer_from_planes(refs[0], fmt, bitdepth)
        db = memfd_buffer_from_planes(host_dists[0], fmt, bitdepth)
        try:
            rh, dh = client.register_buffer(rb), client.register_buffer(db)
            s2 = client.open_session(width=w, height=h, pixel_format=fmt.value, bitdepth=bitdepth, models=models,
                                     features=features)
            for i in range(len(refs)):
                if i:
                    rh.wait_released(timeout=60)
                    dh.wait_released(timeout=60)
                    rb.write_frame(refs[i])
                    db.write_frame(host_dists[i])
                s2.submit(i, rh, dh)
            s2.close(timeout=300)
            twin = {r.index: r.metrics for r in s2.results()}
        finally:
            rb.close()
            db.close()
        diff = [(i, k, results[i].get(k), twin[i].get(k)) for i in results for k in set(results[i]) | set(twin[i])
                if results[i].get(k) != twin[i].get(k)]
        print(f"twin (host-uploaded memfds): {len(results)} frames x {len(results[0])} metrics, "
              f"{len(diff)} differing cells" + (f": {diff[:6]}" if diff else " -- bit for bit"))
        return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
