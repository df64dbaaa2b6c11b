"""The integer ADM kernels (features/kernels/adm.cu) against the CPU twin, sum for sum.

Each case runs the GPU engine with a plan holding only ``adm`` on small
synthetic pictures and compares the 36 int64 sums of every frame
(``AdmStats.num/den/aim``) with ``adm.compute_stats`` exactly, then the
metrics.  The pictures are chosen to reach libvmaf's corner cases: full-range
noise and two-level pictures at 12 and 16 bits (int32 wraps, the wide gain's
15-bit rounding, int16 stores), odd and minimal sizes (mirrors, regions that
touch the band edges, AVX-512 masking rows), and option sets where libvmaf's
AVX-512 routines and its C leftovers give other sums (the kernel must pick per
pixel as the twin's masks say).  Runs on the emulator here and on every GPU
runtime with a device (the ``gpu`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.features import adm as cpu
from vmafxd.features._adm_plan import plan_for

from ..features.test_adm import synthetic_pair


def _pictures(w: int, h: int, bpc: int, kind: str, seed: int):
    rng = np.random.default_rng(seed)
    mx = (1 << bpc) - 1
    dt = np.uint8 if bpc == 8 else np.uint16
    if kind == "synthetic":
        ref, dist = synthetic_pair(w, h, bpc)
        if seed:  # a second frame that differs
            dist = np.clip(dist.astype(np.int64) + rng.integers(-3, 4, dist.shape), 0, mx).astype(dt)
        return ref, dist
    if kind == "noise":
        return rng.integers(0, mx + 1, (h, w)).astype(dt), rng.integers(0, mx + 1, (h, w)).astype(dt)
    if kind == "twolevel":  # only 0 and max: the largest band values, sign flips between ref and dist
        ref = rng.choice([0, mx], (h, w)).astype(dt)
        dist = np.where(rng.random((h, w)) < 0.5, ref, mx - ref).astype(dt)
        return ref, dist
    if kind == "checker":
        y, x = np.mgrid[0:h, 0:w]
        ref = np.where((x + y + seed) % 2 == 0, mx, 0).astype(dt)
        dist = np.where((x // 2 + y // 3) % 2 == 0, 0, mx).astype(dt)
        return ref, dist
    raise ValueError(kind)


# (width, height, bitdepth, picture kind, options)
CASES = [
    (160, 90, 8, "synthetic", {}),
    (97, 61, 8, "synthetic", {}),
    (33, 33, 8, "noise", {}),
    (34, 35, 8, "checker", {}),
    (523, 41, 8, "noise", {}),
    # 8-bit tiles whose columns lie inside the picture (the DWT's four-column loads), both row paths
    (1003, 77, 8, "noise", {}),
    (1003, 77, 8, "synthetic", {"adm_skip_scale0": True}),
    (41, 300, 8, "twolevel", {}),
    (192, 108, 10, "synthetic", {}),
    (300, 170, 10, "noise", {"adm_csf_mode": 1, "adm_enhn_gain_limit": 1.0}),
    (150, 77, 12, "twolevel", {"adm_enhn_gain_limit": 2.5}),
    (192, 108, 12, "synthetic", {"adm_enhn_gain_limit": 2.5}),
    (200, 120, 16, "noise", {}),
    (200, 120, 16, "twolevel", {}),
    (201, 121, 16, "checker", {"adm_enhn_gain_limit": 1.3}),
    (1030, 40, 16, "twolevel", {"adm_csf_mode": 1}),
    # CSF weights near 2^16 at scale 0: squares of the masked values past 2^62, int32 stores wrap
    (96, 64, 16, "twolevel", {"adm_csf_mode": 1, "adm_norm_view_dist": 14.5, "adm_ref_display_height": 480}),
    (160, 90, 8, "synthetic", {"adm_enhn_gain_limit": 1.0}),
    (160, 90, 8, "synthetic", {"adm_enhn_gain_limit": 1.7}),
    (160, 90, 8, "synthetic", {"adm_csf_mode": 1}),
    (160, 90, 8, "noise", {"adm_csf_mode": 1, "adm_csf_scale": 7.0, "adm_csf_diag_scale": 3.0}),
    (160, 90, 8, "synthetic", {"adm_csf_mode": 2}),
    (160, 90, 8, "synthetic", {"adm_csf_mode": 3, "adm_norm_view_dist": 5.0}),
    (160, 90, 8, "synthetic", {"adm_norm_view_dist": 5.0, "adm_ref_display_height": 2160}),
    (160, 90, 8, "synthetic", {"adm_skip_scale0": True}),
    (160, 90, 8, "synthetic", {"adm_skip_aim": True, "adm_noise_weight": 0.5}),
    (161, 91, 10, "noise", {"adm_skip_scale0": True, "adm_skip_aim": True}),
]


def _case_id(case) -> str:
    w, h, bpc, kind, opts = case
    extra = ",".join(f"{k.removeprefix('adm_')}={v}" for k, v in opts.items())
    return f"{w}x{h}-{bpc}bit-{kind}" + (f"-{extra}" if extra else "")


def gpu_adm_stats(rt, dev, refs, dists, bitdepth: int, options: dict, batch: int = 2):
    """The GPU engine's AdmStats of each frame (a plan holding only adm with ``options``)."""
    from vmafxd.lanes.gpu.engine import FrameSource, GpuFrame, GpuScorer, KernelSet
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan

    plan = ScoringPlan.build([], [FeatureRequest("adm", dict(options))])
    h, w = refs[0].shape
    ks = KernelSet(rt, dev)  # the runtime's own compile options
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, w, h, bitdepth, Subsampling.S400, max_batch=batch)
    twin = sc.twins[0]
    bufs = []

    def upload(x):
        x = np.ascontiguousarray(x)
        host = dev.alloc_host(x.nbytes)
        host[:] = x.view(np.uint8).ravel()
        ptr = dev.alloc(x.nbytes)
        dev.copy_htod_async(ptr, host, x.nbytes, stream)
        bufs.append((ptr, host))
        return FrameSource(ptr, PixelFormat.YUV400P, ((0, x.strides[0]),))

    frames = [GpuFrame(upload(r), upload(d)) for r, d in zip(refs, dists)]
    stats, metrics = [], {}
    try:
        for i in range(0, len(frames), batch):
            b = sc.enqueue(frames[i:i + batch])
            b.done.synchronize()
            rec = b.stats[:, twin.stats_offset:twin.stats_offset + twin.stats_bytes].view(np.int64)
            stats += [twin.stats_of(rec[k]) for k in range(b.count)]
            metrics.update(sc.complete(b))
        metrics.update(sc.finish())
        stream.synchronize()
    finally:
        for ptr, host in bufs:
            dev.free(ptr)
            dev.free_host(host)
        sc.close()
        ks.close()
    return stats, metrics


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_adm_kernel_equals_cpu_twin(gpu, case):
    rt, dev = gpu
    dev.make_current()
    w, h, bpc, kind, options = case
    pics = [_pictures(w, h, bpc, kind, seed) for seed in range(3)]
    refs, dists = [p[0] for p in pics], [p[1] for p in pics]
    # 3 frames in batches of 2: a full batch and a partial one
    got, metrics = gpu_adm_stats(rt, dev, refs, dists, bpc, options, batch=2)
    values = cpu.DECLARATION.resolve_options(options)
    for i, (r, d) in enumerate(zip(refs, dists)):
        want = cpu.compute_stats(r, d, bpc, values)
        for field in ("num", "den", "aim"):
            assert np.array_equal(getattr(got[i], field), getattr(want, field)), (
                f"frame {i} {field}: gpu {getattr(got[i], field).tolist()} != cpu {getattr(want, field).tolist()}")
        expect = cpu.metrics_from_stats(want, values)
        names = cpu.DECLARATION.metric_names(values)
        for name, v in expect.items():
            if name in names:
                g = metrics[i][names[name]]
                assert g == v or (np.isnan(g) and np.isnan(v)), (i, name, g, v)


