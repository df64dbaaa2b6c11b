"""The GPU lane through a real daemon process, parameterised by runtime (cuda, hip, emu).

The same tests run on every GPU runtime that has a device here, and always on
the emulator (``--lane emu``: the lane's code with its kernels run on the CPU),
so the lane's plumbing -- batches, the release handles in the pending table,
the reaper freeing imports, failed frames -- is exercised in CI too.  Tests
that need a real GPU's import kinds (VMM fds, interprocess events) run where
the runtime offers them.
"""

from __future__ import annotations

import os
import time

import pytest

from vmafx.formats import PixelFormat
from vmafx.protocol import BufferUnregistered, FrameError, Released, Result, Status

from ..daemon.conftest import Daemon
from ..daemon.test_daemon_scoring import reference_frames
from ..daemon.rawclient import RawClient, frame_memfd, stored_planes
from ..reference import full_pairs, vendored_pairs
from .conftest import load_runtime

RUNTIMES = ("cuda", "hip", "emu")


def _expected(refs, dists, models=(), features=("psnr",), n=None):
    """The CPU lane's frames and pooled values for the same plan (the daemon tests' helper)."""
    return reference_frames(refs, dists, features=features, models=models, n=n)


@pytest.fixture(params=RUNTIMES, scope="module")
def runtime(request):
    rt, _ = load_runtime(request.param)
    return rt.name


@pytest.fixture(scope="module", params=["in-process", "lane-process"])
def gpu_daemon(runtime, request):
    """The lane in the daemon, and in a worker process per device (--lane-process)."""
    extra = ("--lane-process",) if request.param == "lane-process" else ()
    d = Daemon("--lane", runtime, "--gpu-batch", "4", *extra, workers=1, fence_timeout_ms=2000)
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        rc = d.stop() if alive else d.proc.returncode
        log = d.log()
        d.close()
        assert alive and rc == 0, f"the daemon exited with {rc}:\n{log[-4000:]}"


@pytest.fixture(scope="module")
def p01():
    pair = vendored_pairs()[0]
    refs, dists = pair.pictures()
    return pair, refs, dists


def _frames(runtime: str, total: int) -> int:
    return total if runtime != "emu" else min(total, 6)


