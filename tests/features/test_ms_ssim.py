"""Float MS-SSIM against libvmaf, plus its options and building blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd import features
from vmafxd.features._ssim_core import ScaleSums, to_float
from vmafxd.features.declaration import OptionError
from vmafxd.features.ms_ssim import (
    ALPHAS,
    BETAS,
    DECLARATION,
    LOW_PASS,
    SCALES,
    MsSsimWorkspace,
    check_size,
    compute_stats,
    low_pass_decimate,
    metrics_from_stats,
    scale_sizes,
)
from vmafxd.core.picture import Picture

from ..reference import pair_params
from .harness import compare, run_feature
from .test_ssim import random_luma, slow_decimate

F32 = np.float32
#: our own bar against the full-precision doubles (the brief's is 1e-4 as printed)
FULLPREC_TOL = 1e-5


def picture(luma: np.ndarray, bitdepth: int = 8) -> Picture:
    return Picture((luma,), bitdepth, Subsampling.S400)


def score(options, ref, dist, bitdepth=8):
    values = DECLARATION.resolve_options(options)
    h, w = ref.shape
    ext = DECLARATION.cpu(values, w, h, bitdepth)
    ((index, metrics),) = ext.extract(3, picture(ref, bitdepth), picture(dist, bitdepth))
    assert index == 3
    assert ext.flush() == []
    return metrics


# --- against libvmaf ------------------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    """The default (exact_filter=true): libvmaf's printed value and full-precision double."""
    ours = run_feature(DECLARATION, pair)
    assert len(ours) >= pair.scored_frames
    assert compare(ours, pair, "vmaf_v0.6.1", ["float_ms_ssim"], exact=True) == []


@pytest.mark.parametrize("pair", pair_params(full=False))
def test_fast_filter_stays_close_to_libvmaf(pair):
    """exact_filter=false: the float32 window formula, within FULLPREC_TOL."""
    ours = run_feature(DECLARATION, pair, {"exact_filter": "false"})
    assert len(ours) >= pair.scored_frames
    assert compare(ours, pair, "vmaf_v0.6.1", ["float_ms_ssim"], exact=False, tol=3e-6) == []
    full = pair.fullprec("vmaf_v0.6.1")
    if full is not None:
        worst = max(
            abs(ours[i]["float_ms_ssim"] - full["frames"][i]["metrics"]["float_ms_ssim"])
            for i in range(pair.scored_frames)
        )
        assert worst <= FULLPREC_TOL


def test_identical_pictures_score_exactly_one():
    # libvmaf gives exactly 1 on p11 (identical input)
    luma = random_luma(180, 200, seed=3)
    metrics = score({"enable_lcs": True}, luma, luma.copy())
    assert metrics["float_ms_ssim"] == 1.0
    for i in range(SCALES):
        assert metrics[f"float_ms_ssim_s_scale{i}"] == 1.0


# --- options ------------------------------------------------------------------------


def test_declaration_matches_libvmaf_options():
    assert features.get("float_ms_ssim") is DECLARATION
    opts = {o.name: o for o in DECLARATION.options}
    # libvmaf's three, then ours (not libvmaf's): the filter's arithmetic
    assert list(opts) == ["enable_lcs", "enable_db", "clip_db", "exact_filter"]
    assert [o.default for o in DECLARATION.options] == [False, False, False, True]
    assert all(not o.feature_param and o.alias is None for o in DECLARATION.options)
    assert DECLARATION.provides == ("float_ms_ssim",)
    with pytest.raises(OptionError):
        DECLARATION.resolve_options({"scale": 2})  # float_ssim has it, float_ms_ssim does not


