"""Float ANSNR against libvmaf (every frame, full precision), its filter and its arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafxd import features
from vmafxd.features.float_ansnr import (
    DECLARATION, DIS_KERNEL, NAMES, REF_KERNEL, FloatAnsnr, filtered, metrics_from_stats, signal_noise,
)

from .float_simple_vectors import case_params, differences, run_case

F32 = np.float32


@pytest.mark.parametrize("case", case_params())
def test_matches_libvmaf_exactly(case):
    assert differences(run_case(DECLARATION, case), case, NAMES) == []


def test_registered_under_libvmaf_name_with_both_outputs():
    assert features.get("float_ansnr") is DECLARATION
    assert all(features.provider(n) is DECLARATION for n in NAMES)


def _filter2d_loop(f, src):
    """ansnr_filter2d_s as written (no ANSNR_OPT_BORDER_REPLICATE)."""
    fw = f.shape[0]
    h, w = src.shape
    out = np.zeros_like(src)
    for i in range(h):
        for j in range(w):
            accum = F32(0)
            for fi in range(fw):
                inner = F32(0)
                for fj in range(fw):
                    ii, jj = i - fw // 2 + fi, j - fw // 2 + fj
                    ii = -ii if ii < 0 else (2 * h - ii - 1 if ii >= h else ii)
                    jj = -jj if jj < 0 else (2 * w - jj - 1 if jj >= w else jj)
                    inner = F32(inner + F32(f[fi, fj] * src[ii, jj]))
                accum = F32(accum + inner)
            out[i, j] = accum
    return out


@pytest.mark.parametrize("shape", [(3, 4), (7, 5)])
def test_filter_is_libvmafs_loop_with_its_edges(shape):
    rng = np.random.default_rng(11)
    src = (rng.standard_normal(shape) * 60).astype(F32)
    for kernel in (REF_KERNEL, DIS_KERNEL):
        assert np.array_equal(filtered(src, kernel), _filter2d_loop(kernel, src))
    # the kernels are libvmaf's double constants rounded to float
    assert REF_KERNEL[1, 1] == F32(0.25) and DIS_KERNEL[2, 2] == F32(127.0 / 571.0)


def test_zero_noise_scores_the_cap_and_the_floor():
    m = metrics_from_stats(F32(5.0), F32(0.0), 6, 6, 8)
    assert m["float_ansnr"] == 60.0
    assert m["float_anpsnr"] == 60.0
    m = metrics_from_stats(F32(1.0), F32(3.0), 6, 6, 10)
    # a float quotient: 1/3 rounded to float before log10
    assert m["float_ansnr"] == 10.0 * math.log10(float(F32(1.0) / F32(3.0))) != 10.0 * math.log10(1.0 / 3.0)
    # the PSNR form floors the noise at 1e-10 before dividing peak^2 * w * h by it
    assert metrics_from_stats(F32(1.0), F32(1e-12), 6, 6, 10)["float_anpsnr"] == 72.0


def test_tiny_planes_and_other_depths_are_refused():
    with pytest.raises(ValueError, match="at least 3x3"):
        signal_noise(np.zeros((2, 8), np.uint8), np.zeros((2, 8), np.uint8), 8)
    with pytest.raises(ValueError, match="float_ansnr"):
        FloatAnsnr({}, 16, 16, 11)
