"""The per-pixel arithmetic of libvmaf's float VIF (``vif.c``, ``vif_tools.c``), op for op.

Every value is a C ``float`` unless noted; where C promotes to ``double``
(an operand is a ``double`` option such as ``vif_sigma_nsq``), the numpy code
widens to float64 at the same point and rounds back to float32 where C
assigns to a ``float``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._adm_csf import powf
from ._float_common import filter_stack, row_major_sum

__all__ = ["filter_size", "gaussian_filter", "gaussian_kernel", "gaussian_of_width", "log2f_approx", "statistic", "scale_sums", "VALID_KERNELSCALES"]

F32 = np.float32

#: vif_tools.h's valid_kernelscales (C float expressions)
VALID_KERNELSCALES = tuple(
    float(F32(v))
    for v in (
        1.0, F32(1.0) / F32(2.0), F32(3.0) / F32(2.0), 2.0, F32(2.0) / F32(3.0), F32(24.0) / F32(10.0),
        F32(360.0) / F32(97.0), F32(4.0) / F32(3.0), F32(3.5) / F32(3.0), F32(3.75) / F32(3.0),
        F32(4.25) / F32(3.0), F32(5.0) / F32(3.0), 3.0, F32(1.0) / F32(2.25), 1.4746, 1.54, 1.6, 1.06667,
        0.711111, 0.740740, 1.111111,
    )
)


def valid_kernelscale(ks: float) -> bool:
    """``vif_validate_kernelscale``: within 1e-3 of a listed value (compared in float)."""
    k = F32(ks)
    return any(abs(float(k - F32(v))) < 1e-3 for v in VALID_KERNELSCALES)


def filter_size(scale: int, kernelscale: float) -> int:
    """``vif_get_filter_size``: ``2^(4 - scale) + 1`` times the kernel scale, rounded up to odd, at least 3."""
    n = (1 << (4 - scale)) + 1
    c = math.ceil(float(F32(n) * F32(kernelscale)))
    if c % 2 == 0:
        c += 1
    return max(c, 3)


@functools.lru_cache(maxsize=None)
def gaussian_filter(scale: int, kernelscale: float) -> np.ndarray:
    """``vif_get_filter``: a normalised Gaussian of the scale's width, sigma ``width / 5``, as C computes it."""
    return gaussian_of_width(filter_size(scale, kernelscale))


def gaussian_of_width(size: int) -> np.ndarray:
    """The filter of ``size`` taps: its sigma is ``size / 5``, so the width alone decides every tap."""
    return gaussian_kernel(size, F32(size) / F32(5.0))


@functools.lru_cache(maxsize=None)
def gaussian_kernel(size: int, stdev: np.float32) -> np.ndarray:
    """``get_1d_gaussian_kernel``: ``size`` taps of a Gaussian of float ``stdev``, normalised by their float sum."""
    sd = float(stdev)
    k = (size - 1) // 2
    out = []
    total = F32(0.0)
    den = F32(1.0 / (sd * math.sqrt(2 * math.pi)))
    for i in range(size):
        x = float(F32(i - k) - F32(0.0))
        num = F32(math.exp(-0.5 * x / sd * x / sd))
        v = num / den
        out.append(v)
        total = total + v
    taps = np.array([v / total for v in out], dtype=np.float32)
    taps.flags.writeable = False
    return taps


_LOG2_POLY = tuple(
    F32(v)
    for v in (-0.012671635276421, 0.064841182402670, -0.157048836463065, 0.257167726303123,
              -0.353800560300520, 0.480131410397451, -0.721314327952201, 1.442694803896991, 0)
)


