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

Every float accumulation here runs in C's order (``np.cumsum`` adds left to
right; ``np.sum`` would add pairwise), so the result is libvmaf's float.

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

from ._psnr_hvs_dct import CSF_CB, CSF_CR, CSF_Y, MASK_CB, MASK_CR, MASK_Y, fdct8x8
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


def _seq_sum(values: np.ndarray) -> np.ndarray:
    """Float32 sum along the last axis, added left to right."""
    return np.cumsum(values, axis=-1, dtype=F)[..., -1]


def block_grid(height: int, width: int) -> tuple[int, int]:
    """How many blocks libvmaf scores per column and row (0 when the plane is under 8)."""
    ny = len(range(0, height - 7, STEP)) if height > 7 else 0
    nx = len(range(0, width - 7, STEP)) if width > 7 else 0
    return ny, nx


def _blocks(plane: np.ndarray) -> np.ndarray:
    """(blocks, 64) int64 samples of the 8x8 blocks, in libvmaf's block order."""
    ny, nx = block_grid(*plane.shape)
    if ny == 0 or nx == 0:
        return np.zeros((0, 64), np.int64)
    win = np.lib.stride_tricks.sliding_window_view(plane, (8, 8))[::STEP, ::STEP][:ny, :nx]
    return win.reshape(ny * nx, 64).astype(np.int64)


def _masking(samples: np.ndarray, coeffs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each block's contrast-masking level (float32), as ``calc_psnrhvs`` derives it."""
    x = samples.astype(F)
    gmean = _seq_sum(x) / F(64.0)
    gvar = _seq_sum((x - gmean[:, None]) * (x - gmean[:, None])) * _GVAR_SCALE
    qvars = []
    for idx in _QUADRANTS:
        q = x[:, idx]
        qmean = _seq_sum(q) / F(16.0)
        qvars.append(_seq_sum((q - qmean[:, None]) * (q - qmean[:, None])) * _QVAR_SCALE)
    ratio = ((qvars[0] + qvars[1]) + qvars[2]) + qvars[3]
    positive = gvar > 0
    gvar = np.where(positive, ratio / np.where(positive, gvar, F(1.0)), gvar)
    # AC energy weighted by the mask: int square -> float, times the float mask
    ac = coeffs[:, 1:]
    energy = _seq_sum((ac * ac).astype(F) * mask.ravel()[1:])
    return (np.sqrt((energy * gvar).astype(np.float64)) / 32.0).astype(F)


def plane_score(ref: np.ndarray, dist: np.ndarray, bitdepth: int, plane: int) -> float:
    """libvmaf's ``calc_psnrhvs`` for plane 0 (Y), 1 (Cb) or 2 (Cr): a float, as double."""
    csf = (CSF_Y, CSF_CB, CSF_CR)[plane].ravel()
    mask = (MASK_Y, MASK_CB, MASK_CR)[plane]
    s = _blocks(ref)
    d = _blocks(dist)
    shape = s.shape[:1] + (8, 8)
    cs = fdct8x8(s.reshape(shape)).reshape(s.shape)
    cd = fdct8x8(d.reshape(shape)).reshape(d.shape)
    level = np.maximum(_masking(s, cs, mask), _masking(d, cd, mask))
    err = np.abs(cs - cd).astype(F)
    thr = level[:, None] / mask.ravel()[None, 1:]
    ac = err[:, 1:]
    err[:, 1:] = np.where(ac < thr, F(0.0), ac - thr)
    weighted = err * csf
    terms = (weighted * weighted).ravel()
    total = np.cumsum(terms, dtype=F)[-1] if terms.size else F(0.0)
    return score_from_sum(float(total), terms.size, bitdepth)


def score_from_sum(total: float, coefficients: int, bitdepth: int) -> float:
    """The plane's score from its float error sum (the statistic a GPU kernel
    returns): divided by the coefficient count, then by ``peak^2``, in float."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ret = F(total) / F(coefficients)
        peak = (1 << bitdepth) - 1
        ret = ret / F(peak * peak)
    return float(ret)


def scores_from_sums(totals: np.ndarray, coefficients: Sequence[int], bitdepth: int) -> np.ndarray:
    """:func:`score_from_sum` of many frames' planes at once: ``totals`` (n, 3) -> float32 (n, 3),
    the same float divisions element by element."""
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
    options=(),
    temporal=False,
    kernel="psnr_hvs.cu",
    gpu="psnr_hvs",
    cpu=PsnrHvs,
    help="PSNR-HVS per plane and combined (Xiph: 8x8 integer DCT, CSF weights, contrast masking)",
)
