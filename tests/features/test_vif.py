"""Integer VIF against libvmaf, against a slow transcription of its loops, and its options."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from vmafxd.features import vif
from vmafxd.features.declaration import OptionError
from vmafxd.features.vif import (
    DECLARATION,
    FILTER_TAPS,
    LOG2_TABLE,
    SIGMA_NSQ,
    ScaleAccumulators,
    VifStats,
    build_log2_table,
    compute_stats,
    metrics_from_stats,
)

from ..reference import pair_params
from .harness import compare, run_feature

ALL_NAMES = list(DECLARATION.provides) + list(DECLARATION.debug_provides)


# --- exactness against libvmaf ------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_debug_run_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair, {"debug": True})
    errors = compare(ours, pair, "vmaf_v0.6.1", ALL_NAMES, exact=True)
    assert not errors, "\n".join(errors[:20])


@pytest.mark.parametrize("pair", pair_params())
def test_gain_limit_1_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair, {"vif_enhn_gain_limit": 1.0})
    names = [name + "_egl_1" for name in DECLARATION.provides]
    errors = compare(ours, pair, "vmaf_v0.6.1neg", names, exact=True)
    assert not errors, "\n".join(errors[:20])


# --- a slow, direct transcription of libvmaf's loops ----------------------------


def _log2_fixed(v: int) -> int:
    k = v.bit_length() - 16
    return int(LOG2_TABLE[v >> k]) + 2048 * k


def _oracle_stats(ref, dist, bitdepth, gain_limit=100.0, skip_scale0=False) -> VifStats:
    """libvmaf's integer VIF with plain integer arrays and a per-pixel Python loop."""

    def filt(a, taps, axis):
        half = len(taps) // 2
        pad = [(half, half) if ax == axis else (0, 0) for ax in range(2)]
        padded = np.pad(a, pad, mode="reflect")  # mirror without repeating the edge
        n = a.shape[axis]
        return sum(np.int64(t) * np.take(padded, np.arange(k, k + n), axis=axis) for k, t in enumerate(taps))

    def rshift(v, s):
        return (v + ((1 << (s - 1)) if s else 0)) >> s

    x, y = ref.astype(np.int64), dist.astype(np.int64)
    scales = []
    for scale in range(4):
        taps = FILTER_TAPS[scale]
        if scale > 0:
            first = bitdepth if scale == 1 else 16
            h, w = x.shape
            blurred = (rshift(filt(rshift(filt(p, taps, 0), first), taps, 1), 16) for p in (x, y))
            x, y = (b[: h // 2 * 2 : 2, : w // 2 * 2 : 2] for b in blurred)
        if scale == 0 and skip_scale0:
            scales.append(None)
            continue
        mu_shift, sq_shift = (bitdepth, 2 * (bitdepth - 8)) if scale == 0 else (16, 16)
        mu1, mu2 = (filt(rshift(filt(p, taps, 0), mu_shift), taps, 1).astype(np.uint64) for p in (x, y))
        xx, yy, xy = (rshift(filt(rshift(filt(p, taps, 0), sq_shift), taps, 1), 16) for p in (x * x, y * y, x * y))

        def sigma(moment, a, b):
            product = ((a * b + np.uint64(1 << 31)) >> np.uint64(32)).astype(np.int64)
            return (moment - product).astype(np.int32)  # uint32 difference read as int32

        s1, s2, s12 = sigma(xx, mu1, mu1), sigma(yy, mu2, mu2), sigma(xy, mu1, mu2)
        num_log = den_log = num_non_log = den_non_log = 0
        for sigma1_sq, sigma2_sq, sigma12 in zip(s1.ravel().tolist(), s2.ravel().tolist(), s12.ravel().tolist()):
            sigma2_sq = max(sigma2_sq, 0)
            if sigma1_sq >= SIGMA_NSQ:
                den_log += _log2_fixed(SIGMA_NSQ + sigma1_sq) - 2048 * 17
                if sigma12 > 0 and sigma2_sq > 0:
                    g = sigma12 / (sigma1_sq + 65536 * 1.0e-10)
                    sv_sq = max(int(sigma2_sq - g * sigma12), 0)
                    g = min(g, gain_limit)
                    numer1 = sv_sq + SIGMA_NSQ
                    num_log += _log2_fixed(int(g * g * sigma1_sq) + numer1) - _log2_fixed(numer1)
            else:
                num_non_log += sigma2_sq
                den_non_log += 1
        scales.append(ScaleAccumulators(num_log, den_log, num_non_log, den_non_log))
    return VifStats(tuple(scales))


def _synthetic(kind: str, h: int, w: int, bitdepth: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    top = (1 << bitdepth) - 1
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    if kind == "noise":
        ref = rng.integers(0, top + 1, (h, w))
        dist = np.clip(ref + rng.normal(0, top / 20, (h, w)), 0, top)
    elif kind == "smooth":
        yy, xx = np.mgrid[0:h, 0:w]
        ref = top / 2 * (1 + np.sin(xx / 5.0) * np.cos(yy / 7.0))
        dist = np.clip(ref * 1.3 - top * 0.1 + rng.normal(0, 2, (h, w)), 0, top)  # enhanced contrast
    elif kind == "extremes":
        yy, xx = np.mgrid[0:h, 0:w]
        ref = ((xx + yy) % 2) * top
        dist = np.where(rng.random((h, w)) < 0.3, top - ref, ref)
    else:  # flat
        ref = np.full((h, w), top // 3)
        dist = np.full((h, w), top // 3 + 1)
    return ref.astype(dtype), np.asarray(dist).round().astype(dtype)


@pytest.mark.parametrize(
    "kind,h,w,bitdepth",
    [
        ("noise", 37, 45, 8),
        ("smooth", 48, 40, 8),
        ("extremes", 16, 16, 8),
        ("flat", 24, 33, 8),
        ("noise", 33, 40, 10),
        ("smooth", 40, 35, 12),
        ("extremes", 32, 27, 16),
        ("noise", 20, 18, 16),
    ],
)
def test_matches_transcription(kind, h, w, bitdepth, monkeypatch):
    ref, dist = _synthetic(kind, h, w, bitdepth)
    for gain_limit, skip in ((100.0, False), (1.0, False), (100.0, True)):
        options = {"vif_enhn_gain_limit": gain_limit, "vif_skip_scale0": skip}
        want = _oracle_stats(ref, dist, bitdepth, gain_limit, skip)
        assert compute_stats(ref, dist, bitdepth, options) == want
    # strips of 8 rows must add up to the same sums
    monkeypatch.setattr(vif, "_STRIP_PIXELS", 1)
    assert compute_stats(ref, dist, bitdepth, {}) == _oracle_stats(ref, dist, bitdepth)


def test_strided_planes_and_reused_scratch():
    ref, dist = _synthetic("noise", 70, 90, 8, seed=3)
    want = compute_stats(ref, dist, 8, {})
    wide_ref = np.zeros((70, 200), np.uint8)
    wide_dist = np.zeros((70, 200), np.uint8)
    wide_ref[:, 7:97], wide_dist[:, 7:97] = ref, dist
    ext = DECLARATION.cpu(DECLARATION.resolve_options({}), 90, 70, 8)
    other_ref, other_dist = _synthetic("smooth", 70, 90, 8)
    for _ in range(2):  # the scratch arrays are reused across frames
        assert compute_stats(wide_ref[:, 7:97], wide_dist[:, 7:97], 8, {}, ext._scratch) == want
        compute_stats(other_ref, other_dist, 8, {}, ext._scratch)


# --- the log2 table --------------------------------------------------------------


def test_log2_table_matches_c_library():
    path = ctypes.util.find_library("m")
    if path is None:
        pytest.skip("no C math library")
    libm = ctypes.CDLL(path)
    libm.log2f.restype = ctypes.c_float
    libm.log2f.argtypes = [ctypes.c_float]
    table = build_log2_table()
    for i in range(32767, 65536):
        # C: (uint16_t)round(log2f((float)i) * 2048), round() halves away from zero
        scaled = float(libm.log2f(float(i))) * 2048.0
        assert table[i] == int(np.floor(scaled + 0.5)), i
    assert not table[:32767].any()


# --- the score arithmetic ----------------------------------------------------------


def test_metrics_from_stats_arithmetic():
    acc = ScaleAccumulators(num_log=2048 * 300, den_log=2048 * 400 + 1, num_non_log=16384 * 65025 * 3, den_non_log=10)
    stats = VifStats((acc, acc, acc, acc))
    out = metrics_from_stats(stats, {"debug": True})
    num = np.float32(300.0 + (10 - 3.0))
    den = np.float32(400.0 + 1 / 2048 + 10)
    assert out["integer_vif_scale2"] == float(num / den)  # a float division, not a double one
    assert out["integer_vif_scale2"] != float(num) / float(den)
    assert out["integer_vif_num_scale1"] == float(num)
    assert out["integer_vif_den"] == 4 * float(den)
    assert out["integer_vif"] == (4 * float(num)) / (4 * float(den))
    assert set(out) == set(ALL_NAMES)
    assert set(metrics_from_stats(stats, {})) == set(DECLARATION.provides)


def test_metrics_with_scale0_skipped():
    acc = ScaleAccumulators(4096, 8192, 0, 5)
    stats = VifStats((None, acc, acc, acc))
    out = metrics_from_stats(stats, {"debug": True, "vif_skip_scale0": True})
    assert out["integer_vif_scale0"] == 0.0
    assert out["integer_vif_num_scale0"] == 0.0
    assert out["integer_vif_den_scale0"] == -1.0
    assert out["integer_vif_num"] == 3 * 7.0
    assert out["integer_vif_den"] == 3 * 9.0
    assert VifStats.from_array(stats.to_array(), skip_scale0=True) == stats


def test_skip_scale0_keeps_other_scales():
    ref, dist = _synthetic("noise", 64, 64, 8, seed=5)
    full = compute_stats(ref, dist, 8, {})
    skipped = compute_stats(ref, dist, 8, {"vif_skip_scale0": True})
    assert skipped.scales[0] is None
    assert skipped.scales[1:] == full.scales[1:]


# --- options and names ---------------------------------------------------------------


@pytest.mark.parametrize("value", [0.5, 0.999, 100.5])
def test_gain_limit_bounds(value):
    with pytest.raises(OptionError) as info:
        DECLARATION.resolve_options({"vif_enhn_gain_limit": value})
    assert info.value.field == "vif.vif_enhn_gain_limit"


def test_option_aliases_and_metric_names():
    values = DECLARATION.resolve_options({"egl": "1", "ssclz": "true"})
    assert values == {"debug": False, "vif_enhn_gain_limit": 1.0, "vif_skip_scale0": True}
    names = DECLARATION.metric_names(values)
    assert names["integer_vif_scale3"] == "integer_vif_scale3_egl_1_ssclz"
    assert "integer_vif" not in names
    debug = DECLARATION.metric_names(DECLARATION.resolve_options({"debug": True}))
    assert debug["integer_vif_den_scale2"] == "integer_vif_den_scale2"


def test_too_small_picture_is_rejected():
    with pytest.raises(ValueError):
        DECLARATION.cpu(DECLARATION.resolve_options({}), 15, 40, 8)


@pytest.mark.parametrize("over", [{}, {"debug": True}, {"debug": True, "vif_skip_scale0": True}])
def test_frames_scored_together_equal_frames_scored_alone(over):
    """metrics_from_sums over N frames gives each frame exactly its own numbers, a frame with
    zero denominators among them."""
    rng = np.random.default_rng(5)
    skip = bool(over.get("vif_skip_scale0"))
    stats = []
    for k in range(6):
        rows = [ScaleAccumulators(*(int(v) for v in rng.integers(0, 1 << 40, 4))) for _ in range(4)]
        if k == 5:
            rows = [ScaleAccumulators(0, 0, 0, 0)] * 4
        if skip:
            rows[0] = None
        stats.append(VifStats(tuple(rows)))
    batch = vif.metrics_from_sums(np.stack([s.to_array() for s in stats]), skip, over)
    alone = [metrics_from_stats(s, over) for s in stats]
    for b, a in zip(batch, alone):
        assert b.keys() == a.keys()
        assert all(b[k] == a[k] or (np.isnan(b[k]) and np.isnan(a[k])) for k in a)
    assert len({b["integer_vif_scale1"] for b in batch}) == 6


@pytest.mark.parametrize("skip", [False, True])
def test_small_batches_give_the_array_paths_bits(skip, monkeypatch):
    """A few frames without debug take the scalar path (``_small_columns``): bit for bit what the
    whole-array path gives, over sums of every magnitude (int64 -> double rounding past 2**53),
    negatives, and zero denominators (where the scalar path declines and the array path scores)."""
    rng = np.random.default_rng(17)
    cases = []
    for n in (1, 2, 3, 4, 5, 1, 2):
        exp = rng.integers(0, 62, (n, 16))
        acc = (rng.random((n, 16)) * 2.0 ** exp).astype(np.int64)
        acc[rng.random((n, 16)) < 0.05] *= -1
        cases.append(acc)
    zero = np.zeros((2, 16), np.int64)
    zero[1] = rng.integers(1, 1 << 40, 16)
    cases.append(zero)  # frame 0: every den 0.0 (0 / 0 is nan, as in the array path)
    small = [vif.columns_from_sums(acc, skip, {}) for acc in cases]
    monkeypatch.setattr(vif, "SMALL_BATCH", 0)
    for acc, got in zip(cases, small):
        want = vif.columns_from_sums(acc, skip, {})
        assert list(got) == list(want)
        assert all(np.asarray(got[k]).tobytes() == np.asarray(want[k]).tobytes() for k in want), acc
    assert vif._small_columns(zero.reshape(-1, 4, 4), skip) is None
    assert vif._small_columns(cases[0].reshape(-1, 4, 4), skip) is not None