def log2f_approx(x: np.ndarray) -> np.ndarray:
    """libvmaf's ``log2f_approx`` (VIF_OPT_FAST_LOG2) of positive float32 values.

    The exponent, plus a degree-8 polynomial (Horner, in float) of the
    mantissa in [1, 2) minus one.  Inputs here are always >= 1.
    """
    bits = x.view(np.uint32)
    exponent = ((bits & np.uint32(0x7F800000)) >> np.uint32(23)).astype(np.int32) - 127
    remain = ((bits & np.uint32(0x007FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
    t = remain - F32(1.0)
    var = np.zeros_like(t)
    for p in _LOG2_POLY:
        var = var * t + p
    return exponent.astype(np.float32) + var


_EPS = F32(1.0e-10)
_ZERO = F32(0.0)


def statistic(mu1, mu2, xx, yy, xy, gain_limit: float, sigma_nsq: float) -> tuple[np.ndarray, np.ndarray]:
    """``vif_statistic_s``'s per-pixel ``num_val`` and ``den_val`` (float32 arrays).

    The branches are masked assignments in libvmaf's order; a comparison
    with a ``double`` option is made in float64, as C promotes it.
    """
    sigma_max_inv = F32(float(powf(sigma_nsq, 2.0)) / (255.0 * 255.0))  # powf(nsq, 2.0f) / double
    t = mu1 * mu1
    s1 = xx - t
    np.multiply(mu2, mu2, out=t)
    s2 = yy - t
    np.multiply(mu1, mu2, out=t)
    s12 = xy - t
    np.copyto(s1, _ZERO, where=~(s1 > 0))  # MAX(sigma1_sq, 0.0f)
    np.copyto(s2, _ZERO, where=~(s2 > 0))
    g = s12 / (s1 + _EPS)
    np.multiply(g, s12, out=t)
    sv = s2 - t
    low = s1 < _EPS
    np.copyto(g, _ZERO, where=low)
    np.copyto(sv, s2, where=low)
    np.copyto(s1, _ZERO, where=low)
    np.less(s2, _EPS, out=low)
    np.copyto(g, _ZERO, where=low)
    np.copyto(sv, _ZERO, where=low)
    np.less(g, 0, out=low)
    np.copyto(sv, s2, where=low)
    np.copyto(g, _ZERO, where=low)
    np.copyto(sv, _EPS, where=~(sv > _EPS))  # MAX(sv_sq, eps)
    limit = F32(gain_limit)
    np.copyto(g, limit, where=~(g < limit))  # MIN(g, gain limit)
    # (g * g * sigma1_sq) / (sv_sq + vif_sigma_nsq) in double, 1.0f + it in double, to float
    np.multiply(g, g, out=t)
    t *= s1
    num_arg = (1.0 + t.astype(np.float64) / (sv.astype(np.float64) + sigma_nsq)).astype(np.float32)
    s1_64 = s1.astype(np.float64)
    den_arg = (1.0 + s1_64 / sigma_nsq).astype(np.float32)
    num = log2f_approx(num_arg)
    den = log2f_approx(den_arg)
    np.copyto(num, _ZERO, where=s12 < 0)
    flat = s1_64 < sigma_nsq
    np.multiply(s2, sigma_max_inv, out=t)
    np.subtract(F32(1.0), t, out=t)
    np.copyto(num, t, where=flat)
    np.copyto(den, F32(1.0), where=flat)
    return num, den


def scale_sums(ref: np.ndarray, dist: np.ndarray, taps: np.ndarray, gain_limit: float,
               sigma_nsq: float) -> tuple[np.float32, np.float32]:
    """One scale's (num, den): the filtered moments, the statistic, libvmaf's row-major float sums."""
    # the five planes libvmaf filters: x, y, x*x, y*y, x*y (products per sample, then filtered)
    mu1, mu2, xx, yy, xy = filter_stack(np.stack((ref, dist, ref * ref, dist * dist, ref * dist)), taps)
    num, den = statistic(mu1, mu2, xx, yy, xy, gain_limit, sigma_nsq)
    return row_major_sum(num), row_major_sum(den)


def decimate(ref: np.ndarray, dist: np.ndarray, taps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The next scale's pictures: filtered with this scale's taps, even rows and columns kept (``vif_dec2_s``)."""
    h, w = ref.shape
    f = filter_stack(np.stack((ref, dist)), taps)
    out = f[:, : (h // 2) * 2 : 2, : (w // 2) * 2 : 2]
    return np.ascontiguousarray(out[0]), np.ascontiguousarray(out[1])