def test_scores_equal_the_cpu_lane(gpu_daemon, runtime, p01):
    """Every frame's every metric equals the CPU lane's (vmaf_v0.6.1 + psnr), through 2 buffer pairs reused on release."""
    pair, refs, dists = p01
    n = _frames(runtime, len(refs))
    want, want_pooled = _expected(refs, dists, models=["version=vmaf_v0.6.1"], n=n)
    c = RawClient(gpu_daemon.socket, "gpu-scores")
    hello = c.hello()
    assert any(lane["lane"] == runtime for lane in hello.lanes)
    bufs = [(frame_memfd(refs[k]), frame_memfd(dists[k], pitch_pad=64)) for k in range(2)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(models=["version=vmaf_v0.6.1"], features=["psnr"]).session
    busy: dict[int, set] = {}
    for i in range(n):
        k = i % 2
        while busy.get(k):
            m = c.wait_for(lambda m: isinstance(m, Released))
            for roles in busy.values():
                roles.discard((m.index, m.role))
        if i >= 2:
            bufs[k][0].write_planes(stored_planes(refs[i], PixelFormat.YUV420P))
            bufs[k][1].write_planes(stored_planes(dists[i], PixelFormat.YUV420P))
        c.submit(s, i, *ids[k])
        busy[k] = {(i, "ref"), (i, "dist")}
    closed = c.close_session(s, timeout=300)
    assert (closed.frames, closed.failed) == (n, 0)
    for i in range(n):
        got = c.outcomes[(s, i)].metrics
        assert got == want[i], f"frame {i}: {[(k, got.get(k), v) for k, v in want[i].items() if got.get(k) != v][:4]}"
    assert closed.pooled == want_pooled  # every metric's four figures (the session's running sums)
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    for r, d in ids:
        assert isinstance(c.unregister(r), BufferUnregistered) and isinstance(c.unregister(d), BufferUnregistered)
    c.close()
    for r, d in bufs:
        r.close()
        d.close()


def test_one_buffer_in_two_sessions_scores_identically(gpu_daemon, runtime, p01):
    """R14: the same imported buffers read by two sessions give the same numbers in both."""
    _, refs, dists = p01
    c = RawClient(gpu_daemon.socket, "gpu-r14")
    c.hello()
    rb, db = frame_memfd(refs[5]), frame_memfd(dists[5])
    rid, did = c.register_ok(rb), c.register_ok(db)
    s1 = c.open_ok(features=["psnr", "vif"]).session
    s2 = c.open_ok(features=["psnr", "vif"]).session
    c.submit(s1, 0, rid, did)
    c.submit(s2, 0, rid, did)
    a, b = c.outcome(s1, 0, timeout=120), c.outcome(s2, 0, timeout=120)
    assert isinstance(a, Result) and isinstance(b, Result)
    assert a.metrics == b.metrics and a.metrics["integer_vif_scale0"] > 0
    want, _ = _expected(refs[5:6], dists[5:6], features=("psnr", "vif"))
    assert a.metrics == want[0]
    c.close_session(s1)
    c.close_session(s2)
    c.close()
    rb.close()
    db.close()


def test_zero_copy_imports_count_no_host_copy_and_uploads_do(gpu_daemon, runtime, p01):
    """R13's counter: memfds on a real GPU are uploaded (counted); on the emulator they are its device memory."""
    _, refs, dists = p01
    c = RawClient(gpu_daemon.socket, "gpu-copies")
    c.hello()
    before = c.request(Status(seq=c.conn.next_seq())).status["host_copies"]
    rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(rb), c.register_ok(db)
    s = c.open_ok(features=["psnr"]).session
    c.submit(s, 0, rid, did)
    assert isinstance(c.outcome(s, 0, timeout=60), Result)
    c.close_session(s)
    after = c.request(Status(seq=c.conn.next_seq())).status["host_copies"]
    assert after - before == (0 if runtime == "emu" else 2)
    c.close()
    rb.close()
    db.close()


def test_a_frame_on_another_device_or_an_unknown_fence_kind_is_refused(gpu_daemon, runtime, p01):
    _, refs, dists = p01
    c = RawClient(gpu_daemon.socket, "gpu-refuse")
    c.hello()
    rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(rb), c.register_ok(db)
    s = c.open_ok(features=["psnr"]).session
    other = {"cuda": "hip_ipc_event", "hip": "cuda_ipc_event", "emu": "cuda_ipc_event"}[runtime]
    from vmafx.protocol import Fence, Submit

    c.send(Submit(session=s, index=0, ref=rid, dist=did, ref_fence=Fence(other, handle=bytes(64))))
    out = c.outcome(s, 0)
    assert isinstance(out, FrameError) and out.code == "E_NOTSUP" and out.field == "ref_fence"
    c.close_session(s)
    c.close()
    rb.close()
    db.close()


def test_the_canary_catches_an_early_release_on_the_gpu_lane(runtime, p01):
    """R15 on the GPU lane: with the planted early release the canary sees wrong scores."""
    from ..daemon.test_early_release import _expected as canary_expected, canary

    _, refs, dists = p01
    honest = Daemon("--lane", runtime, workers=1, fence_timeout_ms=2000)
    try:
        assert canary(honest, refs, dists, canary_expected(refs, dists)) == [False, False, False]
    finally:
        honest.stop()
        honest.close()
    planted = Daemon("--lane", runtime, workers=1, fence_timeout_ms=2000, env={"VMAFXD_TEST_EARLY_RELEASE": "1"})
    try:
        assert canary(planted, refs, dists, canary_expected(refs, dists)) == [True, True, True]
    finally:
        planted.stop()
        planted.close()


def test_an_unrecorded_batch_handle_stays_pending():
    """R5 with the GPU lane's handles: the table never asks a handle whose batch was not enqueued."""
    from vmafxd.lanes.gpu.release_events import BatchReleaseHandle, SharedEvent
    from vmafxd.reaper import PendingReleases

    class TrapEvent:  # answers "done" like cuEventQuery/hipEventQuery on a never-recorded event
        queried = 0

        def query(self):
            TrapEvent.queried += 1
            return True

        def close(self):
            pass

    class Dev:
        def make_current(self):
            pass

    table = PendingReleases()
    handle = BatchReleaseHandle()
    done = []
    table.add(handle, lambda: done.append(1), "frame 0")
    assert table.take_completed() == [] and TrapEvent.queried == 0 and len(table) == 1
    handle.bind(SharedEvent(Dev(), TrapEvent()))
    assert len(table.take_completed()) == 1 and TrapEvent.queried == 1


# ------------------------------------------------------------------ real GPUs: VMM fds and IPC events

def _cuda_only(runtime):
    if runtime != "cuda":
        pytest.skip("VMM fds and interprocess events are tested on the cuda runtime (the hip binding has "
                    "them too, but no AMD GPU exists here)")


def _register_vmm(c, buf) -> int:
    from vmafx.protocol import Plane, RegisterBuffer

    reg = buf.registration()
    planes = tuple(Plane(**p) for p in reg.pop("planes"))
    msg = RegisterBuffer(seq=c.conn.next_seq(), fds=(buf.fd.fileno(),), planes=planes, **reg)
    reply = c.request(msg, fds=[buf.fd.fileno()])
    assert reply.TYPE == "buffer_registered" and reply.zero_copy, reply
    return reply.buffer


def _wait_released(c, session, index, timeout=120.0):
    """Read packets until both roles of frame ``index`` are released (others stay in the inbox).

    (Not ``wait_for(lambda m: True)``: that returns the inbox's first message again and again.)
    """
    end = time.monotonic() + timeout
    while {r.role for r in c.released if (r.session, r.index) == (session, index)} != {"ref", "dist"}:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"frame {index} of session {session} was not released")
        c.inbox.append(c._recv(left))


