"""Float VIF against libvmaf (every frame, full precision), against a slow transcription, and its options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafxd.features import get
from vmafxd.features._float_common import row_major_sum, separable_filter, to_float_plane
from vmafxd.features._float_vif_core import filter_size, gaussian_filter, log2f_approx, statistic
from vmafxd.features.declaration import OptionError
from vmafxd.features.float_vif import DECLARATION, compute_stats, metrics_from_stats, prescale

from ..reference import pair_params
from .harness import compare, compare_pooled, run_feature

ALL_NAMES = list(DECLARATION.provides) + list(DECLARATION.debug_provides)
F32 = np.float32


@pytest.mark.parametrize("pair", pair_params())
def test_debug_run_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair, {"debug": True})
    errors = compare(ours, pair, "vmaf_v0.6.1", ALL_NAMES, exact=True)
    errors += compare_pooled(ours, pair, "vmaf_v0.6.1", ALL_NAMES)
    assert not errors, "\n".join(errors[:20])


# --- the building blocks against direct loops ------------------------------------


def _slow_filter(src, taps, mode="plain", other=None):
    """vif_filter1d_s's C fallback with float32 scalars: vertical then horizontal, mirrored edges."""
    h, w = src.shape
    r = len(taps) // 2
    tmp = np.zeros((h, w), F32)
    for i in range(h):
        for j in range(w):
            acc = F32(0.0)
            for k, f in enumerate(taps):
                ii = i - r + k
                ii = -ii if ii < 0 else (2 * h - ii - 2 if ii >= h else ii)
                x = src[ii, j]
                if mode == "sq":
                    x = x * x
                elif mode == "xy":
                    x = x * other[ii, j]
                acc = acc + f * x
            tmp[i, j] = acc
    out = np.zeros((h, w), F32)
    for i in range(h):
        for j in range(w):
            acc = F32(0.0)
            for k, f in enumerate(taps):
                jj = j - r + k
                jj = -jj if jj < 0 else (2 * w - jj - 2 if jj >= w else jj)
                acc = acc + f * tmp[i, jj]
            out[i, j] = acc
    return out


@pytest.mark.parametrize("scale", [0, 3])
def test_separable_filter_matches_c_loops(scale):
    rng = np.random.default_rng(scale)
    a = to_float_plane(rng.integers(0, 256, (19, 23), dtype=np.uint8), 8)
    b = to_float_plane(rng.integers(0, 256, (19, 23), dtype=np.uint8), 8)
    taps = gaussian_filter(scale, 1.0)
    assert np.array_equal(separable_filter(a, taps), _slow_filter(a, taps))
    assert np.array_equal(separable_filter(a, taps, square=True), _slow_filter(a, taps, "sq"))
    assert np.array_equal(separable_filter(a, taps, other=b), _slow_filter(a, taps, "xy", b))


def test_row_major_sum_is_sequential_per_row():
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((7, 301)) * 1000).astype(F32)
    acc = F32(0.0)
    for row in a:
        inner = F32(0.0)
        for v in row:
            inner = inner + v
        acc = acc + inner
    assert row_major_sum(a) == acc


def test_gaussian_filters():
    assert [filter_size(s, 1.0) for s in range(4)] == [17, 9, 5, 3]
    assert filter_size(0, 0.5) == 9 and filter_size(3, 0.5) == 3
    for s in range(4):
        taps = gaussian_filter(s, 1.0)
        assert taps.dtype == np.float32 and np.array_equal(taps, taps[::-1])
        assert abs(float(taps.sum()) - 1.0) < 1e-6
    # scale 0: 17 taps of a Gaussian with sigma 17 / 5, normalised (computed in double here)
    weights = [math.exp(-0.5 * (x / 3.4) ** 2) for x in range(-8, 9)]
    expected = [v / sum(weights) for v in weights]
    assert np.allclose(gaussian_filter(0, 1.0), expected, rtol=1e-6, atol=0)


