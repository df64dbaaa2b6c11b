"""A batch's feature work captured once as a graph and launched again (lanes/gpu/batch_graphs.py).

The graphs must change nothing but the number of calls: every metric of every
frame equal, bit for bit, to the call-by-call path's, across batch sizes that
come and go (a graph per key, the block regrown); the keys must be the ones
the work depends on (motion's leading frames); a plan with a feature that
cannot be captured, and a capture that fails, fall back to the direct path;
and every graph is destroyed.  Runs on the emulator here (its capture records
the stream's calls and replays them) and on every GPU runtime with a device.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.runtime import live_handles
from vmafxd.model import load_model

from .test_engine_batch_sizes import _Pair, _plan


def _run(rt, dev, plan, pair, sizes, max_batch, *, before=None, forks=None):
    """(frame -> metrics, the scorer's graphs' (captures, launches)) for batches of ``sizes``;
    ``forks`` gets (branch streams made, twins, each plan's scratch regions [start, end))."""
    forks = [] if forks is None else forks
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    refs, dists = pair.pictures()
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, pair.width, pair.height, pair.bitdepth, pair.subsampling,
                   max_batch=max_batch)
    if before is not None:
        before(sc)
    fmt = PixelFormat(pair.pix_fmt)
    out = []
    try:
        with HostUploads(dev, stream) as up:
            frames = [GpuFrame(up.source(r.planes, fmt), up.source(d.planes, fmt)) for r, d in zip(refs, dists)]
            i, k = 0, 0
            pending = []
            while i < len(frames):
                n = min(sizes[k % len(sizes)], len(frames) - i)
                while not sc.can_enqueue():  # slots in flight, as the lane keeps them
                    b = pending.pop(0)
                    b.done.synchronize()
                    out += sc.complete(b)
                pending.append(sc.enqueue(frames[i:i + n]))
                i, k = i + n, k + 1
            for b in pending:
                b.done.synchronize()
                out += sc.complete(b)
            out += sc.finish()
        counts = (sc.graphs.captures, sc.graphs.launches)
        regions = [sorted((at, at + t.scratch_bytes(n)) for t, at in zip(sc.twins, p.offsets) if at is not None)
                   for n, p in sc._plans.items()]
        forks.append((len(sc.graphs._branches), len(sc.twins), regions))
    finally:
        sc.close()
        stream.close()
        ks.close()
    return dict(out), counts


def _same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for idx in a:
        assert list(a[idx]) == list(b[idx])
        assert all(np.float64(a[idx][k]).tobytes() == np.float64(v).tobytes() for k, v in b[idx].items()), idx


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth,subsampling", [(8, Subsampling.S420), (10, Subsampling.S444)])
def test_graphs_give_the_direct_paths_numbers(gpu, monkeypatch, bitdepth, subsampling):
    rt, dev = gpu
    dev.make_current()
    if not dev.graphs:
        pytest.skip(f"{rt.name}: no graphs (the engine launches call by call)")
    plan = _plan()  # vmaf_v0.6.1 with debug outputs, psnr, float_ssim, float_ms_ssim: all capturable
    pair = _Pair(181, 177, bitdepth, subsampling, 14)
    sizes = [1, 3, 2, 1, 2, 3, 1]
    forks, flat = [], []
    graphs, (captures, launches) = _run(rt, dev, plan, pair, sizes, max_batch=3, forks=forks)
    monkeypatch.setenv("VMAFXD_GPU_GRAPHS", "0")
    direct, off = _run(rt, dev, plan, pair, sizes, max_batch=3, forks=flat)
    assert off == (0, 0)
    _same(graphs, direct)
    # the captures forked a branch a feature, each feature's scratch its own; without graphs,
    # no branch and one shared region
    (branches, twins, regions), = forks
    assert twins >= 5 and branches == twins - 1
    for plan_regions in regions:
        assert len(plan_regions) >= 3
        assert all(end <= nxt for (_, end), (nxt, _) in zip(plan_regions, plan_regions[1:]))
    (branches, _, regions), = flat
    assert branches == 0 and all(len({at for at, _ in p}) == 1 for p in regions)
    assert len({m["integer_adm2"] for m in graphs.values()}) > 5
    # every batch went through a graph; one capture per key: (size, slot, motion's leading frames)
    # -- fewer captures than batches, so graphs were launched again
    batches, left = 0, pair.frames
    while left > 0:
        left -= sizes[batches % len(sizes)]
        batches += 1
    assert launches == batches == 8
    assert 3 <= captures < launches


