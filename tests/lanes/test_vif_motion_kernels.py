"""The integer VIF and motion kernels (features/kernels/vif.cu, motion.cu) against their CPU
twins, sum for sum, at 8, 10, 12 and 16 bits and odd sizes.

VIF: the 16 int64 sums of every frame (scale x num_log, den_log, num_non_log, den_non_log)
equal ``vif.compute_stats`` exactly, in each variant of the statistics kernel that vif.cu
keeps for timing (the folded mirrored taps with the moments split or wide, and the unfolded
taps): the fold reorders integer sums only, and this is where a wrong bound would show.
Pictures reach the ends of the range (all-white 8-bit windows give the largest 32-bit
product sums; two-level 16-bit pictures the largest 48-bit ones; a checkerboard the largest
differences).  Motion: the SAD of every frame against its predecessor equals
``motion.compute_stats``, across batches (the kept history) and at every bit depth.
Runs on the emulator here and on every GPU runtime with a device (the ``gpu`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.features import motion as cpu_motion
from vmafxd.features import vif as cpu_vif


def _pictures(w: int, h: int, bpc: int, kind: str, seed: int):
    rng = np.random.default_rng(seed)
    mx = (1 << bpc) - 1
    dt = np.uint8 if bpc == 8 else np.uint16
    if kind == "noise":  # full-range noise, dist a noisy copy (both statistics branches)
        ref = rng.integers(0, mx + 1, (h, w))
        dist = np.clip(ref + rng.integers(-(mx // 16), mx // 16 + 1, (h, w)), 0, mx)
        return ref.astype(dt), dist.astype(dt)
    if kind == "smooth":  # gradients with a little noise: sigma below and above the noise floor
        y, x = np.mgrid[0:h, 0:w]
        ref = (x * 7 + y * 3 + seed * 11) % (mx + 1)
        dist = np.clip(ref + rng.integers(-2, 3, (h, w)), 0, mx)
        return ref.astype(dt), dist.astype(dt)
    if kind == "twolevel":  # only 0 and max: the largest moments
        ref = rng.choice([0, mx], (h, w))
        dist = np.where(rng.random((h, w)) < 0.3, mx - ref, ref)
        return ref.astype(dt), dist.astype(dt)
    if kind == "white":  # every window at the top of the range (frame 1 slightly off)
        ref = np.full((h, w), mx)
        dist = ref - (rng.integers(0, 2, (h, w)) if seed else 0)
        return ref.astype(dt), dist.astype(dt)
    if kind == "checker":
        y, x = np.mgrid[0:h, 0:w]
        ref = np.where((x + y + seed) % 2 == 0, mx, 0)
        dist = np.where((x // 2 + y // 3) % 2 == 0, 0, mx)
        return ref.astype(dt), dist.astype(dt)
    raise ValueError(kind)


def engine_records(rt, dev, feature: str, refs, dists, bitdepth: int, options: dict, *, batch: int = 2,
                   compile_options=()):
    """Each frame's raw int64 statistics record of ``feature`` (a plan holding only it), and
    the metrics, from the GPU engine built with ``compile_options`` added to the runtime's."""
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.lanes.gpu.engine import FrameSource, GpuFrame, GpuScorer, KernelSet

    plan = ScoringPlan.build([], [FeatureRequest(feature, dict(options))])
    h, w = refs[0].shape
    ks = KernelSet(rt, dev, [*rt.compile_options, *compile_options])
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
    records, metrics = [], {}
    try:
        for i in range(0, len(frames), batch):
            b = sc.enqueue(frames[i:i + batch])
            b.done.synchronize()
            rec = b.stats[:, twin.stats_offset:twin.stats_offset + twin.stats_bytes].view(np.int64)
            records += [rec[k].copy() for k in range(b.count)]
            metrics.update(sc.complete(b))
        metrics.update(sc.finish())
        stream.synchronize()
    finally:
        for ptr, host in bufs:
            dev.free(ptr)
            dev.free_host(host)
        sc.close()
        ks.close()
    return records, metrics


# (width, height, bitdepth, picture kind, options)
VIF_CASES = [
    (97, 61, 8, "noise", {}),
    (66, 50, 8, "white", {}),
    (49, 33, 8, "checker", {}),
    (160, 90, 8, "smooth", {"vif_enhn_gain_limit": 1.0}),
    (75, 41, 10, "noise", {}),
    (63, 47, 12, "twolevel", {}),
    (81, 35, 12, "smooth", {"vif_skip_scale0": True}),
    (67, 39, 16, "twolevel", {}),
    (70, 34, 16, "white", {}),
    (53, 29, 16, "noise", {}),
    # blocks inside the picture at scales 0 and 1 (the staging's aligned fast path, 16-bit loads)
    (200, 140, 10, "noise", {}),
    (208, 144, 16, "twolevel", {}),
]