def test_log2_approximation():
    x = np.array([1.0, 2.0, 1.5, 3.0, 1000.0, 1e6], dtype=F32)
    got = log2f_approx(x)
    assert got.dtype == np.float32
    assert float(got[0]) == 0.0 and float(got[1]) == 1.0
    assert np.all(np.abs(got.astype(np.float64) - np.log2(x.astype(np.float64))) < 1e-4)
    # an approximation, not log2f: 1.5 is off in the low bits
    assert float(got[2]) != float(F32(math.log2(1.5)))


def test_statistic_branches():
    mu = np.array([0, 0, 0, 0], F32)
    xx = np.array([0.0, 100.0, 100.0, 1.0], F32)  # sigma1_sq: flat, textured, textured, below nsq
    yy = np.array([0.0, 100.0, 50.0, 4.0], F32)
    xy = np.array([0.0, 100.0, -10.0, 1.0], F32)
    num, den = statistic(mu, mu, xx, yy, xy, 100.0, 2.0)
    assert float(num[0]) == 1.0 and float(den[0]) == 1.0          # flat: 1 - 0
    assert float(num[1]) == pytest.approx(math.log2(1 + 100 / 2.0), abs=1e-4)  # identical: num == den
    assert float(num[1]) == float(den[1])
    assert float(num[2]) == 0.0                                   # negative covariance
    assert float(num[3]) == pytest.approx(1 - 4 * 4 / 65025, rel=1e-6)  # below the noise: 1 - s2 * max_inv


def test_identical_pictures_score_one():
    rng = np.random.default_rng(3)
    a = to_float_plane(rng.integers(0, 256, (64, 80), dtype=np.uint8), 8)
    opts = DECLARATION.resolve_options()
    m = metrics_from_stats(compute_stats(a, a.copy(), opts), opts)
    # float rounding keeps num and den a few ulp apart even for identical pictures
    for s in range(4):
        assert m[f"vif_scale{s}"] == pytest.approx(1.0, abs=1e-5)
    assert m["vif"] == pytest.approx(1.0, abs=1e-5)


def test_skip_scale0_and_min_vals():
    rng = np.random.default_rng(4)
    a = to_float_plane(rng.integers(0, 256, (64, 80), dtype=np.uint8), 8)
    b = to_float_plane(rng.integers(0, 256, (64, 80), dtype=np.uint8), 8)
    opts = DECLARATION.resolve_options({"vif_skip_scale0": True, "vif_scale3_min_val": 0.9})
    m = metrics_from_stats(compute_stats(a, b, opts), opts)
    assert m["vif_scale0"] == 0.0 and m["vif_num_scale0"] == 0.0 and m["vif_den_scale0"] == -1.0
    assert m["vif_scale3"] == 0.9
    assert m["vif_num"] == m["vif_num_scale1"] + m["vif_num_scale2"] + m["vif_num_scale3"]
    names = DECLARATION.metric_names(opts)
    assert names["vif_scale1"] == "vif_scale1_s3miv_0.9_ssclz"


def test_prescale_nearest():
    a = np.arange(12, dtype=F32).reshape(3, 4)
    assert prescale(a, 1.0) is a
    up = prescale(a, 2.0)
    assert up.shape == (6, 8) and np.array_equal(up[::2, ::2], a)


@pytest.mark.parametrize(
    "key, value, field",
    [
        ("vif_kernelscale", 0.3, "float_vif.vif_kernelscale"),
        ("vif_enhn_gain_limit", 0.5, "float_vif.vif_enhn_gain_limit"),
        ("vif_prescale_method", "bicubic", "float_vif.vif_prescale_method"),
        ("vif_prescale_method", "cubic", "float_vif.vif_prescale_method"),
        ("nope", 1, "float_vif.nope"),
    ],
)
def test_option_errors_name_the_field(key, value, field):
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options({key: value})
    assert e.value.field == field


def test_registered_with_libvmaf_names():
    assert get("float_vif") is DECLARATION
    values = DECLARATION.resolve_options({"egl": "1"})
    assert DECLARATION.metric_names(values)["vif_scale0"] == "vif_scale0_egl_1"