def test_enable_lcs_adds_every_scales_terms():
    names = set(DECLARATION.metric_names(DECLARATION.resolve_options({"enable_lcs": True})))
    per_scale = {f"float_ms_ssim_{t}_scale{i}" for t in "lcs" for i in range(SCALES)}
    assert names == {"float_ms_ssim"} | per_scale
    assert set(DECLARATION.metric_names(DECLARATION.resolve_options({}))) == {"float_ms_ssim"}
    ref, dist = random_luma(180, 190, seed=1), random_luma(180, 190, seed=2)
    plain = score({}, ref, dist)
    lcs = score({"enable_lcs": True}, ref, dist)
    assert set(plain) == {"float_ms_ssim"}
    assert set(lcs) == {"float_ms_ssim"} | per_scale
    # the score is the weighted product of the per-scale means
    product = 1.0
    for i in range(SCALES):
        l, c, s = (lcs[f"float_ms_ssim_{t}_scale{i}"] for t in "lcs")
        product *= math.pow(l, ALPHAS[i]) * math.pow(c, BETAS[i]) * math.pow(s, BETAS[i])
    assert lcs["float_ms_ssim"] == product == plain["float_ms_ssim"]


def test_enable_db_and_clip_db():
    ref, dist = random_luma(180, 190, seed=1), random_luma(180, 190, seed=2)
    plain = score({}, ref, dist)["float_ms_ssim"]
    assert score({"enable_db": True}, ref, dist)["float_ms_ssim"] == -10.0 * math.log10(1.0 - plain)
    assert score({"enable_db": True}, ref, ref)["float_ms_ssim"] == math.inf
    clipped = score({"enable_db": True, "clip_db": True}, ref, ref)["float_ms_ssim"]
    assert clipped == math.ceil(10 * math.log10(255 * 255 * 2 * 180 * 190))


def test_size_limits():
    check_size(176, 176)
    for w, h in [(175, 400), (400, 175)]:
        with pytest.raises(ValueError):
            DECLARATION.cpu(DECLARATION.resolve_options({}), w, h, 8)
    assert scale_sizes(641, 361) == [(361, 641), (181, 321), (91, 161), (46, 81), (23, 41)]


def test_metrics_from_stats_negative_structure_is_nan():
    # C's pow of a negative mean gives NaN (math.pow would raise)
    ok = ScaleSums(pixels=4, l=4.0, c=4.0, s=4.0)
    stats = [ok, ok, ok, ok, ScaleSums(pixels=4, l=4.0, c=4.0, s=-1.0)]
    assert math.isnan(metrics_from_stats(stats)["float_ms_ssim"])
    assert metrics_from_stats([ok] * SCALES)["float_ms_ssim"] == 1.0


# --- building blocks ------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(40, 52), (41, 53), (23, 30)])
def test_low_pass_decimate_is_libvmafs(shape):
    a = to_float(random_luma(*shape, bitdepth=10, seed=5), 10)
    b = to_float(random_luma(*shape, seed=6), 8)
    got = low_pass_decimate(np.stack([a, b]))
    for picture_, out in zip((a, b), got):
        want = slow_decimate(picture_, 2, LOW_PASS)
        assert np.array_equal(out, want)
    # and again on a decimated (non-integer) picture
    again = low_pass_decimate(got[:1])[0]
    assert np.array_equal(again, slow_decimate(got[0], 2, LOW_PASS))


def test_decimation_tiles_do_not_change_the_result(monkeypatch):
    from vmafxd.features import ms_ssim

    pics = np.stack([to_float(random_luma(91, 64, seed=s), 8) for s in (1, 2)])
    whole = low_pass_decimate(pics)
    monkeypatch.setattr(ms_ssim, "_DECIMATE_TILE_BYTES", 2 * 32 * 8 * 7)  # 7-row tiles
    assert np.array_equal(low_pass_decimate(pics), whole)


def test_compute_stats_scales():
    ref, dist = random_luma(200, 181, seed=7), random_luma(200, 181, seed=8)
    stats = compute_stats(ref, dist, 8)
    sizes = scale_sizes(181, 200)
    assert [s.pixels for s in stats] == [(h - 10) * (w - 10) for h, w in sizes]
    # a kept workspace gives the same sums, frame after frame
    ws = MsSsimWorkspace(181, 200)
    compute_stats(dist, ref, 8, ws)
    again = compute_stats(ref, dist, 8, ws)
    for a, b in zip(again, stats):
        assert (a.pixels, a.l, a.c, a.s) == (b.pixels, b.l, b.c, b.s)
        assert math.isnan(a.lcs)  # MS-SSIM does not need l * c * s
