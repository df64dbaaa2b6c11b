"""PSNR-HVS against libvmaf, plus its DCT, block grid and float accumulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd import features
from vmafxd.features._psnr_hvs_dct import CSF_Y, MASK_Y, fdct8x8
from vmafxd.features.psnr_hvs import DECLARATION, NAMES, block_grid, metrics_from_stats, plane_score
from vmafxd.core.picture import Picture

from ..reference import pair_params
from .harness import compare, run_feature


def random_picture(subsampling, bitdepth=8, h=24, w=30, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    sx, sy = subsampling.value
    shapes = [(h, w), (h >> sy, w >> sx), (h >> sy, w >> sx)]
    return Picture(tuple(rng.integers(0, 1 << bitdepth, s, dtype=dtype) for s in shapes), bitdepth, subsampling)


def scores(ref, dist):
    ext = DECLARATION.cpu(DECLARATION.resolve_options({}), ref.width, ref.height, ref.bitdepth)
    ((index, metrics),) = ext.extract(0, ref, dist)
    assert index == 0 and ext.flush() == []
    return metrics


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair)
    assert compare(ours, pair, "vmaf_v0.6.1", list(NAMES), exact=True) == []


def test_registered_under_libvmaf_name():
    assert features.get("psnr_hvs") is DECLARATION
    assert all(features.provider(n) is DECLARATION for n in NAMES)


# --- the integer DCT --------------------------------------------------------------


def _orthonormal_dct8() -> np.ndarray:
    k = np.arange(8)[:, None]
    n = np.arange(8)[None, :]
    m = np.cos(np.pi * (2 * n + 1) * k / 16) * np.sqrt(2 / 8)
    m[0] /= np.sqrt(2)
    return m


def test_dct_of_a_flat_block_is_its_dc():
    got = fdct8x8(np.full((1, 8, 8), 100, np.int64))[0]
    assert got[0, 0] == 800
    assert (got.ravel()[1:] == 0).all()


def test_dct_is_close_to_the_orthonormal_dct():
    """Daala's lifting DCT approximates the orthonormal DCT-II with integer rounding."""
    blocks = np.random.default_rng(3).integers(0, 256, (50, 8, 8)).astype(np.int64)
    m = _orthonormal_dct8()
    want = np.einsum("ki,bij,lj->bkl", m, blocks.astype(float), m)
    got = fdct8x8(blocks)
    assert np.abs(got - want).max() < 4
    # the rows-then-columns order matters for the rounding: the transpose differs
    assert not (fdct8x8(blocks.transpose(0, 2, 1)).transpose(0, 2, 1) == got).all()


def test_dct_in_int32_equals_the_dct_in_int64_on_extreme_twelve_bit_blocks():
    """The int32 transform (libvmaf's type) never wraps for 12-bit samples: on the
    blocks that drive each coefficient hardest (0 or 4095 by the sign of each
    basis function, both ways round) and on random 0/4095 blocks it gives what
    the same steps give in int64."""
    from vmafxd.features._psnr_hvs_dct import _fdct8

    m = _orthonormal_dct8()
    signs = np.array([np.outer(m[u], m[v]) > 0 for u in range(8) for v in range(8)])
    rng = np.random.default_rng(5)
    blocks = np.concatenate([signs, ~signs, rng.integers(0, 2, (500, 8, 8)) > 0]) * 4095
    x = np.moveaxis(blocks.astype(np.int64), 0, -1)
    first = np.stack(_fdct8([x[k] for k in range(8)]))
    wide = np.moveaxis(np.stack(_fdct8([first[:, k] for k in range(8)]), axis=1), -1, 0)
    got = fdct8x8(blocks)
    assert got.dtype == np.int32
    assert np.abs(wide).max() > 30000  # the extremes are reached
    assert (got == wide).all()


# --- blocks and accumulation ------------------------------------------------------


@pytest.mark.parametrize("h,w,grid", [(8, 8, (1, 1)), (15, 15, (2, 2)), (14, 22, (1, 3)), (7, 30, (0, 4)), (324, 576, (46, 82))])
def test_block_grid_steps_by_seven_while_under_size_minus_seven(h, w, grid):
    assert block_grid(h, w) == grid