@pytest.mark.gpu
def test_graph_keys_follow_what_the_work_depends_on(gpu):
    """Motion's key changes while the first frames have no score; the others' keys are empty."""
    rt, dev = gpu
    from vmafxd.lanes.gpu.engine import GpuScorer, KernelSet

    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, _plan(), 181, 177, 8, Subsampling.S420, max_batch=4)
    try:
        keys = {t.instance.decl.name: t.graph_key for t in sc.twins}
        assert keys["motion"](1, 0) == (1,) and keys["motion"](4, 0) == (1,) and keys["motion"](4, 1) == (0,)
        assert keys["vif"](4, 0) == keys["adm"](4, 7) == keys["psnr"](2, 0) == ()
        if sc.graphs.on:
            assert sc._graph_key(2, 0, 1) == (2, 1, *[k(2, 0) for k in keys.values()])
    finally:
        sc.close()
        stream.close()
        ks.close()


@pytest.mark.gpu
def test_a_feature_without_a_key_keeps_the_direct_path(gpu):
    rt, dev = gpu
    if not dev.graphs:
        pytest.skip(f"{rt.name}: no graphs")
    plan = ScoringPlan.build([load_model("version=vmaf_v0.6.1")], [FeatureRequest("ciede")])
    pair = _Pair(64, 48, 8, Subsampling.S420, 5)
    got, counts = _run(rt, dev, plan, pair, [2], max_batch=2)
    assert counts == (0, 0) and set(got) == set(range(5))
    assert "ciede2000" in got[3]


@pytest.mark.gpu
def test_a_failed_capture_turns_graphs_off_and_scores_the_batch(gpu, monkeypatch):
    rt, dev = gpu
    if not dev.graphs:
        pytest.skip(f"{rt.name}: no graphs")
    plan = _plan()
    pair = _Pair(181, 177, 8, Subsampling.S420, 6)
    failing = []

    def break_capture(sc):
        adm = next(t for t in sc.twins if t.instance.decl.name == "adm")
        real = adm.enqueue

        def enqueue(*a):
            if sc.stream is not stream_of[0]:  # only while a graph is captured
                failing.append(1)
                raise RuntimeError("not capturable after all")
            real(*a)

        stream_of[0] = sc.stream
        adm.enqueue = enqueue

    stream_of = [None]
    broken, counts = _run(rt, dev, plan, pair, [2, 1], max_batch=2, before=break_capture)
    monkeypatch.setenv("VMAFXD_GPU_GRAPHS", "0")
    direct, _ = _run(rt, dev, plan, pair, [2, 1], max_batch=2)
    assert failing == [1] and counts == (0, 0)  # one try, then call by call
    _same(broken, direct)


def test_emulated_capture_records_and_replays(monkeypatch):
    """The emulator's graphs: stream work recorded (not run) while capturing, run by each launch,
    host memory read when the graph runs, one owned handle each."""
    from vmafxd.lanes import emulated
    from vmafxd.lanes.errors import RuntimeCallError

    dev = emulated.load().device(0)
    st = dev.create_stream()
    host = dev.alloc_host(16)
    back = dev.alloc_host(16)
    ptr = dev.alloc(16)
    before = live_handles("emu", "graph")
    dev.begin_capture(st)
    with pytest.raises(RuntimeCallError):
        dev.begin_capture(st)
    dev.memset_async(ptr, 7, 16, st)
    dev.copy_htod_async(ptr, host, 8, st)
    dev.copy_dtoh_async(back, ptr, 16, st)
    assert not back.any()  # recorded, not run
    g = dev.end_capture(st)
    assert live_handles("emu", "graph") == before + 1
    host[:8] = np.arange(1, 9)
    g.launch(st)
    assert back.tolist() == list(range(1, 9)) + [7] * 8
    host[:8] = 5
    g.launch(st)
    assert back.tolist() == [5] * 8 + [7] * 8
    g.close()
    g.close()
    assert live_handles("emu", "graph") == before
    with pytest.raises(RuntimeError):
        g.launch(st)
    with pytest.raises(RuntimeCallError):
        dev.end_capture(st)
    assert dev.end_capture(st, keep=False) is None
    dev.free(ptr)
    dev.free_host(host)
    dev.free_host(back)
    st.close()