def _close_enough(got, want):
    return [(k, got.get(k), v) for k, v in want.items()
            if (abs(got.get(k, 1e9) - v) > 1e-5 if k.startswith("float_") else got.get(k) != v)]


def _score_vmm(c, producer, pair, refs, dists, features, models, extra_offset=0):
    from vmafx.cuda_frames import VmmFrameBuffer

    fmt = PixelFormat(pair.pix_fmt)
    rb = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth)
    db = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth, extra_offset=768 + extra_offset)
    rid, did = _register_vmm(c, rb), _register_vmm(c, db)
    s = c.open_ok(models=list(models), features=list(features), width=pair.width, height=pair.height,
                  pixel_format=fmt.value, bitdepth=pair.bitdepth).session
    for i in range(len(refs)):
        rb.write(stored_planes(refs[i], fmt))
        db.write(stored_planes(dists[i], fmt))
        producer.synchronize()  # written before it is submitted (no fence in this test)
        c.submit(s, i, rid, did)
        _wait_released(c, s, i)
    closed = c.close_session(s, timeout=120)
    got = {i: c.outcomes[(s, i)].metrics for i in range(len(refs))}
    c.unregister(rid)
    c.unregister(did)
    rb.close()
    db.close()
    return closed, got


def test_vmm_fds_from_a_producer_score_exactly_and_zero_copy(gpu_daemon, runtime):
    """Every vendored pair through VMM fds of this (separate) producer process: equal to the CPU lane on
    every integer feature and psnr, float features within 1e-5, and no byte through the host (R13)."""
    _cuda_only(runtime)
    from vmafx.cuda_frames import CudaProducer

    producer = CudaProducer(0)
    c = RawClient(gpu_daemon.socket, "vmm-producer")
    c.hello()
    copies0 = c.request(Status(seq=c.conn.next_seq())).status["host_copies"]
    feats = ("psnr", "float_ssim", "float_ms_ssim")
    for pair in vendored_pairs() + full_pairs():
        refs, dists = pair.pictures()
        want, _ = _expected(refs, dists, models=["version=vmaf_v0.6.1"], features=feats)
        closed, got = _score_vmm(c, producer, pair, refs, dists, feats, ["version=vmaf_v0.6.1"])
        assert closed.failed == 0, pair.id
        for i in range(len(refs)):
            assert not _close_enough(got[i], want[i]), f"{pair.id} frame {i}: {_close_enough(got[i], want[i])[:4]}"
    copies1 = c.request(Status(seq=c.conn.next_seq())).status["host_copies"]
    assert copies1 == copies0, "zero-copy imports moved bytes through the host"
    c.close()
    producer.close()


