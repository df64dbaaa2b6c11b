"""Float SSIM against libvmaf, plus its options and building blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd import features
from vmafxd.features._ssim_core import (
    C1,
    C2,
    C3,
    GAUSSIAN_TAPS,
    SsimWorkspace,
    gaussian_filter_valid,
    to_float,
)
from vmafxd.features.declaration import OptionError
from vmafxd.features.ssim import (
    DECLARATION,
    box_decimate,
    decimated_size,
    metrics_from_stats,
    resolve_scale,
)
from vmafxd.core.picture import Picture

from ..reference import pair_params
from .harness import compare, run_feature

F32 = np.float32
#: our own bar against the full-precision doubles (the brief's is 1e-4 as printed)
FULLPREC_TOL = 1e-5


def picture(luma: np.ndarray, bitdepth: int = 8) -> Picture:
    return Picture((luma,), bitdepth, Subsampling.S400)


def random_luma(h, w, bitdepth=8, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    # smooth content plus noise, so both flat and busy windows occur
    y, x = np.mgrid[0:h, 0:w]
    base = (np.sin(x / 7.0) + np.cos(y / 11.0) + 2) / 4 * ((1 << bitdepth) - 1)
    noisy = base + rng.normal(0, 4 << (bitdepth - 8), (h, w))
    return np.clip(np.rint(noisy), 0, (1 << bitdepth) - 1).astype(dtype)


def score(options, ref, dist, bitdepth=8):
    values = DECLARATION.resolve_options(options)
    h, w = ref.shape
    ext = DECLARATION.cpu(values, w, h, bitdepth)
    ((index, metrics),) = ext.extract(7, picture(ref, bitdepth), picture(dist, bitdepth))
    assert index == 7
    assert ext.flush() == []
    return metrics


# --- against libvmaf ------------------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    """The default (exact_filter=true): libvmaf's printed value and full-precision double."""
    ours = run_feature(DECLARATION, pair)
    assert len(ours) >= pair.scored_frames
    assert compare(ours, pair, "vmaf_v0.6.1", ["float_ssim"], exact=True) == []


@pytest.mark.parametrize("pair", pair_params(full=False))
def test_fast_filter_stays_close_to_libvmaf(pair):
    """exact_filter=false: the float32 window formula, within FULLPREC_TOL."""
    ours = run_feature(DECLARATION, pair, {"exact_filter": "false"})
    assert len(ours) >= pair.scored_frames
    assert compare(ours, pair, "vmaf_v0.6.1", ["float_ssim"], exact=False, tol=3e-6) == []
    full = pair.fullprec("vmaf_v0.6.1")
    if full is not None:
        worst = max(
            abs(ours[i]["float_ssim"] - full["frames"][i]["metrics"]["float_ssim"])
            for i in range(pair.scored_frames)
        )
        assert worst <= FULLPREC_TOL


def test_identical_pictures_score_exactly_one():
    # libvmaf gives exactly 1 on p11 (identical input); any identical pair should
    luma = random_luma(120, 200, seed=3)
    metrics = score({"enable_lcs": True}, luma, luma.copy())
    assert metrics["float_ssim"] == 1.0
    assert metrics["float_ssim_s"] == 1.0
    flat = np.full((40, 50), 77, np.uint8)
    # libvmaf's double accumulation leaves rounding noise in a perfectly flat
    # window's variance (its float taps sum to 1.000002), so the contrast
    # term's double numerator and float denominator can differ by an ulp
    assert score({}, flat, flat)["float_ssim"] == pytest.approx(1.0, abs=1.2e-7)
    # the float32 formula sums around the centre sample: flat stays exact
    assert score({"exact_filter": False}, flat, flat)["float_ssim"] == 1.0


# --- options ------------------------------------------------------------------------


def test_declaration_matches_libvmaf_options():
    assert features.get("float_ssim") is DECLARATION
    opts = {o.name: o for o in DECLARATION.options}
    # libvmaf's four, then ours (not libvmaf's): the filter's arithmetic
    assert list(opts) == ["enable_lcs", "enable_db", "clip_db", "scale", "exact_filter"]
    assert [opts[n].default for n in opts] == [False, False, False, 0, True]
    assert (opts["scale"].min, opts["scale"].max) == (0, 10)
    assert not any(o.feature_param or o.alias for o in DECLARATION.options)
    assert DECLARATION.provides == ("float_ssim",)
    with pytest.raises(OptionError):
        DECLARATION.resolve_options({"scale": 11})
    with pytest.raises(OptionError):
        DECLARATION.resolve_options({"debug": True})


