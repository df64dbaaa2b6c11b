"""Integer PSNR against libvmaf, plus its options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.features.declaration import OptionError
from vmafxd.features.psnr import (
    DECLARATION,
    apsnr_from_totals,
    compute_stats,
    metrics_from_stats,
    psnr_params,
)
from vmafxd.core.picture import Picture

from ..reference import pair_params
from .harness import compare, run_feature

NAMES = ["psnr_y", "psnr_cb", "psnr_cr"]


def extractor(options=None, width=16, height=8, bitdepth=8):
    return DECLARATION.cpu(DECLARATION.resolve_options(options), width, height, bitdepth)


def scores(ext, ref, dist, index=0):
    ((i, metrics),) = ext.extract(index, ref, dist)
    assert i == index
    return metrics


def random_picture(subsampling, bitdepth, h=8, w=16, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    top = 1 << bitdepth
    if subsampling is Subsampling.S400:
        shapes = [(h, w)]
    else:
        sx, sy = subsampling.value
        shapes = [(h, w), (h >> sy, w >> sx), (h >> sy, w >> sx)]
    return Picture(tuple(rng.integers(0, top, s, dtype=dtype) for s in shapes), bitdepth, subsampling)


# --- exactness against libvmaf ------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair)
    assert compare(ours, pair, "vmaf_v0.6.1", NAMES, exact=True) == []


# --- the integer sums -----------------------------------------------------------


@pytest.mark.parametrize("bitdepth", [8, 10, 12, 16])
def test_sse_matches_python_integers(bitdepth):
    pic_a = random_picture(Subsampling.S420, bitdepth, 10, 14, seed=1)
    pic_b = random_picture(Subsampling.S420, bitdepth, 10, 14, seed=2)
    # the largest errors the accumulators must hold
    pic_a.planes[0][0] = (1 << bitdepth) - 1
    pic_b.planes[0][0] = 0
    got = compute_stats(pic_a.planes, pic_b.planes)
    assert got.dtype == np.int64
    want = [sum((int(a) - int(b)) ** 2 for a, b in zip(pa.ravel(), pb.ravel()))
            for pa, pb in zip(pic_a.planes, pic_b.planes)]
    assert got.tolist() == want


def test_strided_views_are_fine():
    pic = random_picture(Subsampling.S444, 8, 8, 16, seed=4)
    other = random_picture(Subsampling.S444, 8, 8, 16, seed=5)
    views = [p[:, ::2] for p in pic.planes]
    got = compute_stats(views, [p[:, ::2] for p in other.planes])
    want = compute_stats([v.copy() for v in views], [p[:, ::2].copy() for p in other.planes])
    assert got.tolist() == want.tolist()


# --- peak and cap -----------------------------------------------------------------


@pytest.mark.parametrize("bitdepth,cap", [(8, 60.0), (10, 72.0), (12, 84.0), (16, 108.0)])
def test_identical_input_hits_the_cap(bitdepth, cap):
    pic = random_picture(Subsampling.S420, bitdepth)
    assert scores(extractor(bitdepth=bitdepth), pic, pic) == {n: cap for n in NAMES}


@pytest.mark.parametrize("pair", [p for p in pair_params(full=False) if p.values[0].bitdepth == 10])
def test_ten_bit_identical_pair_gives_72_db(pair):
    refs, _ = pair.pictures()
    ext = extractor(width=pair.width, height=pair.height, bitdepth=10)
    assert scores(ext, refs[0], refs[0]) == {n: 72.0 for n in NAMES}


def test_peak_is_the_full_code_range():
    # every sample off by 100: MSE 10000, well under the 72 dB cap
    a = np.zeros((8, 16), np.uint16)
    b = np.full((8, 16), 100, np.uint16)
    pa = Picture((a,), 10, Subsampling.S400)
    pb = Picture((b,), 10, Subsampling.S400)
    got = scores(extractor(bitdepth=10), pa, pb)["psnr_y"]
    assert got == 10.0 * math.log10(1023 * 1023 / 10000.0)
    reduced = scores(extractor({"reduced_hbd_peak": True}, bitdepth=10), pa, pb)["psnr_y"]
    assert reduced == 10.0 * math.log10(1020 * 1020 / 10000.0)


def test_min_sse_sets_the_cap_per_plane():
    pic = random_picture(Subsampling.S420, 8, 8, 16)
    got = scores(extractor({"min_sse": 0.5}), pic, pic)
    # cap = ceil(10 log10(255^2 / (min_sse / plane samples)))
    assert got["psnr_y"] == math.ceil(10 * math.log10(255 * 255 / (0.5 / 128)))
    assert got["psnr_cb"] == got["psnr_cr"] == math.ceil(10 * math.log10(255 * 255 / (0.5 / 32)))


# --- planes and options -----------------------------------------------------------


def test_400_gives_psnr_y_only():
    a = random_picture(Subsampling.S400, 8, seed=1)
    b = random_picture(Subsampling.S400, 8, seed=2)
    assert list(scores(extractor(), a, b)) == ["psnr_y"]


def test_chroma_can_be_disabled():
    a = random_picture(Subsampling.S420, 8, seed=1)
    b = random_picture(Subsampling.S420, 8, seed=2)
    assert list(scores(extractor({"enable_chroma": False}), a, b)) == ["psnr_y"]


@pytest.mark.parametrize("subsampling", [Subsampling.S420, Subsampling.S422, Subsampling.S444])
def test_enable_mse_adds_mse_per_plane(subsampling):
    a = random_picture(subsampling, 8, seed=1)
    b = random_picture(subsampling, 8, seed=2)
    got = scores(extractor({"enable_mse": True}), a, b)
    assert sorted(got) == sorted(NAMES + ["mse_y", "mse_cb", "mse_cr"])
    sse = compute_stats(a.planes, b.planes)
    for name, plane, total in zip(["mse_y", "mse_cb", "mse_cr"], a.planes, sse):
        assert got[name] == int(total) / plane.size
    # option-gated names: present with enable_mse, absent without
    assert "mse_y" in DECLARATION.metric_names(DECLARATION.resolve_options({"enable_mse": True}))
    assert "mse_y" not in DECLARATION.metric_names(DECLARATION.resolve_options({}))


def test_metrics_from_stats_is_pure():
    params = psnr_params(DECLARATION.resolve_options({}), 8, [(8, 16)])
    assert metrics_from_stats([0], [(8, 16)], params) == {"psnr_y": 60.0}
    assert metrics_from_stats([128], [(8, 16)], params) == {"psnr_y": 10.0 * math.log10(65025.0)}


def test_apsnr_aggregate():
    a = [random_picture(Subsampling.S420, 8, seed=s) for s in range(3)]
    b = [random_picture(Subsampling.S420, 8, seed=s + 10) for s in range(3)]
    ext = extractor({"enable_apsnr": True})
    for i in range(3):
        ext.extract(i, a[i], b[i])
    assert list(ext.flush()) == []
    got = ext.aggregate()
    for p, name in enumerate(["apsnr_y", "apsnr_cb", "apsnr_cr"]):
        sse = sum(int(compute_stats([x.planes[p]], [y.planes[p]])[0]) for x, y in zip(a, b))
        n = 3 * a[0].planes[p].size
        want = 10 * (math.log10(255 * 255) + math.log10(n) - math.log10(sse))
        assert got[name] == want
    assert extractor().aggregate() == {}


def test_apsnr_identical_and_missing_planes():
    # identical: log10(0) makes it infinite, so the ceiling applies
    got = apsnr_from_totals(255, [0, 0, 0], [128, 32, 32])
    assert got["apsnr_y"] == math.ceil(10 * math.log10(255 * 255 * 128 * 2))
    # planes never scored: libvmaf's arithmetic yields -inf; reproduced as is
    ext = extractor({"enable_apsnr": True})
    pic = random_picture(Subsampling.S400, 8)
    ext.extract(0, pic, random_picture(Subsampling.S400, 8, seed=9))
    agg = ext.aggregate()
    assert math.isfinite(agg["apsnr_y"])
    assert agg["apsnr_cb"] == agg["apsnr_cr"] == -math.inf


@pytest.mark.parametrize(
    "key,value", [("min_sse", -1.0), ("min_sse", "nan"), ("enable_chroma", "perhaps"), ("nonsense", 1)]
)
def test_option_errors_name_the_field(key, value):
    with pytest.raises(OptionError) as exc:
        DECLARATION.resolve_options({key: value})
    assert exc.value.field == f"psnr.{key}"


def test_unsupported_bitdepth_is_refused():
    with pytest.raises(ValueError):
        extractor(bitdepth=9)


def test_eight_bit_rows_wrap_in_32_bits_like_libvmaf():
    # integer_psnr.c sums each 8-bit row in a uint32: past ~66,000 samples of
    # error 255 a row wraps, and libvmaf's SSE is the wrapped row sum.
    w = 70_000
    ref = np.zeros((2, w), np.uint8)
    dist = np.full((2, w), 255, np.uint8)
    row = (w * 255 * 255) % (1 << 32)
    assert row != w * 255 * 255
    assert compute_stats([ref], [dist]).tolist() == [2 * row]
    # a narrow plane does not wrap
    assert compute_stats([ref[:, :100]], [dist[:, :100]]).tolist() == [2 * 100 * 255 * 255]
