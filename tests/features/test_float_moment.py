"""Float moments against libvmaf (every frame, full precision) and their arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd import features
from vmafxd.features.float_moment import (
    DECLARATION, NAMES, FloatMoment, metrics_from_stats, moment_sums, sums_from_integers,
)

from .float_simple_vectors import case_params, differences, run_case


@pytest.mark.parametrize("case", case_params())
def test_matches_libvmaf_exactly(case):
    assert differences(run_case(DECLARATION, case), case, NAMES) == []


def test_registered_under_libvmaf_name_with_its_four_outputs():
    assert features.get("float_moment") is DECLARATION
    assert all(features.provider(n) is DECLARATION for n in NAMES)
    assert list(DECLARATION.metric_names(DECLARATION.resolve_options({}))) == list(NAMES)


def test_moments_of_known_planes():
    ref = np.array([[0, 2], [4, 6]], np.uint16)
    dist = np.array([[8, 8], [8, 8]], np.uint16)
    # 10 bits: samples / 4
    sums = moment_sums(ref, dist, 10)
    assert sums == (3.0, 8.0, 0.25 + 1.0 + 2.25, 16.0)
    assert metrics_from_stats(sums, 2, 2) == dict(zip(NAMES, (0.75, 2.0, 0.875, 4.0)))


def test_sixteen_bit_second_moment_is_sequential_double_of_float_squares():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 16, (6, 17)).astype(np.uint16)
    want = 0.0
    for x in a.ravel():
        v = np.float32(x) / np.float32(256)
        want += float(np.float32(v * v))
    assert moment_sums(a, a, 16)[2] == want


def test_other_bit_depths_are_refused():
    with pytest.raises(ValueError, match="float_moment"):
        FloatMoment({}, 16, 16, 14)


@pytest.mark.parametrize("depth", [8, 10, 12])
def test_integer_sums_give_the_double_sums_up_to_12_bits(depth):
    # what the GPU twin computes instead of the float sums (exact there, any order)
    rng = np.random.default_rng(depth)
    dtype = np.uint8 if depth == 8 else np.uint16
    a = rng.integers(0, 1 << depth, (29, 37)).astype(dtype)
    b = rng.integers(0, 1 << depth, (29, 37)).astype(dtype)
    ints = [int(a.astype(np.int64).sum()), int(b.astype(np.int64).sum()),
            int((a.astype(np.int64) ** 2).sum()), int((b.astype(np.int64) ** 2).sum())]
    assert sums_from_integers(ints, depth) == moment_sums(a, b, depth)
    with pytest.raises(ValueError):
        sums_from_integers(ints, 16)
