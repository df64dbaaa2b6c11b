"""Float moments: libvmaf's ``float_moment`` extractor (first and second moments of each luma).

libvmaf (``float_moment.c``, ``moment.c``) copies both luma planes to floats
(``picture_copy`` with offset 0: ``sample / scaler``) and, for each, adds
the samples (first moment) and their float squares (second moment) into a
``double`` in row order, then divides by ``w * h``.  It writes
``float_moment_ref1st``, ``float_moment_dis1st``, ``float_moment_ref2nd``
and ``float_moment_dis2nd``, although its extractor's provided feature is
named ``float_moment``.

Layers: :func:`moment_sums` (the per-frame statistics a GPU kernel
reproduces: the four double sums), :func:`metrics_from_stats` (the
division), :class:`FloatMoment` (the CPU twin).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._float_common import double_sum, to_float_plane
from .declaration import FeatureDeclaration, FrameScores, PerFrameTwin, check_bitdepth

__all__ = ["DECLARATION", "FloatMoment", "NAMES", "moment_sums", "metrics_from_stats"]

#: in the order libvmaf writes them, and the order of moment_sums
NAMES = ("float_moment_ref1st", "float_moment_dis1st", "float_moment_ref2nd", "float_moment_dis2nd")
#: picture_copy's scalers; libvmaf reads any other depth as 8-bit samples, which we refuse
SUPPORTED_BITDEPTHS = (8, 10, 12, 16)


def moment_sums(ref: np.ndarray, dist: np.ndarray, bitdepth: int) -> tuple[float, float, float, float]:
    """moment.c's four ``cum`` before the division: sums of ref, dist, ref^2, dist^2 (float squares)."""
    r = to_float_plane(ref, bitdepth, 0.0)
    d = to_float_plane(dist, bitdepth, 0.0)
    return (double_sum(r, bitdepth), double_sum(d, bitdepth),
            double_sum(r * r, bitdepth), double_sum(d * d, bitdepth))


def metrics_from_stats(sums: Sequence[float], w: int, h: int) -> dict[str, float]:
    """The four moments: each double sum divided by ``w * h`` (an int in C, converted to double)."""
    return {name: float(s) / (w * h) for name, s in zip(NAMES, sums, strict=True)}


class FloatMoment(PerFrameTwin):
    """CPU twin of libvmaf's ``float_moment``."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        check_bitdepth("float_moment", bitdepth, SUPPORTED_BITDEPTHS)
        self.width, self.height, self.bitdepth = width, height, bitdepth

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        h, w = ref.luma.shape
        return [(index, metrics_from_stats(moment_sums(ref.luma, dist.luma, self.bitdepth), w, h))]


DECLARATION = FeatureDeclaration(
    name="float_moment",
    provides=NAMES,
    cpu=FloatMoment,
    help="first and second moments (mean, mean square) of the reference and distorted luma, as floats",
)
