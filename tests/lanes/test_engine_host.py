"""The GPU engine's host step in whole-array form gives what the per-item form gave.

``job_table`` (the gather jobs of a batch, from cached per-layout templates)
against ``convert_jobs`` frame by frame; the launcher's one-call packing
against the per-value views; launches prepared once per batch size against
the launcher's packing at each batch's address; the integer PSNR twin's
columns against the CPU twin's per-frame ``metrics_from_stats``.  No device
is needed.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.lanes.gpu.engine import FrameSource, GpuFrame, Staging, convert_jobs, job_table
from vmafxd.lanes.gpu.launch import F32, F64, I32, I64, U64, Launcher


def _source(ptr: int, fmt: PixelFormat, w: int, h: int, pad: int) -> FrameSource:
    """A source of ``fmt`` with rows padded by ``pad`` bytes (offsets and pitches as a producer's)."""
    elem = 2 if fmt is PixelFormat.P010 else 1
    if fmt.semi_planar:
        pitch = w * elem + pad
        return FrameSource(ptr, fmt, ((0, pitch), (pitch * h, pitch)))
    cw, ch = (w + 1) // 2, (h + 1) // 2
    yp, cp = w + pad, cw + pad
    return FrameSource(ptr, fmt, ((0, yp), (yp * h, cp), (yp * h + cp * ch, cp)))


@pytest.mark.parametrize("bitdepth,formats,padded", [
    (8, (PixelFormat.YUV420P,), True),
    (8, (PixelFormat.YUV420P,), False),  # every source of one layout
    (8, (PixelFormat.YUV420P, PixelFormat.NV12), True),
    (10, (PixelFormat.P010,), True),
    (10, (PixelFormat.P010,), False),
])
def test_job_table_is_convert_jobs_frame_by_frame(bitdepth, formats, padded):
    w, h = 97, 61
    stg = Staging.build(w, h, bitdepth, Subsampling.S420)
    rng = np.random.default_rng(11)
    templates: dict = {}
    for n in (1, 2, 3, 7, 1, 32, 2):
        frames = []
        for i in range(n):
            fmt_r, fmt_d = formats[i % len(formats)], formats[(i + 1) % len(formats)]
            pad = int(rng.integers(0, 64)) if padded else 16
            frames.append(GpuFrame(_source(int(rng.integers(1, 1 << 47)) * 256, fmt_r, w, h, pad),
                                   _source(int(rng.integers(1, 1 << 47)) * 256, fmt_d, w, h, 16)))
        base = int(rng.integers(1, 1 << 40)) * 256
        want = []
        for i, f in enumerate(frames):
            want += convert_jobs(f.ref, stg, base, i, 0)
            want += convert_jobs(f.dist, stg, base, i, 1)
        got = job_table(frames, stg, base, templates)
        assert got.dtype == np.uint64 and got.shape == (len(want), 8)
        assert got.tolist() == want
        # into a larger pinned buffer, as the engine builds it (a second time: from the kept tables)
        pinned = np.full(32 * 2 * 3 * 8 + 5, 7, dtype=np.uint64)
        for _ in range(2):
            into = job_table(frames, stg, base, templates, out=pinned)
            assert into.tolist() == want and np.shares_memory(into, pinned)
            assert (pinned[len(want) * 8:] == 7).all()
    assert 1 <= len(templates) <= 80


class _Device:
    def launch_packed(self, function, grid, block, shared, stream, args_address, types):
        pass


@pytest.mark.parametrize("values", [
    ((1 << 64) - 1, -(1 << 63), -(1 << 31), -0.0, np.float32(0.1), (1 << 31) - 1),
    (np.uint64(7), np.int64(-3), np.int32(5), 1, 2, True),  # numpy scalars, ints for floats
    (1, 2, 3.7, 4, 5, 6),  # a float for an int: numpy's cast (the views' path)
])
def test_launcher_packs_as_the_views_write(values):
    types = [U64, I64, I32, F64, F32, I32]
    launcher = Launcher(_Device(), None, types)
    launcher._record[:] = np.uint64(0xDEADBEEFDEADBEEF)
    launcher((1,), (1,), None, *values)
    want = np.zeros(len(types), dtype=np.uint64)
    for i, (t, v) in enumerate(zip(types, values)):
        want[i:i + 1].view(t)[0] = v
    got = launcher._record.copy()
    # a 4-byte value's slot: its low bytes are the value (the kernel reads those alone)
    for i, t in enumerate(types):
        assert got[i:i + 1].view(np.uint8)[:t.itemsize].tobytes() == want[i:i + 1].view(np.uint8)[:t.itemsize].tobytes()
    with pytest.raises(TypeError, match="takes 6 arguments"):
        launcher((1,), (1,), None, 1, 2)


@pytest.mark.parametrize("bitdepth,options", [
    (8, {}),
    (10, {"enable_mse": True}),
    (8, {"min_sse": 0.5, "enable_mse": True}),
    (12, {"reduced_hbd_peak": True}),
])
def test_psnr_columns_are_the_per_frame_metrics(bitdepth, options):
    from vmafxd.features import psnr

    opts = psnr.DECLARATION.with_defaults(psnr.DECLARATION.resolve_options(options))
    shapes = [(324, 576), (162, 288), (162, 288)]
    params = psnr.psnr_params(opts, bitdepth, shapes)
    rng = np.random.default_rng(bitdepth)
    sse = np.concatenate([
        np.zeros((2, 3), dtype=np.int64),  # identical planes: the floor, then the cap
        rng.integers(0, 50, (10, 3)),
        rng.integers(0, 1 << 40, (10, 3)),
        np.array([[(1 << 53) + 1, (1 << 62) + 12345, 1]]),  # int64 -> double rounds
    ]).astype(np.int64)
    cols = psnr.columns_from_stats(sse, shapes, params)
    for i in range(len(sse)):
        want = psnr.metrics_from_stats([int(v) for v in sse[i]], shapes, params)
        got = {k: float(v[i]) for k, v in cols.items()}
        assert got == want, i
        assert all(v.dtype == np.float64 for v in cols.values())


def test_psnr_columns_take_c_log10_where_a_ratio_is_not_positive():
    """Every ratio is positive but where peak^2 wraps to 0 in C's uint32 (peak 65536): log10(0) is
    -inf there, as C's, not math.log10's error; the columns still equal the per-frame metrics."""
    from vmafxd.features import psnr

    shapes = [(4, 4), (2, 2), (2, 2)]
    params = psnr.PsnrParams(bitdepth=16, peak=1 << 16, psnr_max=(60.0, 60.0, 60.0))
    sse = np.array([[0, 5, 7], [3, 0, 1]], dtype=np.int64)
    cols = psnr.columns_from_stats(sse, shapes, params)
    for i in range(len(sse)):
        want = psnr.metrics_from_stats([int(v) for v in sse[i]], shapes, params)
        assert {k: float(v[i]) for k, v in cols.items()} == want == {k: -np.inf for k in want}


@pytest.mark.gpu
@pytest.mark.parametrize("motion_options", ["", ":motion.motion_five_frame_window=true:motion.motion_moving_average=true"])
def test_batches_as_columns_equal_frame_by_frame_and_the_cpu_lane(motion_options):
    """24 frames in batches of 16 (the twins' columns: psnr, motion's temporal rule) and of 3
    (frame by frame) give the CPU lane's numbers, bit for bit, on the emulator."""
    from tests.lanes.conftest import load_runtime
    from tests.lanes.test_gpu_engine import cpu_scores, gpu_scores
    from tests.reference import vendored_pairs
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.model import load_model

    rt, dev = load_runtime("emu")
    pair = next(p for p in vendored_pairs() if p.id.startswith("p01_"))
    plan = ScoringPlan.build(
        [load_model(f"version=vmaf_v0.6.1:vif.debug=true:adm.debug=true:motion.debug=true{motion_options}")],
        [FeatureRequest("psnr", {"enable_mse": "true", "enable_apsnr": "true"})])
    want = cpu_scores(plan, pair)
    assert len(want) == 24 and "mse_cb" in want[5] and any(n.startswith("integer_motion3") for n in want[5])
    for batch in (16, 3):
        assert gpu_scores(rt, dev, plan, pair, batch=batch) == want, batch


class _Recorder:
    """A device whose launches keep a copy of each argument record."""

    def __init__(self, n: int):
        self.n = n
        self.records: list[tuple] = []

    def launch_packed(self, function, grid, block, shared, stream, args_address, types):
        ptrs = np.ctypeslib.as_array((ctypes.c_uint64 * self.n).from_address(args_address))
        record = [np.ctypeslib.as_array((ctypes.c_uint64 * 1).from_address(int(p)))[0] for p in ptrs]
        self.records.append((tuple(grid), tuple(block), shared, [int(v) for v in record]))


def test_prepared_launches_pack_what_the_launcher_packs_with_the_base_added():
    from vmafxd.lanes.gpu.launch import PreparedBatches, Relative

    types = [U64, I64, I32, F64, F32, U64, U64]
    dev = _Recorder(len(types))
    launcher = Launcher(dev, None, types)
    calls = []

    def make(n, at):
        calls.append((n, at))
        base = Relative(0)
        yield launcher, (n, 2), (128,), (base + 64, -5, n, 0.25, np.float32(1.5), 1 << 40, base + at + 8 * n)
        yield launcher, (1,), (256,), (3 + base, 7, -1, -0.0, 2, 0, base)

    batches = PreparedBatches(make)
    for n, base in [(1, 1 << 33), (2, 1 << 34), (1, 5 << 33), (3, 1 << 35)]:
        dev.records.clear()
        batches.run(None, base, n, 4096)
        got = list(dev.records)
        dev.records.clear()
        launcher((n, 2), (128,), None, base + 64, -5, n, 0.25, np.float32(1.5), 1 << 40, base + 4096 + 8 * n)
        launcher((1,), (256,), None, base + 3, 7, -1, -0.0, 2, 0, base)
        assert got == dev.records
    assert calls == [(1, 4096), (2, 4096), (3, 4096)]  # made once per key


def test_relative_addresses_refuse_all_but_adding_an_int():
    from vmafxd.lanes.gpu.launch import Relative

    r = Relative(16)
    assert (r + 8).offset == (8 + r).offset == 24 and (r + np.int64(4)).offset == 20
    for bad in (lambda: r * 2, lambda: r // 4, lambda: r - 1, lambda: r + r, lambda: r + 0.5, lambda: r + True):
        with pytest.raises(TypeError):
            bad()
    launcher = Launcher(_Device(), None, [I64])
    with pytest.raises(TypeError, match="must be U64"):
        launcher.prepare((1,), (1,), (Relative(0),))
