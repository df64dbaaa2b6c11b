"""float_ssim and float_ms_ssim on the GPU lane (ssim.cu) against their CPU twins.

Small synthetic pictures (textures, edges, flat and identical areas), every
bit depth and the options the CPU twins implement, on each runtime the `gpu`
fixture finds (the emulator always).  The lane's contract for float features
is |gpu - cpu| <= 1e-5; on top of that the default (CPU-twin) filter gives the
CPU twin's per-scale sums up to the order of the double additions, which the
strict tests pin down so that a wrong constant or index cannot hide below 1e-5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.features import ms_ssim as ms_cpu
from vmafxd.features import ssim as ssim_cpu
from vmafxd.lanes.gpu import ssim as gpu_ssim
from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet
from vmafxd.core.picture import picture_from_planes
from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu


@dataclass
class Synthetic:
    """Just enough of tests.reference.Pair for gpu_scores / cpu_scores."""

    width: int
    height: int
    bitdepth: int
    refs: list = field(default_factory=list)
    dists: list = field(default_factory=list)
    pix_fmt: str = "yuv420p"
    id: str = "synthetic"

    def pictures(self):
        return self.refs, self.dists


def _content(rng, w: int, h: int, peak: int, seed_shift: float) -> np.ndarray:
    """A reference luma plane: gradient, a disc, checker texture, a flat band, noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = 0.35 * peak * (x / w) + 0.25 * peak * (y / h)
    img += 0.2 * peak * (((x - w * 0.6) ** 2 + (y - h * 0.4) ** 2) < (min(w, h) * 0.25) ** 2)
    img += 0.1 * peak * ((((x + seed_shift) // 4 + y // 4) % 2) * (x < w / 3))
    img += rng.normal(0.0, 0.02 * peak, size=img.shape)
    img[h // 2 : h // 2 + 24, :] = 0.5 * peak  # flat band: variances are pure rounding noise
    img[: 12, : 40] = 0  # black corner: zero products
    img[-12:, -40:] = peak  # white corner
    return np.clip(np.rint(img), 0, peak)


def synthetic(w: int, h: int, bitdepth: int, frames: int = 3, seed: int = 1) -> Synthetic:
    rng = np.random.default_rng(seed)
    peak = (1 << bitdepth) - 1
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    cw, ch = (w + 1) >> 1, (h + 1) >> 1
    pair = Synthetic(w, h, bitdepth)
    for f in range(frames):
        ref = _content(rng, w, h, peak, 3.0 * f)
        if f == 0:
            dist = ref.copy()  # identical: SSIM exactly 1
        else:
            blurred = (ref + np.roll(ref, 1, 0) + np.roll(ref, 1, 1) + np.roll(ref, -1, 1)) / 4
            dist = blurred + rng.normal(0.0, 0.01 * peak * f, size=ref.shape)
            dist[h // 2 : h // 2 + 24, :] = ref[h // 2 : h // 2 + 24, :]  # identical flat band
        dist = np.clip(np.rint(dist), 0, peak)
        chroma = [np.full((ch, cw), peak // 2, dtype) for _ in range(2)]
        pair.refs.append(picture_from_planes([ref.astype(dtype), *chroma], bitdepth, Subsampling.S420))
        pair.dists.append(picture_from_planes([dist.astype(dtype), *chroma], bitdepth, Subsampling.S420))
    return pair


def _plan(feature: str, options: dict) -> ScoringPlan:
    return ScoringPlan.build([], [FeatureRequest(feature, options)])


def _close(a: float, b: float, tol: float = 1e-5) -> bool:
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= tol


def _compare(rt, dev, plan, pair, batch: int = 2):
    dev.make_current()
    cpu = cpu_scores(plan, pair)
    gpu = gpu_scores(rt, dev, plan, pair, batch=batch)
    assert set(gpu) == set(cpu)
    bad = [(i, k, v, gpu[i].get(k)) for i, m in cpu.items() for k, v in m.items()
           if gpu[i].get(k) is None or not _close(v, gpu[i][k])]
    assert not bad, f"{len(bad)} cells differ, e.g. {bad[:5]}"
    assert all(set(gpu[i]) == set(cpu[i]) for i in cpu)
    return cpu, gpu


# -- options and bit depths ------------------------------------------------------------


@pytest.mark.parametrize("bitdepth", [8, 10, 12, 16])
@pytest.mark.parametrize("options", [
    {},
    {"enable_lcs": "true"},
    {"enable_db": "true", "clip_db": "true", "scale": "2"},
    {"enable_lcs": "true", "enable_db": "true", "scale": "3"},
], ids=["default", "lcs", "db-clip-scale2", "lcs-db-scale3"])
def test_float_ssim_options(gpu, bitdepth, options):
    rt, dev = gpu
    cpu, _ = _compare(rt, dev, _plan("float_ssim", options), synthetic(203, 181, bitdepth))
    names = set(cpu[0])
    assert ("float_ssim_l" in names) == ("enable_lcs" in options)


@pytest.mark.parametrize("bitdepth", [8, 10, 12, 16])
@pytest.mark.parametrize("options", [
    {},
    {"enable_lcs": "true"},
    {"enable_db": "true", "clip_db": "true"},
    {"enable_lcs": "true", "enable_db": "true"},
], ids=["default", "lcs", "db-clip", "lcs-db"])
def test_float_ms_ssim_options(gpu, bitdepth, options):
    rt, dev = gpu
    cpu, _ = _compare(rt, dev, _plan("float_ms_ssim", options), synthetic(203, 181, bitdepth))
    assert ("float_ms_ssim_s_scale4" in cpu[0]) == ("enable_lcs" in options)


@pytest.mark.parametrize("scale", [1, 4, 5, 10])
def test_float_ssim_scales(gpu, scale):
    # odd sizes decimate to n / factor + 1; factor 10 leaves 22x19
    rt, dev = gpu
    _compare(rt, dev, _plan("float_ssim", {"scale": str(scale), "enable_lcs": "true"}), synthetic(211, 187, 8))


def test_auto_scale_beyond_the_option_range(gpu):
    # 2700x2690: automatic factor 11, past the unrolled 2..10 (the generic box path)
    rt, dev = gpu
    assert ssim_cpu.resolve_scale(0, 2700, 2690) == 11
    _compare(rt, dev, _plan("float_ssim", {"enable_lcs": "true"}), synthetic(2700, 2690, 8, frames=1))


def test_auto_scale_both_features_one_plan(gpu):
    # 400x390: auto scale 2 for float_ssim; both twins in one record
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest("float_ssim", {"enable_lcs": "true"}),
                                  FeatureRequest("float_ms_ssim", {"enable_lcs": "true"})])
    _compare(rt, dev, plan, synthetic(400, 390, 10, frames=3), batch=3)


def test_identical_pictures_score_one(gpu):
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest("float_ssim", {"enable_db": "true", "clip_db": "true"}),
                                  FeatureRequest("float_ms_ssim", {})])
    pair = synthetic(180, 176, 8, frames=1)
    _, got = _compare(rt, dev, plan, pair)
    cap = ssim_cpu.db_cap(True, 180, 176, 8)
    assert got[0]["float_ssim"] == cap
    assert got[0]["float_ms_ssim"] == 1.0


def test_sizes_the_cpu_twins_refuse(gpu):
    rt, dev = gpu
    dev.make_current()
    ks = KernelSet(rt, dev)  # the runtime's own compile options
    stream = dev.create_stream()
    try:
        for feature, options, (w, h) in [("float_ms_ssim", {}, (175, 400)), ("float_ssim", {"scale": "3"}, (40, 30))]:
            plan = _plan(feature, options)
            with pytest.raises(ValueError):
                GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=2)
    finally:
        ks.close()


# -- strict: the per-scale sums ----------------------------------------------------------


def _records(rt, dev, plan, pair, exact: bool):
    """Each twin's raw per-frame records (float64 [scales, 4]) for the pair's frames, one batch."""
    dev.make_current()
    refs, dists = pair.pictures()
    ks = KernelSet(rt, dev)  # the runtime's own compile options
    stream = dev.create_stream()
    old = gpu_ssim.GpuSsimBase.exact_filter
    gpu_ssim.GpuSsimBase.exact_filter = exact
    try:
        sc = GpuScorer(dev, ks, stream, plan, pair.width, pair.height, pair.bitdepth, Subsampling.S420,
                       max_batch=len(refs))
    finally:
        gpu_ssim.GpuSsimBase.exact_filter = old
    up = HostUploads(dev, stream)
    try:
        frames = [GpuFrame(up.source(r.planes, PixelFormat.YUV420P), up.source(d.planes, PixelFormat.YUV420P))
                  for r, d in zip(refs, dists)]
        batch = sc.enqueue(frames)
        batch.done.synchronize()
        recs = [twin._records(batch.stats, batch.count).copy() for twin in sc.twins]
        sc.complete(batch)
        sc.finish()
    finally:
        up.close()
        sc.close()
        ks.close()
    return recs


@pytest.mark.parametrize("bitdepth,exact", [(8, True), (16, True), (8, False), (16, False)])
def test_sums_equal_the_cpu_twins(gpu, bitdepth, exact):
    """Both filters (exact_filter true, the default, and false): each scale's l, c,
    s, lcs sums are the CPU twin's with the same filter, up to summation order."""
    rt, dev = gpu
    pair = synthetic(201, 185, bitdepth, frames=2)
    plan = ScoringPlan.build([], [FeatureRequest("float_ssim", {"scale": "2"}), FeatureRequest("float_ms_ssim")])
    ssim_rec, ms_rec = _records(rt, dev, plan, pair, exact=exact)
    for i, (r, d) in enumerate(zip(*pair.pictures())):
        want = ssim_cpu.compute_stats(r.luma, d.luma, bitdepth, 2, exact=exact)
        np.testing.assert_allclose(ssim_rec[i, 0], [want.l, want.c, want.s, want.lcs], rtol=1e-12, atol=0)
        for k, s in enumerate(ms_cpu.compute_stats(r.luma, d.luma, bitdepth, exact=exact)):
            np.testing.assert_allclose(ms_rec[i, k, :3], [s.l, s.c, s.s], rtol=1e-12, atol=0)


def test_exact_filter_within_contract(gpu):
    """libvmaf's double accumulation in the Gaussian passes: within 1e-5 of the CPU twins' fast filter too."""
    rt, dev = gpu
    pair = synthetic(203, 181, 10, frames=2)
    plan = ScoringPlan.build([], [FeatureRequest("float_ssim", {"scale": "1"}), FeatureRequest("float_ms_ssim")])
    ssim_rec, ms_rec = _records(rt, dev, plan, pair, exact=True)
    for i, (r, d) in enumerate(zip(*pair.pictures())):
        want = ssim_cpu.compute_stats(r.luma, d.luma, 10, 1, exact=False)
        n = want.pixels
        assert abs(ssim_rec[i, 0, 3] / n - want.lcs / n) <= 1e-5
        for k, s in enumerate(ms_cpu.compute_stats(r.luma, d.luma, 10, exact=False)):
            for got, ref in zip(ms_rec[i, k, :3], (s.l, s.c, s.s)):
                assert abs(got / s.pixels - ref / s.pixels) <= 1e-5


def test_records_are_deterministic(gpu):
    """No floating-point atomics: two runs give the same bits."""
    rt, dev = gpu
    pair = synthetic(203, 181, 8, frames=2, seed=5)
    plan = ScoringPlan.build([], [FeatureRequest("float_ssim", {"scale": "1"}), FeatureRequest("float_ms_ssim")])
    a = _records(rt, dev, plan, pair, exact=False)
    b = _records(rt, dev, plan, pair, exact=False)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()
