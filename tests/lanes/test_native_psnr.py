"""Native integer PSNR (vmafxd/lanes/native/psnr.cpp) against libvmaf's scores and the numpy twin.

The vendored pairs must give libvmaf's values through the native extractor;
synthetic pictures (8-16 bits, 4:2:0/4:2:2/4:4:4/4:0:0, odd sizes, strided
planes, 8-bit rows long enough to wrap libvmaf's 32-bit row sums) and every option
(``enable_chroma``, ``enable_mse``, ``enable_apsnr``'s aggregate,
``reduced_hbd_peak``, ``min_sse``) must give the twin's metrics cell by cell.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.features import get
from vmafxd.features.psnr import compute_stats

from ..features.harness import compare, run_feature
from ..features.test_psnr import random_picture
from ..reference import vendored_pairs
from .conftest import load_runtime

DECL = get("psnr")


@pytest.fixture(scope="module")
def native():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import psnr

    return psnr.Psnr


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_every_vendored_pair_matches_libvmaf(native, pair):
    ours = run_feature(dataclasses.replace(DECL, cpu=native), pair)
    assert compare(ours, pair, "vmaf_v0.6.1", ["psnr_y", "psnr_cb", "psnr_cr"], exact=True) == []


def _both(native, options, pictures, bitdepth):
    values = DECL.resolve_options(options)
    h, w = pictures[0][0].planes[0].shape
    twin, nat = DECL.cpu(values, w, h, bitdepth), native(values, w, h, bitdepth)
    want, got = [], []
    for i, (r, d) in enumerate(pictures):
        want += twin.extract(i, r, d)
        got += nat.extract(i, r, d)
    assert nat.flush() == []
    return want, got, twin.aggregate(), nat.aggregate()


@pytest.mark.parametrize("sub, bitdepth, size, options", [
    (Subsampling.S420, 8, (33, 17), {}),
    (Subsampling.S422, 10, (40, 31), {"enable_mse": True}),
    (Subsampling.S444, 12, (19, 23), {"enable_apsnr": True, "min_sse": 0.5}),
    (Subsampling.S420, 16, (64, 48), {"reduced_hbd_peak": True, "enable_apsnr": True}),
    (Subsampling.S400, 8, (50, 9), {"enable_apsnr": True, "enable_mse": True}),
    (Subsampling.S420, 10, (37, 21), {"enable_chroma": False, "enable_mse": True}),
])
def test_metrics_and_aggregate_equal_the_twins(native, sub, bitdepth, size, options):
    w, h = size
    pictures = [(random_picture(sub, bitdepth, h, w, seed=2 * i), random_picture(sub, bitdepth, h, w, seed=2 * i + 1))
                for i in range(3)]
    pictures.append((pictures[0][0], pictures[0][0]))  # identical: the cap
    want, got, twin_total, nat_total = _both(native, options, pictures, bitdepth)
    assert got == want
    assert nat_total == twin_total
    assert got[-1][1]["psnr_y"] == want[-1][1]["psnr_y"] and got[0][1]["psnr_y"] < got[-1][1]["psnr_y"]


def test_strided_planes_equal_the_twins(native):
    pic = random_picture(Subsampling.S420, 10, 30, 44, seed=4)
    wide = []
    for p in pic.planes:  # views into wider rows, as a mapped buffer gives
        buf = np.zeros((p.shape[0], p.shape[1] + 9), p.dtype)
        buf[:, 5:5 + p.shape[1]] = p
        wide.append(buf[:, 5:5 + p.shape[1]])
    strided = dataclasses.replace(pic, planes=tuple(wide))
    other = random_picture(Subsampling.S420, 10, 30, 44, seed=5)
    want, got, _, _ = _both(native, {}, [(strided, other), (other, strided)], 10)
    assert got == want


def test_eight_bit_rows_wrap_in_32_bits_like_libvmaf(native):
    w = 70_000
    ref = np.zeros((2, w), np.uint8)
    dist = np.full((2, w), 255, np.uint8)
    ext = native(DECL.resolve_options({}), w, 2, 8)
    got = ext.sse([ref, ref[:, :100]], [dist, dist[:, :100]]).tolist()
    assert got == compute_stats([ref, ref[:, :100]], [dist, dist[:, :100]]).tolist()
    assert got == [2 * ((w * 255 * 255) % (1 << 32)), 2 * 100 * 255 * 255]


def test_sixteen_bit_squares_sum_in_64_bits(native):
    rng = np.random.default_rng(9)
    ref = rng.integers(0, 1 << 16, (40, 3000), dtype=np.uint16)
    dist = 65535 - ref
    ext = native(DECL.resolve_options({}), 3000, 40, 16)
    got = ext.sse([ref], [dist])
    assert got.tolist() == compute_stats([ref], [dist]).tolist() and got[0] > 1 << 40


def test_errors_are_the_twins_or_name_the_plane(native):
    with pytest.raises(ValueError, match="bit depths"):
        native(DECL.resolve_options({}), 16, 8, 9)
    pic = random_picture(Subsampling.S420, 8, 8, 16)
    ext = native(DECL.resolve_options({}), 16, 8, 8)
    bad = dataclasses.replace(pic, planes=(pic.planes[0], pic.planes[1].astype(np.int32), pic.planes[2]))
    with pytest.raises(TypeError, match="reference's Cb"):
        ext.extract(0, bad, pic)
    short = dataclasses.replace(pic, planes=(pic.planes[0][:, :15],) + pic.planes[1:])
    with pytest.raises(ValueError, match="distorted luma"):
        ext.extract(0, pic, short)
