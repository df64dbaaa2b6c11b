"""Float PSNR against libvmaf (every frame, full precision) and its arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafxd import features
from vmafxd.features.float_psnr import (
    DECLARATION, PEAKS, FloatPsnr, metrics_from_stats, noise_from_sse, noise_sum,
)

from .float_simple_vectors import case_params, differences, run_case


@pytest.mark.parametrize("case", case_params())
def test_matches_libvmaf_exactly(case):
    assert differences(run_case(DECLARATION, case), case, DECLARATION.provides) == []


def test_registered_under_libvmaf_name():
    assert features.get("float_psnr") is DECLARATION
    assert features.provider("float_psnr") is DECLARATION
    assert DECLARATION.metric_names(DECLARATION.resolve_options({})) == {"float_psnr": "float_psnr"}


def test_identical_frames_score_the_cap():
    rng = np.random.default_rng(3)
    for depth, (_, cap) in PEAKS.items():
        luma = rng.integers(0, 1 << depth, (9, 11)).astype(np.uint8 if depth == 8 else np.uint16)
        assert noise_sum(luma, luma, depth) == 0.0
        assert metrics_from_stats(0.0, 11, 9, depth) == {"float_psnr": cap}


def test_sixteen_bit_sum_is_sequential_double_of_float_squares():
    # at 16 bits (k / 256)^2 rounds in float and the double sum can round: the order is libvmaf's
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 16, (7, 13)).astype(np.uint16)
    b = rng.integers(0, 1 << 16, (7, 13)).astype(np.uint16)
    want = 0.0
    for x, y in zip(a.ravel(), b.ravel()):
        d = np.float32(np.float32(x) / np.float32(256)) - np.float32(np.float32(y) / np.float32(256))
        want += float(np.float32(d * d))
    assert noise_sum(a, b, 16) == want
    mse = want / (13 * 7)
    assert metrics_from_stats(want, 13, 7, 16)["float_psnr"] == 10 * math.log10(255.99609375 ** 2 / mse)


def test_other_bit_depths_are_refused():
    with pytest.raises(ValueError, match="float_psnr"):
        FloatPsnr({}, 16, 16, 9)


@pytest.mark.parametrize("depth", [8, 10, 12])
def test_integer_sse_gives_the_double_sum_up_to_12_bits(depth):
    # what the GPU twin computes instead of the float sum (exact there, any order)
    rng = np.random.default_rng(depth)
    dtype = np.uint8 if depth == 8 else np.uint16
    a = rng.integers(0, 1 << depth, (31, 45)).astype(dtype)
    b = rng.integers(0, 1 << depth, (31, 45)).astype(dtype)
    sse = int(((a.astype(np.int64) - b) ** 2).sum())
    assert noise_from_sse(sse, depth) == noise_sum(a, b, depth)
    with pytest.raises(ValueError):
        noise_from_sse(sse, 16)