#: the statistics kernel's compile-time variants (vif.cu): the default, and those kept for timing
VIF_VARIANTS = {
    "default": (),
    "unfolded": ("-DVIF_SYM=0",),
    "allfold-split": ("-DVIF_HFOLD=1", "-DVIF_VFOLD16=1"),
    "allfold-wide": ("-DVIF_HFOLD=1", "-DVIF_VFOLD16=1", "-DVIF_HSPLIT=0", "-DVIF_VSPLIT=0"),
    # strips of 3 columns in the horizontal pass (the host's tile stays 48 x 32)
    "strips4x3": ("-DVIF_TW=48", "-DVIF_TH=32", "-DVIF_RV=4", "-DVIF_RH=3", "-DVIF_STATS_MINB=3"),
    # the horizontal moments by widening integer multiply-adds (before the FP64 pipe)
    "int64": ("-DVIF_HF64=0",),
    "int64-strips4x3": ("-DVIF_HF64=0", "-DVIF_TW=48", "-DVIF_TH=32", "-DVIF_RV=4", "-DVIF_RH=3",
                        "-DVIF_STATS_MINB=3"),
    # the block's sums as nine-barrier trees (before the shuffles)
    "treesums": ("-DVIF_BSUM=0",),
    # the 16-bit vertical moments by widening integer multiply-adds (before the FP64 pipe)
    "int-vertical": ("-DVIF_VF64=0",),
}


def _case_id(case) -> str:
    w, h, bpc, kind, opts = case
    extra = ",".join(f"{k.removeprefix('vif_')}={v}" for k, v in opts.items())
    return f"{w}x{h}-{bpc}bit-{kind}" + (f"-{extra}" if extra else "")


@pytest.mark.gpu
@pytest.mark.parametrize("variant", list(VIF_VARIANTS))
def test_vif_kernels_equal_cpu_twin(gpu, variant):
    rt, dev = gpu
    dev.make_current()
    branches = np.zeros(4, bool)
    for case in VIF_CASES:
        w, h, bpc, kind, options = case
        pics = [_pictures(w, h, bpc, kind, seed) for seed in range(3)]
        refs, dists = [p[0] for p in pics], [p[1] for p in pics]
        # 3 frames in batches of 2: a full batch and a partial one
        got, metrics = engine_records(rt, dev, "vif", refs, dists, bpc, options,
                                      compile_options=VIF_VARIANTS[variant])
        values = cpu_vif.DECLARATION.resolve_options(options)
        for i, (r, d) in enumerate(zip(refs, dists)):
            want = cpu_vif.compute_stats(r, d, bpc, values).to_array()
            assert np.array_equal(got[i].reshape(4, 4), want), (
                f"{_case_id(case)} frame {i}: gpu {got[i].reshape(4, 4).tolist()} != cpu {want.tolist()}")
            branches |= want.any(axis=0)
    # the cases reach every sum, both branches of the per-pixel statistic
    assert branches.all()


MOTION_CASES = [
    (97, 61, 8, "noise"),
    (64, 48, 8, "checker"),  # the largest differences, both signs
    (70, 33, 10, "noise"),
    (45, 67, 12, "twolevel"),
    (66, 35, 16, "checker"),
    (33, 19, 16, "noise"),
    (3, 3, 8, "noise"),  # the smallest picture motion scores
    # blocks inside the picture (the staging's aligned fast path), 8- and 16-bit loads
    (200, 140, 8, "noise"),
    (196, 133, 12, "noise"),
]


@pytest.mark.gpu
def test_motion_kernel_equals_cpu_twin(gpu):
    rt, dev = gpu
    dev.make_current()
    for w, h, bpc, kind in MOTION_CASES:
        # alternate the kind with white so that consecutive frames differ everywhere
        refs = [(_pictures(w, h, bpc, kind, s)[0] if s % 2 == 0 else _pictures(w, h, bpc, "white", s)[0])
                for s in range(5)]
        # 5 frames in batches of 2: predecessors from the batch and from the kept history
        got, _ = engine_records(rt, dev, "motion", refs, refs, bpc, {"debug": True})
        assert got[0][0] == 0
        for i in range(1, len(refs)):
            want = cpu_motion.compute_stats(refs[i - 1], refs[i], bpc)
            assert got[i][0] == want, (w, h, bpc, kind, i, int(got[i][0]), want)
            assert want > 0


def test_host_grids_use_the_kernels_tiles():
    """The hosts size their grids by the tiles the kernel sources define (a smaller kernel
    tile than the host's grid assumes leaves pixels unscored)."""
    import re

    from vmafxd.lanes.gpu import kernels
    from vmafxd.lanes.gpu import motion as gpu_motion
    from vmafxd.lanes.gpu import vif as gpu_vif

    def define(source: str, name: str) -> int:
        return int(re.search(rf"#define {name} (\d+)", kernels.source(source)).group(1))

    assert (gpu_motion._TILE_W, gpu_motion._TILE_H) == (define("motion.cu", "MT_W"), define("motion.cu", "MT_H"))
    assert (gpu_vif._TILE_W, gpu_vif._TILE_H) == (define("vif.cu", "VIF_TW"), define("vif.cu", "VIF_TH"))
    assert (gpu_vif._DOWN_W, gpu_vif._DOWN_H) == (define("vif.cu", "VD_TW"), define("vif.cu", "VD_TH"))
