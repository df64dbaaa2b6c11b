"""PSNR-HVS (libvmaf's ``psnr_hvs`` extractor, Xiph's ``calc_psnrhvs``).

What libvmaf computes (``libvmaf/src/feature/third_party/xiph/psnr_hvs.c``)
--------------------------------------------------------------------------
Per plane, on 8x8 blocks every 7 samples (blocks at ``x, y = 0, 7, 14, ...``
while ``x < w - 7`` and ``y < h - 7``): the block's variance and the sum of
its four 4x4 quadrants' variances (float) give a masking ratio; Daala's
integer DCT of both blocks gives coefficients; the masked contrast of the
AC coefficients (float) sets a threshold under which coefficient errors are
ignored; each coefficient's remaining error, weighted by the CSF, is squared
and added to *one float accumulator for the whole plane*, in block order.
That float divided by the coefficient count and by ``peak^2`` is the plane's
score; ``psnr_hvs_<plane> = -10 log10(score)`` and ``psnr_hvs`` combines the
scores 0.8 / 0.1 / 0.1 before the log.  Chroma uses Xiph's 4:2:0 CSF tables
whatever the subsampling, on libvmaf's floor-size chroma planes.

Every float accumulation here runs in C's order (explicit adds of whole
position arrays, ``np.cumsum`` for the plane's one accumulator; ``np.sum``
would add pairwise), so the result is libvmaf's float.  The blocks are held
position-major ((64, blocks): one contiguous array per sample position), so
each step of the DCT and of the masking is one vector pass over all blocks.

Layers
------
* :func:`plane_score`: one plane's float score (the statistic).
* :func:`metrics_from_stats`: the dB values from the three scores.
* :class:`PsnrHvs`: the CPU twin.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._psnr_hvs_dct import CSF, MASK, fdct8x8_planar
from .declaration import FeatureDeclaration, FrameScores, PerFrameTwin, check_bitdepth, check_chroma

__all__ = ["DECLARATION", "PsnrHvs", "plane_score", "score_from_sum", "metrics_from_stats", "block_grid"]

NAMES = ("psnr_hvs_y", "psnr_hvs_cb", "psnr_hvs_cr", "psnr_hvs")
#: libvmaf refuses more than 12 bits
SUPPORTED_BITDEPTHS = (8, 9, 10, 11, 12)
STEP = 7

F = np.float32
_GVAR_SCALE = F(F(1.0) / F(63.0)) * F(64.0)  # C: s_gvar *= 1 / 63.f * 64
_QVAR_SCALE = F(F(1.0) / F(15.0)) * F(16.0)
#: positions of each 4x4 quadrant in raster order; libvmaf's ``sub`` index is
#: (row >= 4) + 2 * (column >= 4)
_QUADRANTS = [
    [i * 8 + j for i in range(8) for j in range(8) if (i >= 4) + 2 * (j >= 4) == q] for q in range(4)
]


def _seq_sum(rows: np.ndarray) -> np.ndarray:
    """Float32 sum over the first axis, added in order (row 0 + row 1 + ...):
    C's one accumulator per block, for every block at once."""
    acc = rows[0].copy()
    for r in rows[1:]:
        acc += r
    return acc


def block_grid(height: int, width: int) -> tuple[int, int]:
    """How many blocks libvmaf scores per column and row (0 when the plane is under 8)."""
    ny = len(range(0, height - 7, STEP)) if height > 7 else 0
    nx = len(range(0, width - 7, STEP)) if width > 7 else 0
    return ny, nx


def _blocks(plane: np.ndarray, rows: slice, out: np.ndarray) -> None:
    """Write the 8x8 blocks of the block rows ``rows`` into ``out`` (8, 8, blocks),
    position-major, the blocks in libvmaf's order (so each sample position is
    one contiguous array)."""
    ny, nx = block_grid(*plane.shape)
    win = np.lib.stride_tricks.sliding_window_view(plane, (8, 8))[::STEP, ::STEP][:ny, :nx][rows]
    out.reshape(8, 8, win.shape[0], nx)[...] = win.transpose(2, 3, 0, 1)