def test_enable_lcs_adds_the_mean_terms():
    values = DECLARATION.resolve_options({"enable_lcs": "true"})
    assert set(DECLARATION.metric_names(values)) == {"float_ssim", "float_ssim_l", "float_ssim_c", "float_ssim_s"}
    assert set(DECLARATION.metric_names(DECLARATION.resolve_options({}))) == {"float_ssim"}
    ref = random_luma(90, 130, seed=1)
    dist = random_luma(90, 130, seed=2)
    plain = score({}, ref, dist)
    lcs = score({"enable_lcs": True}, ref, dist)
    assert set(plain) == {"float_ssim"}
    assert lcs["float_ssim"] == plain["float_ssim"]
    for term in "lcs":
        assert 0.0 < lcs[f"float_ssim_{term}"] <= 1.0


def test_enable_db_and_clip_db():
    ref = random_luma(90, 130, seed=1)
    dist = random_luma(90, 130, seed=2)
    plain = score({}, ref, dist)["float_ssim"]
    db = score({"enable_db": True}, ref, dist)["float_ssim"]
    assert db == -10.0 * math.log10(1.0 - plain)
    # identical pictures: 1 - score is 0, so +inf unless clipped at the
    # dB of half a code value of error: ceil(10 log10(255^2 * 2 w h))
    same = score({"enable_db": True}, ref, ref)["float_ssim"]
    assert same == math.inf
    clipped = score({"enable_db": True, "clip_db": True}, ref, ref)["float_ssim"]
    assert clipped == math.ceil(10 * math.log10(255 * 255 * 2 * 90 * 130))
    clipped10 = score({"enable_db": True, "clip_db": True}, ref.astype(np.uint16) * 4, ref.astype(np.uint16) * 4, 10)
    assert clipped10["float_ssim"] == math.ceil(10 * math.log10(1023 * 1023 * 2 * 90 * 130))


def test_scale_option():
    assert [resolve_scale(0, w, h) for w, h in [(576, 324), (641, 361), (1280, 720), (1920, 1080)]] == [1, 1, 3, 4]
    assert resolve_scale(0, 1000, 383) == 1 and resolve_scale(0, 1000, 384) == 2  # half rounds up
    assert resolve_scale(5, 576, 324) == 5
    assert decimated_size(1280, 720, 3) == (426, 240)  # n / f, not a ceiling
    assert decimated_size(645, 361, 3) == (216, 121)  # plus one for odd sizes
    ref = random_luma(100, 160, seed=4)
    dist = random_luma(100, 160, seed=5)
    auto = score({}, ref, dist)["float_ssim"]
    assert score({"scale": 1}, ref, dist)["float_ssim"] == auto
    halved = score({"scale": 2}, ref, dist)["float_ssim"]
    assert halved != auto
    # the same as scoring the decimated pictures without decimation
    small_ref, small_dist = box_decimate(to_float(ref, 8), 2), box_decimate(to_float(dist, 8), 2)
    want = SsimWorkspace(*small_ref.shape).sums(small_ref, small_dist)
    assert metrics_from_stats(want)["float_ssim"] == halved
    with pytest.raises(ValueError):
        score({"scale": 10}, ref, dist)  # 16x10 is smaller than the window


def test_unsupported_bitdepth():
    with pytest.raises(ValueError):
        DECLARATION.cpu(DECLARATION.resolve_options({}), 64, 64, 9)


# --- building blocks ------------------------------------------------------------------


def mirrored(n: int, index: np.ndarray) -> np.ndarray:
    index = np.where(index < 0, -1 - index, index)
    return np.where(index >= n, 2 * n - 1 - index, index)


