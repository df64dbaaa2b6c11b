"""CIEDE2000 against libvmaf, plus its chroma upsampling and per-pixel arithmetic."""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd import features
from vmafxd.features._ciede_color import (
    chroma_to_444_indices,
    ciede2000,
    ciede2000_libm,
    ciede2000_scalar,
    lab_from_yuv,
    lab_scalar,
    powf7,
)
from vmafxd.features.ciede import DECLARATION, compute_stats, metrics_from_stats
from vmafxd.core.picture import Picture

from ..reference import pair_params
from .harness import compare, run_feature


def random_picture(subsampling, bitdepth=8, h=12, w=18, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    sx, sy = subsampling.value
    shapes = [(h, w), (h >> sy, w >> sx), (h >> sy, w >> sx)]
    return Picture(tuple(rng.integers(0, 1 << bitdepth, s, dtype=dtype) for s in shapes), bitdepth, subsampling)


def score(ref, dist):
    ext = DECLARATION.cpu(DECLARATION.resolve_options({}), ref.width, ref.height, ref.bitdepth)
    ((index, metrics),) = ext.extract(3, ref, dist)
    assert index == 3 and ext.flush() == []
    return metrics["ciede2000"]


# --- exactness against libvmaf ------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    """Printed value and full-precision double on every frame: 8/10-bit,
    4:2:0/4:2:2/4:4:4, odd sizes, identical frames (+inf, printed null)."""
    ours = run_feature(DECLARATION, pair)
    assert compare(ours, pair, "vmaf_v0.6.1", ["ciede2000"], exact=True) == []


def test_registered_under_libvmaf_name():
    assert features.get("ciede") is DECLARATION
    assert features.provider("ciede2000") is DECLARATION
    assert DECLARATION.metric_names(DECLARATION.resolve_options({})) == {"ciede2000": "ciede2000"}


# --- libvmaf's chroma upsampling ------------------------------------------------


def test_420_repeats_each_chroma_sample_twice_both_ways():
    idx, _ = chroma_to_444_indices((1, 1), 6, 4, 3, 2)
    stride = 32
    assert idx.tolist() == [[0, 0, 1, 1, 2, 2]] * 2 + [[stride, stride, stride + 1, stride + 1, stride + 2, stride + 2]] * 2


def test_422_reads_whole_rows_past_the_chroma_width():
    # libvmaf halves rows (i // 2) but not columns for 4:2:2: column j >= w/2
    # reads on into the row's padding and the next row
    idx, _ = chroma_to_444_indices((1, 0), 64, 4, 32, 4)
    assert idx[0].tolist() == list(range(64))
    assert idx[1].tolist() == list(range(64))
    assert idx[2].tolist() == list(range(32, 96))


def test_odd_size_reads_one_row_past_the_plane():
    # 641x361 4:2:0: chroma 320x180, output row 360 reads input row 180 (V's first row for U)
    idx, length = chroma_to_444_indices((1, 1), 641, 361, 320, 180)
    assert idx[360, 0] == 180 * 320
    assert idx[0, 640] == 320  # column 320 is the next row's first sample
    assert length >= idx.max() + 320 * 180 + 1


def test_upsampled_422_uses_next_row_and_zero_padding():
    # a 4:2:2 picture whose chroma width (5) is not a multiple of 32: the
    # columns past 5 read libvmaf's zero padding
    ref = random_picture(Subsampling.S422, h=4, w=10, seed=1)
    ext = DECLARATION.cpu({}, 10, 4, 8)
    ext.extract(0, ref, ref)
    u, v = ext._upsample(ref)
    assert u[0, :5].tolist() == ref.planes[1][0].tolist()
    assert u[0, 5:].tolist() == [0] * 5
    assert u[1].tolist() == u[0].tolist()
    assert v[2, :5].tolist() == ref.planes[2][1].tolist()


# --- per-pixel arithmetic -----------------------------------------------------------


@pytest.mark.parametrize("bitdepth", [8, 10])
def test_vectorised_pixels_equal_the_scalar_c_transcription(bitdepth):
    """numpy's float/double modelling equals a line-by-line scalar version that
    calls the C library's functions (math.*, libm powf)."""
    rng = np.random.default_rng(bitdepth)
    n = 400
    top = 1 << bitdepth
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    y1, u1, v1, y2, u2, v2 = (rng.integers(0, top, n, dtype=dtype) for _ in range(6))
    # some identical and near-identical pairs
    y2[:50], u2[:50], v2[:50] = y1[:50], u1[:50], v1[:50]
    y2[50:100] = np.minimum(y1[50:100].astype(np.int64) + 1, top - 1).astype(dtype)
    lab1 = lab_from_yuv(y1, u1, v1, bitdepth)
    lab2 = lab_from_yuv(y2, u2, v2, bitdepth)
    got = ciede2000(*lab1, *lab2)
    assert got.dtype == np.float32
    for k in range(n):
        s1 = lab_scalar(float(y1[k]), float(u1[k]), float(v1[k]), bitdepth)
        s2 = lab_scalar(float(y2[k]), float(u2[k]), float(v2[k]), bitdepth)
        assert (float(lab1[0][k]), float(lab1[1][k]), float(lab1[2][k])) == s1
        assert float(got[k]) == ciede2000_scalar(s1, s2), k
    assert (got[:50] == 0).all()


@pytest.mark.parametrize("bitdepth", [8, 10, 16])
def test_batched_c_library_path_equals_the_scalar_one_bit_for_bit(bitdepth):
    """ciede2000_libm (the batch redo of doubtful pixels) against the scalar
    transcription, element by element: random pixels (every hue wrap and
    branch), identical pairs, grey pixels (zero chroma), the range's ends."""
    rng = np.random.default_rng(100 + bitdepth)
    top = 1 << bitdepth
    n = 1500
    s = rng.integers(0, top, (n, 6)).astype(np.float64)
    s[:100, 3:] = s[:100, :3]  # identical
    s[100:200, 3] = np.minimum(s[100:200, 0] + 1, top - 1)
    s[100:200, 4:] = s[100:200, 1:3]
    mid = float(128 << (bitdepth - 8))
    s[200:300, [1, 2]] = mid  # grey reference
    s[250:300, [4, 5]] = mid  # both grey
    s[300:340] = rng.choice([0.0, float(top - 1), mid], (40, 6))
    got = ciede2000_libm(s, bitdepth)
    assert got.dtype == np.float32 and got.shape == (n,)
    want = np.array([ciede2000_scalar(lab_scalar(*r[:3], bitdepth), lab_scalar(*r[3:], bitdepth))
                     for r in s.tolist()], np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert (got[:100] == 0).all() and (got[100:] != 0).sum() > n - 150
    few = ciede2000_libm(s[290:295], bitdepth)  # a handful: the scalar transcription's own results
    assert np.array_equal(few.view(np.uint32), want[290:295].view(np.uint32))


def test_powf_is_the_c_librarys():
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    lib.powf.restype = ctypes.c_float
    lib.powf.argtypes = [ctypes.c_float, ctypes.c_float]
    x = np.random.default_rng(5).uniform(0, 150, 20000).astype(np.float32)
    want = np.array([lib.powf(float(v), 7.0) for v in x], np.float32)
    got = powf7(x)
    assert got.tolist() == want.tolist()
    # glibc's powf is not the correctly rounded float of the double power
    assert (np.power(x.astype(np.float64), 7.0).astype(np.float32) != want).any()


def test_sum_is_added_in_raster_order():
    vals = np.array([1e8, 1.0, -1e8, 0.5] * 3, np.float32).reshape(3, 4)
    total = 0.0
    for v in vals.ravel():
        total += float(v)
    assert compute_stats(vals) == total


# --- whole pictures and errors --------------------------------------------------------


@pytest.mark.parametrize("subsampling", [Subsampling.S420, Subsampling.S422, Subsampling.S444])
def test_identical_pictures_score_infinity(subsampling):
    pic = random_picture(subsampling)
    assert score(pic, pic) == math.inf


@pytest.mark.parametrize("bitdepth", [8, 10])
def test_score_is_45_minus_20_log10_of_the_mean_difference(bitdepth):
    a = random_picture(Subsampling.S444, bitdepth, seed=1)
    b = random_picture(Subsampling.S444, bitdepth, seed=2)
    lab1 = lab_from_yuv(*a.planes, bitdepth)
    lab2 = lab_from_yuv(*b.planes, bitdepth)
    mean = math.fsum(ciede2000(*lab1, *lab2).astype(float).ravel()) / a.planes[0].size
    assert score(a, b) == pytest.approx(45 - 20 * math.log10(mean), abs=1e-12)
    assert metrics_from_stats(0.0, 4, 4) == {"ciede2000": math.inf}


def test_400_and_bad_bitdepth_are_refused():
    pic = Picture((np.zeros((8, 8), np.uint8),), 8, Subsampling.S400)
    with pytest.raises(ValueError, match="chroma"):
        score(pic, pic)
    with pytest.raises(ValueError, match="bit depth"):
        DECLARATION.cpu({}, 8, 8, 9)


def test_doubtful_pixels_are_redone_with_the_c_library(monkeypatch):
    """Pixels next to a float rounding midpoint are recomputed by the scalar C
    transcription; flagging every pixel (DOUBT 0.5) must change no value."""
    from vmafxd.features import _ciede_color

    a = random_picture(Subsampling.S420, h=10, w=14, seed=7)
    b = random_picture(Subsampling.S420, h=10, w=14, seed=8)
    default = score(a, b)
    monkeypatch.setattr(_ciede_color, "DOUBT", 0.5)
    flagged = np.zeros((10, 14), bool)
    lab_from_yuv(a.planes[0], np.repeat(np.repeat(a.planes[1], 2, 0), 2, 1),
                 np.repeat(np.repeat(a.planes[2], 2, 0), 2, 1), 8, flagged)
    assert flagged.all()
    assert score(a, b) == default


@pytest.mark.parametrize("bitdepth", [8, 12])
def test_batched_c_library_path_computes_repeated_pixels_once_and_equally(bitdepth, monkeypatch):
    """Repeated rows (doubtful pixels come in runs): each distinct one computed once, every
    row given its own row's result (8-bit packs the samples into a key, 12-bit does not)."""
    from vmafxd.features import _ciede_color

    rng = np.random.default_rng(bitdepth)
    distinct = rng.integers(0, 1 << bitdepth, (40, 6)).astype(np.float64)
    rows = distinct[rng.integers(0, 40, 600)]
    seen = []
    inner = _ciede_color._ciede2000_libm_rows
    monkeypatch.setattr(_ciede_color, "_ciede2000_libm_rows", lambda s, bd: seen.append(len(s)) or inner(s, bd))
    got = ciede2000_libm(rows, bitdepth)
    assert seen == [len(np.unique(rows, axis=0))]
    assert np.array_equal(got, inner(rows, bitdepth))