def test_emulated_capture_follows_a_fork_and_its_join():
    """A stream that waits on an event recorded in a capture joins it (CUDA's fork): its work
    goes into the graph, in the order enqueued, and runs directly again once the capture ended."""
    from vmafxd.lanes import emulated

    dev = emulated.load().device(0)
    main, side = dev.create_stream(), dev.create_stream()
    fork, join = dev.create_event(), dev.create_event()
    ptr, back = dev.alloc(16), dev.alloc_host(16)
    dev.begin_capture(main)
    dev.memset_async(ptr, 1, 16, main)
    fork.record(main)
    side.wait_event(fork)
    dev.memset_async(ptr + 8, 2, 8, side)  # the branch: recorded, not run
    join.record(side)
    main.wait_event(join)
    dev.copy_dtoh_async(back, ptr, 16, main)
    assert not back.any()
    g = dev.end_capture(main)
    g.launch(main)
    assert back.tolist() == [1] * 8 + [2] * 8
    dev.memset_async(ptr, 3, 16, side)  # the capture ended for the branch too: runs now
    dev.copy_dtoh_async(back, ptr, 16, side)
    assert back.tolist() == [3] * 16
    g.launch(main)
    assert back.tolist() == [1] * 8 + [2] * 8
    g.close()
    dev.free(ptr)
    dev.free_host(back)
    for h in (main, side, fork, join):
        h.close()


def test_a_handle_dropped_during_a_capture_is_destroyed_after_it():
    """The garbage collector may finalize a handle nobody closed while a batch is captured; its
    destroy (a free) would invalidate the capture (CUDA's thread-local mode, as the emulator
    has it).  The safety net waits for the capture's end: the graph is made, the handle freed."""
    from vmafxd.lanes import emulated
    from vmafxd.lanes.gpu.batch_graphs import BatchGraphs
    from vmafxd.lanes.runtime import Owned, dropped_handles

    dev = emulated.load().device(0)
    stream = dev.create_stream()
    graphs = BatchGraphs(dev)
    graphs.on = True
    dropped_ptr, out, back = dev.alloc(64), dev.alloc(16), dev.alloc_host(16)
    leaked = [Owned("emu", dropped_ptr, dev.free)]
    before = dropped_handles("emu")
    seen = []

    def enqueue(s):
        dev.memset_async(out, 7, 16, s)
        leaked.clear()  # the last reference goes here, inside the capture: its finalizer runs
        seen.append(dropped_ptr in dev._buffers)  # not freed yet

    try:
        assert graphs.run("k", stream, enqueue)
        assert graphs.on and graphs.captures == 1 and graphs.launches == 1
        assert seen == [True]
        assert dropped_ptr not in dev._buffers  # freed once the capture ended
        assert dropped_handles("emu") == before + 1
        dev.copy_dtoh_async(back, out, 16, stream)
        assert back.tolist() == [7] * 16
        # and a free on the capturing thread, outside the safety net, invalidates the capture
        with pytest.raises(Exception, match="CAPTURE_UNSUPPORTED"):
            dev.begin_capture(stream)
            try:
                dev.free(out)
            finally:
                with pytest.raises(Exception, match="CAPTURE_INVALIDATED"):
                    dev.end_capture(stream)
    finally:
        graphs.close(stream)
        dev.free(out)
        dev.free_host(back)
        stream.close()
