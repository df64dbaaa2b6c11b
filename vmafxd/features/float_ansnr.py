"""Float ANSNR: libvmaf's ``float_ansnr`` extractor (``float_ansnr``, ``float_anpsnr``).

libvmaf (``float_ansnr.c``, ``ansnr.c``, ``ansnr_tools.c``, none of the
``ANSNR_OPT_*`` switches set) copies both luma planes to floats
(``sample / scaler - 128``), filters the reference with a 3x3 kernel
(``[1 2 1]^T [1 2 1] / 16``) and the distorted picture with a 5x5 one
(``/ 571``), both as full 2-D kernels in float: per output
``accum = 0; for each kernel row { inner = 0; inner += f * x for each
column; accum += inner }``, with edges mirrored as ``ansnr_filter2d_s`` does
(``-i`` above the top, ``2n - i - 1`` below the bottom: the bottom and
right edges repeat the edge sample, the top and left ones do not).  Then
``ansnr_mse_s`` sums, in floats per row and the rows into a float,
``sig = ref_f^2`` and ``noise = (ref_f - dis_f)^2``, and

* ``float_ansnr = noise == 0 ? psnr_max : 10 * log10(sig / noise)`` (a float
  division);
* ``float_anpsnr = MIN(10 * log10(peak^2 * w * h / MAX(noise, 1e-10)), psnr_max)``

with peak and cap per bit depth as ``float_psnr`` has them.

Layers: :func:`filtered` and :func:`signal_noise` (the per-frame statistics a
GPU kernel reproduces: two floats), :func:`metrics_from_stats`,
:class:`FloatAnsnr` (the CPU twin).
"""

from __future__ import annotations

import functools

import numpy as np

from ._float_common import row_major_sum, to_float_plane
from .declaration import LumaTwin
from ._c_math import c_log10, c_max, c_min
from .float_psnr import EPS, PEAKS

__all__ = ["DECLARATION", "FloatAnsnr", "NAMES", "REF_KERNEL", "DIS_KERNEL", "filtered", "signal_noise",
           "metrics_from_stats", "MIN_SIZE"]

NAMES = ("float_ansnr", "float_anpsnr")
#: ansnr_tools.c's 2-D kernels: double constants rounded to C floats
REF_KERNEL = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]], np.float64) / 16.0
DIS_KERNEL = np.array([[2, 7, 12, 7, 2], [7, 31, 52, 31, 7], [12, 52, 127, 52, 12], [7, 31, 52, 31, 7],
                       [2, 7, 12, 7, 2]], np.float64) / 571.0
REF_KERNEL = REF_KERNEL.astype(np.float32)
DIS_KERNEL = DIS_KERNEL.astype(np.float32)
#: the 5x5 kernel's mirror reaches 2 samples past each edge, which needs 3 samples
MIN_SIZE = 3


@functools.lru_cache(maxsize=64)
def _mirror_index(n: int, radius: int) -> np.ndarray:
    """ansnr_filter2d_s's edge rule for indices -radius .. n + radius - 1."""
    idx = np.arange(-radius, n + radius)
    idx = np.where(idx < 0, -idx, idx)
    idx = np.where(idx >= n, 2 * n - idx - 1, idx)
    idx.flags.writeable = False
    return idx


def filtered(src: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """ansnr_filter2d_s of a float32 plane: per kernel row a float sum left to right, the row sums top to bottom."""
    fw = kernel.shape[0]
    r = fw // 2
    h, w = src.shape
    padded = src[_mirror_index(h, r)][:, _mirror_index(w, r)]
    accum = np.zeros((h, w), np.float32)
    inner = np.empty((h, w), np.float32)
    term = np.empty((h, w), np.float32)
    for fi in range(fw):
        inner.fill(0.0)
        for fj in range(fw):
            np.multiply(kernel[fi, fj], padded[fi:fi + h, fj:fj + w], out=term)
            np.add(inner, term, out=inner)
        np.add(accum, inner, out=accum)
    return accum


def signal_noise(ref: np.ndarray, dist: np.ndarray, bitdepth: int) -> tuple[np.float32, np.float32]:
    """ansnr_mse_s's float ``sig`` and ``noise`` of the filtered luma planes."""
    h, w = ref.shape
    if h < MIN_SIZE or w < MIN_SIZE:
        raise ValueError(f"float_ansnr needs a luma of at least {MIN_SIZE}x{MIN_SIZE}, not {w}x{h}")
    ref_f = filtered(to_float_plane(ref, bitdepth), REF_KERNEL)
    dis_f = filtered(to_float_plane(dist, bitdepth), DIS_KERNEL)
    diff = ref_f - dis_f
    return row_major_sum(ref_f * ref_f), row_major_sum(diff * diff)


def metrics_from_stats(sig: np.float32, noise: np.float32, w: int, h: int, bitdepth: int) -> dict[str, float]:
    """``float_ansnr`` and ``float_anpsnr`` from the float sums."""
    peak, psnr_max = PEAKS[bitdepth]
    sig, noise = np.float32(sig), np.float32(noise)
    # sig / noise divides two floats in C: a float quotient, widened for log10
    ansnr = psnr_max if noise == 0 else 10.0 * c_log10(float(sig / noise))
    anpsnr = c_min(10 * c_log10(peak * peak * w * h / c_max(float(noise), EPS)), psnr_max)
    return {"float_ansnr": ansnr, "float_anpsnr": anpsnr}


class FloatAnsnr(LumaTwin):
    """CPU twin of libvmaf's ``float_ansnr``."""

    FEATURE, BITDEPTHS = "float_ansnr", tuple(PEAKS)

    def luma_metrics(self, ref: np.ndarray, dist: np.ndarray) -> dict[str, float]:
        h, w = ref.shape
        sig, noise = signal_noise(ref, dist, self.bitdepth)
        return metrics_from_stats(sig, noise, w, h, self.bitdepth)


DECLARATION = FloatAnsnr.declare(
    NAMES,
    help="float anti-noise SNR of the luma: filtered reference against filtered distorted (and its PSNR form)",
)
