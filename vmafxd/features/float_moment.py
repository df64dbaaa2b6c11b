"""Float moments: libvmaf's ``float_moment`` extractor (first and second moments of each luma).

libvmaf (``float_moment.c``, ``moment.c``) copies both luma planes to floats
(``picture_copy`` with offset 0: ``sample / scaler``) and, for each, adds
the samples (first moment) and their float squares (second moment) into a
``double`` in row order, then divides by ``w * h``.  It writes
``float_moment_ref1st``, ``float_moment_dis1st``, ``float_moment_ref2nd``
and ``float_moment_dis2nd``, although its extractor's provided feature is
named ``float_moment``.

Layers: :func:`moment_sums` (the per-frame statistics a GPU kernel
reproduces: the four double sums; up to 12 bits they are
:func:`sums_from_integers` of the integer sums of samples and of their
squares), :func:`metrics_from_stats` (the division), :class:`FloatMoment`
(the CPU twin).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ._float_common import FLOAT_BITDEPTHS, SCALERS, double_sum, to_float_plane
from .declaration import LumaTwin
from .float_psnr import EXACT_BITDEPTHS

__all__ = ["DECLARATION", "FloatMoment", "NAMES", "moment_sums", "sums_from_integers", "metrics_from_stats"]

#: in the order libvmaf writes them, and the order of moment_sums
NAMES = ("float_moment_ref1st", "float_moment_dis1st", "float_moment_ref2nd", "float_moment_dis2nd")


def moment_sums(ref: np.ndarray, dist: np.ndarray, bitdepth: int) -> tuple[float, float, float, float]:
    """moment.c's four ``cum`` before the division: sums of ref, dist, ref^2, dist^2 (float squares)."""
    r = to_float_plane(ref, bitdepth, 0.0)
    d = to_float_plane(dist, bitdepth, 0.0)
    return (double_sum(r, bitdepth), double_sum(d, bitdepth),
            double_sum(r * r, bitdepth), double_sum(d * d, bitdepth))


def sums_from_integers(integer_sums: Sequence[int], bitdepth: int) -> tuple[float, float, float, float]:
    """:func:`moment_sums` from the integer sums (ref, dist) of samples and (ref, dist) of squares, up to 12 bits.

    There a float sample is ``k / scaler`` and its float square ``k^2 / scaler^2``
    exactly, and libvmaf's double sums never round (``_float_common.double_sum``),
    so each is the integer sum over a power of two: an exact division."""
    if bitdepth not in EXACT_BITDEPTHS:
        raise ValueError(f"float_moment: the integer sums give libvmaf's doubles only up to 12 bits, not {bitdepth}")
    s = SCALERS[bitdepth]
    r1, d1, r2, d2 = (float(int(v)) for v in integer_sums)
    return r1 / s, d1 / s, r2 / (s * s), d2 / (s * s)


def metrics_from_stats(sums: Sequence[float], w: int, h: int) -> dict[str, float]:
    """The four moments: each double sum divided by ``w * h`` (an int in C, converted to double)."""
    return {name: float(s) / (w * h) for name, s in zip(NAMES, sums, strict=True)}


class FloatMoment(LumaTwin):
    """CPU twin of libvmaf's ``float_moment``."""

    FEATURE, BITDEPTHS = "float_moment", FLOAT_BITDEPTHS

    def luma_metrics(self, ref: np.ndarray, dist: np.ndarray) -> dict[str, float]:
        h, w = ref.shape
        return metrics_from_stats(moment_sums(ref, dist, self.bitdepth), w, h)


DECLARATION = FloatMoment.declare(
    NAMES,
    help="first and second moments (mean, mean square) of the reference and distorted luma, as floats",
)