def test_plane_error_is_added_into_one_float_in_block_order():
    """Recompute one plane's score with plain Python loops over float32 values."""
    pic_a = random_picture(Subsampling.S444, h=15, w=22, seed=1)
    pic_b = random_picture(Subsampling.S444, h=15, w=22, seed=2)
    a, b = pic_a.planes[0], pic_b.planes[0]
    f = np.float32
    mask = MASK_Y
    ret = f(0)
    count = 0
    for y in range(0, 15 - 7, 7):
        for x in range(0, 22 - 7, 7):
            sb = a[y:y + 8, x:x + 8].astype(np.int64)
            db = b[y:y + 8, x:x + 8].astype(np.int64)
            levels = []
            for blk in (sb, db):
                vals = blk.ravel().astype(f)
                gmean = f(0)
                qsum = [f(0)] * 4
                for k, v in enumerate(vals):
                    gmean = f(gmean + v)
                    qsum[(k // 8 >= 4) + 2 * (k % 8 >= 4)] = f(qsum[(k // 8 >= 4) + 2 * (k % 8 >= 4)] + v)
                gmean = f(gmean / f(64))
                qmean = [f(s / f(16)) for s in qsum]
                gvar = f(0)
                qvar = [f(0)] * 4
                for k, v in enumerate(vals):
                    q = (k // 8 >= 4) + 2 * (k % 8 >= 4)
                    gvar = f(gvar + f(f(v - gmean) * f(v - gmean)))
                    qvar[q] = f(qvar[q] + f(f(v - qmean[q]) * f(v - qmean[q])))
                gvar = f(gvar * f(f(f(1) / f(63)) * f(64)))
                qvar = [f(q * f(f(f(1) / f(15)) * f(16))) for q in qvar]
                if gvar > 0:
                    gvar = f(f(f(f(qvar[0] + qvar[1]) + qvar[2]) + qvar[3]) / gvar)
                c = fdct8x8(blk[None])[0].ravel()
                energy = f(0)
                for k in range(1, 64):
                    energy = f(energy + f(f(int(c[k]) * int(c[k])) * mask.ravel()[k]))
                levels.append((f(math.sqrt(float(f(energy * gvar))) / 32.0), c))
            level = max(levels[0][0], levels[1][0])
            cs, cd = levels[0][1], levels[1][1]
            for k in range(64):
                err = f(abs(int(cs[k]) - int(cd[k])))
                if k:
                    thr = f(level / mask.ravel()[k])
                    err = f(0) if err < thr else f(err - thr)
                w = f(err * CSF_Y.ravel()[k])
                ret = f(ret + f(w * w))
                count += 1
    want = f(f(ret / f(count)) / f(255 * 255))
    assert plane_score(a, b, 8, 0) == float(want)


# --- whole pictures and errors --------------------------------------------------------


@pytest.mark.parametrize("subsampling", [Subsampling.S420, Subsampling.S422, Subsampling.S444])
def test_identical_pictures_score_infinity(subsampling):
    pic = random_picture(subsampling)
    assert scores(pic, pic) == {n: math.inf for n in NAMES}


def test_combined_score_weights_planes_before_the_log():
    got = metrics_from_stats([1e-3, 1e-2, 1e-4])
    assert got["psnr_hvs_y"] == 30.0
    assert got["psnr_hvs"] == 10 * -math.log10(1e-3 * 0.8 + 0.1 * (1e-2 + 1e-4))


def test_ten_bit_uses_the_ten_bit_peak():
    a = random_picture(Subsampling.S444, 10, seed=1)
    b = random_picture(Subsampling.S444, 10, seed=2)
    s10 = plane_score(a.planes[0], b.planes[0], 10, 0)
    s12 = plane_score(a.planes[0], b.planes[0], 12, 0)
    assert s10 > s12 > 0


def test_400_and_bad_bitdepth_are_refused():
    pic = Picture((np.zeros((8, 8), np.uint8),), 8, Subsampling.S400)
    with pytest.raises(ValueError, match="chroma"):
        scores(pic, pic)
    with pytest.raises(ValueError, match="bit depth"):
        DECLARATION.cpu({}, 8, 8, 16)


@pytest.mark.parametrize("bitdepth", [8, 10, 12])
def test_scores_of_a_batch_equal_each_planes_score(bitdepth):
    """scores_from_sums (the GPU twin's batch step) against score_from_sum per plane, bit for bit,
    zero and huge sums included."""
    from vmafxd.features.psnr_hvs import score_from_sum, scores_from_sums

    rng = np.random.default_rng(bitdepth)
    totals = rng.uniform(0.0, 1e7, (9, 3)) * 10.0 ** rng.integers(-6, 3, (9, 3))
    totals[0, 0] = 0.0
    coefficients = [64 * 30 * 20, 64 * 15 * 10, 64 * 15 * 10 + 64]
    got = scores_from_sums(totals, coefficients, bitdepth)
    assert got.dtype == np.float32
    for i in range(9):
        for p in range(3):
            assert float(got[i, p]) == score_from_sum(float(totals[i, p]), coefficients[p], bitdepth), (i, p)
