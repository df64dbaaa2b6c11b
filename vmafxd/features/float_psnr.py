"""Float PSNR: libvmaf's ``float_psnr`` extractor (luma only).

libvmaf (``float_psnr.c``, ``psnr.c``) copies both luma planes to floats
(``picture_copy`` with offset 0: ``sample / scaler``), adds the float square
of each float difference into a ``double`` in row order, divides by
``w * h`` and returns ``MIN(10 * log10(peak^2 / MAX(noise, 1e-10)), psnr_max)``.
Peak and cap are fixed per bit depth (``init``): 255 / 60 dB at 8 bits,
255.75 / 72 at 10, 255.9375 / 84 at 12, 255.99609375 / 108 at 16; libvmaf
refuses any other depth.  Unlike the integer ``psnr``, the peak stays near
255 because the samples are scaled down to 8-bit range.

Layers: :func:`noise_sum` (the per-frame statistic a GPU kernel reproduces:
the double sum of squared float differences; up to 12 bits it is
:func:`noise_from_sse` of the integer sum of squared sample differences),
:func:`metrics_from_stats` (libvmaf's double arithmetic on it),
:class:`FloatPsnr` (the CPU twin).
"""

from __future__ import annotations

import numpy as np

from ._c_math import c_log10, c_max, c_min
from ._float_common import SCALERS, double_sum, to_float_plane
from .declaration import LumaTwin

__all__ = ["DECLARATION", "FloatPsnr", "PEAKS", "EXACT_BITDEPTHS", "SCALERS", "noise_sum", "noise_from_sse", "metrics_from_stats"]

#: float_psnr.c / float_ansnr.c's init: bit depth -> (peak, psnr_max)
PEAKS = {8: (255.0, 60.0), 10: (255.75, 72.0), 12: (255.9375, 84.0), 16: (255.99609375, 108.0)}
#: the depths at which libvmaf's double sums of these float terms never round (_float_common.double_sum)
EXACT_BITDEPTHS = (8, 10, 12)
#: the floor of the mean squared error (psnr.c's ``eps``)
EPS = 1e-10


def noise_sum(ref: np.ndarray, dist: np.ndarray, bitdepth: int) -> float:
    """psnr.c's ``noise_``: the double sum of ``diff * diff`` (a float product) over the luma."""
    diff = to_float_plane(ref, bitdepth, 0.0) - to_float_plane(dist, bitdepth, 0.0)
    return double_sum(diff * diff, bitdepth)


def noise_from_sse(sse: int, bitdepth: int) -> float:
    """:func:`noise_sum` from the integer sum of squared sample differences, up to 12 bits.

    There each float difference is ``k / scaler`` and its square ``k^2 / scaler^2``
    exactly, and the double sum never rounds, so libvmaf's ``noise_`` is the integer
    sum (below 2^53) over ``scaler^2``, a power of two: an exact division."""
    if bitdepth not in EXACT_BITDEPTHS:
        raise ValueError(f"float_psnr: the integer sum gives libvmaf's double only up to 12 bits, not {bitdepth}")
    return float(sse) / (SCALERS[bitdepth] * SCALERS[bitdepth])


def metrics_from_stats(noise: float, w: int, h: int, bitdepth: int) -> dict[str, float]:
    """``float_psnr`` from the frame's double noise sum."""
    peak, psnr_max = PEAKS[bitdepth]
    mse = noise / (w * h)
    return {"float_psnr": c_min(10 * c_log10(peak * peak / c_max(mse, EPS)), psnr_max)}


class FloatPsnr(LumaTwin):
    """CPU twin of libvmaf's ``float_psnr``."""

    FEATURE, BITDEPTHS = "float_psnr", tuple(PEAKS)

    def luma_metrics(self, ref: np.ndarray, dist: np.ndarray) -> dict[str, float]:
        h, w = ref.shape
        return metrics_from_stats(noise_sum(ref, dist, self.bitdepth), w, h, self.bitdepth)


DECLARATION = FloatPsnr.declare(
    ("float_psnr",),
    help="float PSNR of the luma (peak 255 scaled, capped at 60/72/84/108 dB for 8/10/12/16 bits)",
)