@pytest.mark.parametrize("size", [(33, 33), (34, 34), (41, 300), (97, 61), (523, 41), (576, 324), (641, 361),
                                  (1280, 720), (1920, 1080), (3840, 2160), (1030, 40)])
def test_vector_ranges_rebuild_the_twins_masks(size):
    """The kernels get libvmaf's AVX-512 columns as ranges; they must be the twin's masks exactly."""
    from vmafxd.lanes.gpu.adm import PARAM_NAMES, scale_table

    w, h = size
    values = cpu.DECLARATION.resolve_options({})
    _, params = plan_for(w, h, values)
    table = scale_table(params, 100.0, False)  # raises if a mask is not a column run / rectangle
    assert table.shape == (4, len(PARAM_NAMES))
    col = {n: i for i, n in enumerate(PARAM_NAMES)}
    for s, p in enumerate(params):
        ring_cols = np.arange(p.region.ring[1].start, p.region.ring[1].stop)
        lo, hi = table[s, col["vr_lo"]], table[s, col["vr_hi"]]
        assert np.array_equal((ring_cols >= lo) & (ring_cols < hi), p.vec_ring)
        if p.vec_region is None:
            assert table[s, col["vg_lo"]] == table[s, col["vg_hi"]]


def test_gpu_twin_refuses_what_the_cpu_twin_refuses():
    from types import SimpleNamespace

    from vmafxd.lanes.gpu import adm as gpu_adm
    from vmafxd.lanes.gpu.engine import Staging

    inst = SimpleNamespace(values=cpu.DECLARATION.resolve_options({}))
    scorer = SimpleNamespace(staging=Staging.build(32, 40, 8, Subsampling.S400))
    with pytest.raises(ValueError, match="at least 33x33"):
        gpu_adm.make(inst, scorer)