def _masking(samples: np.ndarray, coeffs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each block's contrast-masking level (float32), as ``calc_psnrhvs`` derives it.

    ``samples`` and ``coeffs`` are (64, blocks) int32, position-major.  The
    means are sums of at most 64 samples below 2^12, so below 2^24: exact in
    float32 in any order, hence taken as integer sums.  The variances and the
    AC energy are float sums of inexact terms, so they are added in C's
    order (raster order within the block or quadrant).
    """
    x = samples.astype(F)
    gmean = samples.sum(axis=0, dtype=np.int32).astype(F) / F(64.0)
    d = x - gmean
    d *= d
    gvar = _seq_sum(d) * _GVAR_SCALE
    qvars = []
    for idx in _QUADRANTS:
        q = x[idx]
        qmean = samples[idx].sum(axis=0, dtype=np.int32).astype(F) / F(16.0)
        q -= qmean
        q *= q
        qvars.append(_seq_sum(q) * _QVAR_SCALE)
    ratio = ((qvars[0] + qvars[1]) + qvars[2]) + qvars[3]
    positive = gvar > 0
    gvar = np.where(positive, ratio / np.where(positive, gvar, F(1.0)), gvar)
    # AC energy weighted by the mask: int square (below 32,760^2 < 2^31, see
    # _psnr_hvs_dct) -> float, times the float mask
    ac = coeffs[1:]
    sq = (ac * ac).astype(F)
    sq *= mask.ravel()[1:, None]
    energy = _seq_sum(sq)
    return (np.sqrt((energy * gvar).astype(np.float64)) / 32.0).astype(F)


#: blocks a pass handles at once (both pictures: twice this many): the
#: DCT's and the masking's ~500 vector steps then work on arrays that stay in
#: the core's cache instead of streaming each step through memory
CHUNK_BLOCKS = 1024


def plane_score(ref: np.ndarray, dist: np.ndarray, bitdepth: int, plane: int) -> float:
    """libvmaf's ``calc_psnrhvs`` for plane 0 (Y), 1 (Cb) or 2 (Cr): a float, as double."""
    csf = CSF[plane].ravel()[:, None]
    mask = MASK[plane].ravel()
    ny, nx = block_grid(*ref.shape)
    if ny == 0 or nx == 0:
        return score_from_sum(0.0, 0, bitdepth)
    step = max(1, CHUNK_BLOCKS // nx)
    mask_ac = mask[1:, None]
    acc = F(0.0)
    for y0 in range(0, ny, step):
        rows = slice(y0, min(ny, y0 + step))
        m = (rows.stop - y0) * nx
        # reference blocks then distorted ones, side by side: one DCT, one masking
        both = np.empty((8, 8, 2 * m), np.int32)
        _blocks(ref, rows, both[..., :m])
        _blocks(dist, rows, both[..., m:])
        coeffs = fdct8x8_planar(both).reshape(64, 2 * m)
        levels = _masking(both.reshape(64, 2 * m), coeffs, mask)
        level = np.maximum(levels[:m], levels[m:])
        diff = coeffs[:, :m] - coeffs[:, m:]
        np.abs(diff, out=diff)
        err = diff.astype(F)
        thr = level[None, :] / mask_ac
        ac = err[1:]
        # err < thr ? 0 : err - thr, in place
        below = ac < thr
        ac -= thr
        ac[below] = F(0.0)
        err *= csf
        err *= err
        # one float accumulator for the plane, in block order (block-major):
        # the running total goes first, so the accumulation carries on from it
        terms = np.empty(64 * m + 1, F)
        terms[0] = acc
        terms[1:].reshape(m, 64)[...] = err.T
        acc = np.add.accumulate(terms)[-1]
    return score_from_sum(float(acc), 64 * ny * nx, bitdepth)


def score_from_sum(total: float, coefficients: int, bitdepth: int) -> float:
    """The plane's score from its float error sum (the statistic a GPU kernel
    returns): divided by the coefficient count, then by ``peak^2``, in float."""
    return float(scores_from_sums(np.array([[total]]), [coefficients], bitdepth)[0, 0])


def scores_from_sums(totals: np.ndarray, coefficients: Sequence[int], bitdepth: int) -> np.ndarray:
    """:func:`score_from_sum` of many frames' planes at once: ``totals`` (n, planes) -> float32,
    float divisions element by element."""
    peak = (1 << bitdepth) - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        ret = np.asarray(totals).astype(F) / np.asarray(coefficients, np.float64).astype(F)
        return ret / F(peak * peak)


def _db(score: float) -> float:
    """``10 * (-1 * log10(score))`` with C's log10 (-inf at 0, NaN below)."""
    if score > 0.0:
        return 10.0 * -math.log10(score)
    return math.inf if score == 0.0 else math.nan


def metrics_from_stats(scores: Sequence[float]) -> dict[str, float]:
    y, cb, cr = scores
    out = {NAMES[p]: _db(s) for p, s in enumerate(scores)}
    out["psnr_hvs"] = _db(y * 0.8 + 0.1 * (cb + cr))
    return out


class PsnrHvs(PerFrameTwin):
    """CPU twin of libvmaf's ``psnr_hvs`` extractor."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        check_bitdepth("psnr_hvs", bitdepth, SUPPORTED_BITDEPTHS, "8 to 12")
        self.bitdepth = bitdepth

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        check_chroma("psnr_hvs", len(ref.planes))
        scores = [plane_score(ref.planes[p], dist.planes[p], self.bitdepth, p) for p in range(3)]
        return [(index, metrics_from_stats(scores))]


DECLARATION = FeatureDeclaration(
    name="psnr_hvs",
    provides=NAMES,
    kernel="psnr_hvs.cu",
    gpu="psnr_hvs",
    kernel_tables=(("float hvs_csf[3][64]", CSF.reshape(3, 64)), ("float hvs_mask[3][64]", MASK.reshape(3, 64))),
    cpu=PsnrHvs,
    help="PSNR-HVS per plane and combined (Xiph: 8x8 integer DCT, CSF weights, contrast masking)",
)