def test_imported_equals_host_uploaded_bit_for_bit(gpu_daemon, runtime, p01):
    """R13 twins: the same frames as VMM imports and as memfd uploads score identically, every feature."""
    _cuda_only(runtime)
    from vmafx.cuda_frames import CudaProducer

    pair, refs, dists = p01
    feats = ("psnr", "float_ssim", "float_ms_ssim")
    producer = CudaProducer(0)
    c = RawClient(gpu_daemon.socket, "r13")
    c.hello()
    _, imported = _score_vmm(c, producer, pair, refs, dists, feats, ["version=vmaf_v0.6.1"])
    rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(rb), c.register_ok(db)
    s = c.open_ok(models=["version=vmaf_v0.6.1"], features=list(feats)).session
    for i in range(len(refs)):
        rb.write_planes(stored_planes(refs[i], PixelFormat.YUV420P))
        db.write_planes(stored_planes(dists[i], PixelFormat.YUV420P))
        c.submit(s, i, rid, did)
        _wait_released(c, s, i)
    c.close_session(s, timeout=120)
    uploaded = {i: c.outcomes[(s, i)].metrics for i in range(len(refs))}
    assert imported == uploaded
    c.close()
    producer.close()


def _acquire_under_load(daemon, producer, pair, refs, dists, frames=8):
    """A producer that writes each frame on its own stream behind ~ms of other work and signals an
    interprocess event, submitting at once: returns how many frames scored wrong."""
    from vmafx.cuda_frames import VmmFrameBuffer
    from vmafx.protocol import Fence, Submit

    want, _ = _expected(refs, dists, features=("psnr",), models=(), n=frames)
    fmt = PixelFormat(pair.pix_fmt)
    c = RawClient(daemon.socket, "acquire")
    c.hello()
    rb = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth)
    db = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth)
    # the frames wait in device memory of the same layout: the copies into the registered buffers are
    # device-to-device, so they are truly queued behind the stream's other work (a pageable host source
    # would make the driver block the caller until the stream reaches the copy)
    stages = []
    for i in range(frames):
        sr = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth)
        sd = VmmFrameBuffer(producer, pair.width, pair.height, fmt, pair.bitdepth)
        sr.write(stored_planes(refs[i], fmt))
        sd.write(stored_planes(dists[i], fmt))
        stages.append((sr, sd))
    producer.synchronize()
    rid, did = _register_vmm(c, rb), _register_vmm(c, db)
    s = c.open_ok(features=["psnr"]).session
    # a big scratch buffer whose memsets keep the producer's stream busy before each write
    d = producer.d
    scratch_size = 1 << 30
    scratch = int(d.cuMemAlloc(scratch_size)[1])
    ev = producer.interprocess_event()
    wrong = 0
    for i in range(frames):
        rb.fill(0xA5)
        db.fill(0x5A)
        producer.synchronize()  # garbage in place: a read before the writes sees it
        for _ in range(40):
            d.cuMemsetD8Async(scratch, i & 0xFF, scratch_size, producer.stream)
        for dst, src in zip((rb, db), stages[i]):
            d.cuMemcpyDtoDAsync(dst.ptr, src.ptr, dst.size, producer.stream)
        handle = ev.record()
        c.send(Submit(session=s, index=i, ref=rid, dist=did, ref_fence=Fence("cuda_ipc_event", handle=handle),
                      dist_fence=Fence("cuda_ipc_event", handle=handle)))
        out = c.outcome(s, i, timeout=120)
        _wait_released(c, s, i)
        producer.synchronize()
        wrong += out.metrics != want[i]
    c.close_session(s)
    d.cuMemFree(scratch)
    ev.close()
    for b in (rb, db, *(x for pair_ in stages for x in pair_)):
        b.close()
    c.close()
    return wrong