def slow_decimate(img: np.ndarray, factor: int, kernel: np.ndarray) -> np.ndarray:
    """libvmaf's decimation spelt out: float32 products of each tap, summed in double."""
    h, w = img.shape
    out_w, out_h = decimated_size(w, h, factor)
    size = kernel.shape[0]
    first = -(size // 2)
    total = np.zeros((out_h, out_w))
    for v in range(size):
        rows = mirrored(h, np.arange(out_h) * factor + first + v)
        for u in range(size):
            cols = mirrored(w, np.arange(out_w) * factor + first + u)
            total += (img[np.ix_(rows, cols)] * kernel[v, u]).astype(np.float64)
    return total.astype(F32)


@pytest.mark.parametrize("factor", [2, 3, 4, 5])
@pytest.mark.parametrize("shape", [(37, 50), (41, 47)])
def test_box_decimate_is_libvmafs(factor, shape):
    img = to_float(random_luma(*shape, bitdepth=10, seed=factor), 10)
    kernel = np.full((factor, factor), F32(1.0) / F32(factor * factor), F32)
    want = slow_decimate(img, factor, kernel)
    assert np.array_equal(box_decimate(img, factor), want)
    # straight from 10-bit samples, the divisor folded into the weight
    raw = random_luma(*shape, bitdepth=10, seed=factor)
    assert np.array_equal(box_decimate(raw, factor, 4.0), want)


def slow_window(img: np.ndarray) -> np.ndarray:
    """libvmaf's separable window: float32 products summed in double, per pass."""
    def one_pass(a, axis):
        n = a.shape[axis] - 10
        total = 0.0
        for i, k in enumerate(GAUSSIAN_TAPS):
            total = total + (np.take(a, np.arange(i, i + n), axis=axis) * k).astype(np.float64)
        return total.astype(F32)

    return one_pass(one_pass(img, 1), 0)


def test_window_filter_is_within_two_ulps_of_libvmafs():
    ref = to_float(random_luma(60, 90, seed=8), 8)
    for plane in (ref, ref * ref):
        want = slow_window(plane)
        got = gaussian_filter_valid(plane)
        assert got.shape == (50, 80)
        assert np.all(np.abs(got - want) <= 2 * np.spacing(want))


def test_terms_follow_libvmafs_formulas():
    """The sums against a direct per-pixel evaluation of libvmaf's formulas."""
    ref = to_float(random_luma(70, 96, seed=9), 8)
    dist = to_float(random_luma(70, 96, seed=10), 8)
    mu1, mu2, e11, e22, e12 = gaussian_filter_valid(np.stack([ref, dist, ref * ref, dist * dist, ref * dist]))
    var1 = np.maximum(e11 - mu1 * mu1, F32(0))
    var2 = np.maximum(e22 - mu2 * mu2, F32(0))
    cov = e12 - mu1 * mu2
    sd = np.sqrt(var1 * var2)
    l = (2.0 * mu1.astype(np.float64) * mu2 + C1) / (mu1 * mu1 + mu2 * mu2 + C1)
    c = (2.0 * sd.astype(np.float64) + C2) / (var1 + var2 + C2)
    s = (np.where((cov < 0) & (sd <= 0), F32(0), cov) + C3) / (sd + C3)
    got = SsimWorkspace(*ref.shape).sums(ref, dist)
    assert got.pixels == l.size
    for total, want in ((got.l, l.sum()), (got.c, c.sum()), (got.s, s.sum(dtype=np.float64)),
                        (got.lcs, (l * c * s).sum())):
        assert total == pytest.approx(want, rel=1e-12)


def test_tiling_does_not_change_the_sums(monkeypatch):
    from vmafxd.features import _ssim_core

    ref = to_float(random_luma(150, 70, seed=11), 8)
    dist = to_float(random_luma(150, 70, seed=12), 8)
    whole = SsimWorkspace(150, 70)
    assert whole.tile == 140
    monkeypatch.setattr(_ssim_core, "_TILE_BYTES", 5 * 4 * 70 * 9)  # 9-row tiles, a 5-row last one
    tiled = SsimWorkspace(150, 70)
    assert tiled.tile == 9
    a, b = whole.sums(ref, dist), tiled.sums(ref, dist)
    for name in ("l", "c", "s", "lcs"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-13)


def test_strided_and_high_bitdepth_input():
    luma = random_luma(80, 100, bitdepth=10, seed=13)
    other = random_luma(80, 100, bitdepth=10, seed=14)
    wide = np.zeros((80, 300), np.uint16)
    wide[:, ::3] = luma
    strided = score({}, wide[:, ::3], other, 10)
    assert strided == score({}, luma, other, 10)
    # 10-bit samples are divided by 4: the same score as 8-bit content scaled up
    ref8, dist8 = random_luma(80, 100, seed=15), random_luma(80, 100, seed=16)
    as10 = score({}, ref8.astype(np.uint16) * 4, dist8.astype(np.uint16) * 4, 10)
    assert as10 == score({}, ref8, dist8)


def test_metrics_from_stats_rounds_means_to_float32():
    from vmafxd.features._ssim_core import ScaleSums

    stats = ScaleSums(pixels=3, l=2.9, c=2.8, s=2.7, lcs=2.5)
    m = metrics_from_stats(stats, enable_lcs=True)
    assert m["float_ssim"] == float(F32(2.5 / 3))
    assert m["float_ssim_c"] == float(F32(2.8 / 3))