def test_acquire_fences_under_load_order_the_reads(gpu_daemon, runtime, p01):
    """The producer's interprocess event is waited on the library stream: right scores; with the wait
    skipped (a planted bug) the same producer sees wrong ones."""
    _cuda_only(runtime)
    from vmafx.cuda_frames import CudaProducer

    pair, refs, dists = p01
    producer = CudaProducer(0)
    assert _acquire_under_load(gpu_daemon, producer, pair, refs, dists) == 0
    planted = Daemon("--lane", runtime, workers=1, env={"VMAFXD_TEST_SKIP_GPU_WAIT": "1"})
    try:
        assert _acquire_under_load(planted, producer, pair, refs, dists) > 0
    finally:
        planted.stop()
        planted.close()
    producer.close()


def test_a_dmabuf_is_refused_naming_the_runtime_and_field(gpu_daemon, runtime):
    """On the H200 CUDA cannot import a dma-buf: E_NOTSUP naming planes[0].fd and the runtime; with
    ALLOW_COPY the host path is tried, and NVIDIA's exporter refuses CPU mmap (errno 524): E_NOTSUP too."""
    _cuda_only(runtime)
    from vmafx.cuda_frames import CudaProducer, VmmFrameBuffer
    from vmafx.protocol import Plane, RegisterBuffer

    producer = CudaProducer(0)
    vb = VmmFrameBuffer(producer, 576, 324, "yuv420p")
    d = producer.d
    res = d.cuMemGetHandleForAddressRange(vb.ptr, vb.size, d.CUmemRangeHandleType.CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
    dfd = int(res[1])
    c = RawClient(gpu_daemon.socket, "dmabuf")
    c.hello()
    reg = vb.registration()
    planes = tuple(Plane(**p) for p in reg.pop("planes"))
    reg.update(kind="dmabuf", device=None)
    for flags in (0, 1):
        reg["flags"] = flags
        reply = c.request(RegisterBuffer(seq=c.conn.next_seq(), fds=(dfd,), planes=planes, **reg), fds=[dfd])
        assert reply.TYPE == "error" and reply.code == "E_NOTSUP" and reply.field == "planes[0].fd", reply
        assert ("CUDA_ERROR_NOT_SUPPORTED" in reply.message) if flags == 0 else ("524" in reply.message), reply
    os.close(dfd)
    c.close()
    vb.close()
    producer.close()


def test_batch_handles_taken_again_after_a_raise_are_destroyed_once():
    """release_in_order takes a run again from its start when the lane's step raised: handles it
    destroyed on the way read complete and keep their single destroy (shares dropped once)."""
    from vmafxd.core.release import release_in_order
    from vmafxd.lanes.gpu.release_events import BatchReleaseHandle, SharedEvent

    class Dev:
        def make_current(self):
            pass

    class Ev:
        def __init__(self, fail=False):
            self.fail, self.closed = fail, 0

        def query(self):
            if self.fail:
                self.fail = False
                raise RuntimeError("query failed")
            return True

        def close(self):
            self.closed += 1

    first, second = Ev(), Ev(fail=True)
    handles = [BatchReleaseHandle() for _ in range(4)]
    BatchReleaseHandle.bind_all(handles[:2], SharedEvent(Dev(), first))
    BatchReleaseHandle.bind_all(handles[2:], SharedEvent(Dev(), second))
    import logging
    assert release_in_order(handles, 0, logging.getLogger("test")) == 0  # the second batch's query raised
    assert first.closed == 1 and all(h.query() for h in handles[:2])
    assert release_in_order(handles, 0, logging.getLogger("test")) == 4
    assert first.closed == 1 and second.closed == 1
