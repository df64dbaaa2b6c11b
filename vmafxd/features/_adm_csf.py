"""Scalar arithmetic for integer ADM: C float/double semantics and the CSF factors.

libvmaf mixes ``float`` and ``double`` freely in its scalar code, and every
mix matters for bit-exactness.  The rules used throughout:

* a ``float`` value is carried as ``np.float32``; an operation on two floats
  is done on two ``np.float32`` (single precision, as C does with SSE);
* a ``double`` value is a Python ``float``; as soon as C promotes (``float``
  op ``double``, or a call to ``pow``/``exp``/``log10``) we widen with
  ``float(x)`` *before* operating.  (numpy 2 would otherwise keep
  ``np.float32 + 1.0`` in single precision, which is not C's rule.);
* a double stored into a ``float`` is rounded with :func:`f32`;
* ``powf`` is glibc's ``powf`` through ctypes, so it is the very function
  libvmaf called; Python's ``math.pow``/``math.exp``/``math.log10`` already
  call glibc's ``pow``/``exp``/``log10``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from typing import Callable

import numpy as np

__all__ = ["f32", "powf", "powf_array", "ONE_THIRD_F", "csf_factors", "BlendUnsupported", "scale0_int_rfactors", "s123_int_rfactors"]


def f32(x) -> np.float32:
    """Round a double (Python float) to float, as a C assignment to ``float`` does."""
    return np.float32(float(x))


def _load_powf():
    name = ctypes.util.find_library("m")
    try:
        # PyDLL: the call keeps the GIL.  powf is a few dozen nanoseconds of
        # arithmetic; releasing and retaking the GIL around it would cost far
        # more, and with another thread running it hands the GIL over each time.
        lib = ctypes.PyDLL(name or "libm.so.6")
        fn = lib.powf
    except (OSError, AttributeError):  # pragma: no cover - non-glibc platforms
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = (ctypes.c_float, ctypes.c_float)
    return fn


_POWF = _load_powf()


def powf(x, y) -> np.float32:
    """C ``powf``; ``x`` and ``y`` are first rounded to float, as the call does."""
    xf, yf = f32(x), f32(y)
    if _POWF is not None:
        return np.float32(_POWF(float(xf), float(yf)))
    return np.power(xf, yf)  # pragma: no cover


def _scalar_power_is_powf() -> bool:
    """Whether numpy's float32 *scalar* power is C ``powf`` (numpy computes it with
    ``npy_powf``, i.e. libm's ``powf``; its array ufunc is a different, vectorised
    function).  Checked on values spread over the float range, against glibc's
    ``powf`` through ctypes."""
    if _POWF is None:  # pragma: no cover
        return False
    xs = np.float32(1.37) ** np.arange(-120, 120, dtype=np.float32) * np.float32(0.7071)
    ys = (np.float32(1.0) / np.float32(3.0), np.float32(0.5), np.float32(2.2), np.float32(-1.5))
    with np.errstate(all="ignore"):
        return all(float(v ** y) == _POWF(float(v), float(y)) for v in xs for y in ys)


_SCALAR_POWF = _scalar_power_is_powf()


#: ``native_powf_array(x, y)``: :func:`powf_array` in one compiled loop over the C library's
#: ``powf`` (vmafxd/lanes/native/host_math.cpp), set by a lane that could build it
native_powf_array: Callable[[np.ndarray, object], np.ndarray] | None = None


def powf_array(x: np.ndarray, y) -> np.ndarray:
    """C ``powf`` of each element of a float32 array.

    Element by element: numpy's vectorised power is not the same function.
    numpy's float32 scalar power is (checked at import), and four times
    cheaper than a ctypes call; without it, glibc's ``powf`` through ctypes.
    Where a lane installed the compiled loop, that (the same function).
    """
    if native_powf_array is not None:
        return native_powf_array(x, y)
    yf = np.float32(y)
    if _SCALAR_POWF:
        with np.errstate(all="ignore"):  # C's powf is silent too (inf, nan)
            return np.array([v ** yf for v in x.astype(np.float32, copy=False)], dtype=np.float32)
    if _POWF is None:  # pragma: no cover
        return np.power(x, yf)
    fn, yd = _POWF, float(yf)
    # the elements are float32 values: ctypes passes them to c_float unchanged
    return np.array([fn(v, yd) for v in x.tolist()], dtype=np.float32)


ONE_THIRD_F = np.float32(1.0) / np.float32(3.0)  # the literal 1.0f / 3.0f

# --- Watson et al. 1997 noise-floor model (luma row of libvmaf's tables) -------------

_WATSON_A = np.float32(0.495)
_WATSON_K = np.float32(0.466)
_WATSON_F0 = np.float32(0.401)
_WATSON_G = tuple(np.float32(v) for v in (1.501, 1.0, 0.534, 1.0))
_BASIS_AMPLITUDES = tuple(
    tuple(np.float32(v) for v in row)
    for row in (
        (0.62171, 0.67234, 0.72709, 0.67234),
        (0.34537, 0.41317, 0.49428, 0.41317),
        (0.18004, 0.22727, 0.28688, 0.22727),
        (0.091401, 0.11792, 0.15214, 0.11792),
        (0.045943, 0.059758, 0.077727, 0.059758),
        (0.023013, 0.030018, 0.039156, 0.030018),
    )
)


def _display_resolution(nvd: float, rdh: int) -> np.float32:
    """Pixels per degree of visual angle, computed in double and stored as float."""
    return f32(nvd * rdh * math.pi / 180.0)


def _watson_quant_step(lam: int, theta: int, nvd: float, rdh: int) -> np.float32:
    r = _display_resolution(nvd, rdh)
    temp = f32(math.log10(math.pow(2.0, lam + 1) * float(_WATSON_F0) * float(_WATSON_G[theta]) / float(r)))
    expo = _WATSON_K * temp * temp  # float * float * float, in single precision
    q = 2.0 * float(_WATSON_A) * math.pow(10.0, float(expo)) / float(_BASIS_AMPLITUDES[lam][theta])
    return f32(q)


# --- Barten CSF (HDR-VDP-2 simplification) ------------------------------------------

_BARTEN_ANCHORS = tuple(np.float32(v) for v in (0.002, 0.02, 0.2, 2, 20, 150))
_BARTEN_PARAMS = tuple(
    tuple(np.float32(v) for v in row)
    for row in (
        (0.0160737, 0.991265, 3.74038, 0.50722, 4.46044),
        (0.383873, 0.800889, 3.54104, 0.682505, 4.94958),
        (0.929301, 0.476505, 4.37453, 0.750315, 5.28678),
        (1.29776, 0.405782, 4.40602, 0.935314, 5.61425),
        (1.49222, 0.334278, 3.79542, 1.07327, 6.4635),
        (1.46213, 0.394533, 2.7755, 1.16577, 7.45665),
    )
)
_BARTEN_SA = tuple(np.float32(v) for v in (30.162, 4.0627, 1.6596, 0.2712))
_BARTEN_MTF_A = tuple(
    np.float32(v) for v in (0.424838596301290, 0.572435103936480, 0.000167576239164937, 0.00255872352306433)
)
_BARTEN_MTF_B = tuple(np.float32(v) for v in (0.028, 0.37, 37, 360))
CSF_LUMINANCE = 100.0


def _lerp(lp, lv, rp, rv, sp) -> np.float32:
    return lv + ((rv - lv) / (rp - lp)) * (sp - lp)  # all float


def _barten_mtf(sf: np.float32) -> np.float32:
    mtf = np.float32(0.0)
    for a, b in zip(_BARTEN_MTF_A, _BARTEN_MTF_B):
        mtf = f32(float(mtf) + float(a) * math.exp(float(-b * sf)))
    return mtf


def _barten_rod_cone(lum: np.float32) -> np.float32:
    drop, slope, low = _BARTEN_SA[1], _BARTEN_SA[2], _BARTEN_SA[3]
    inner = math.pow(float(drop / lum), float(slope)) + 1
    return f32(float(_BARTEN_SA[0]) * math.pow(inner, float(-low)))


def _barten_csf(lam: int, nvd: float, rdh: int, lum: float, scale: float) -> np.float32:
    r = _display_resolution(nvd, rdh)
    sf = f32(float(r) / math.pow(2, lam + 1))
    lo_a, hi_a = float(_BARTEN_ANCHORS[0]), float(_BARTEN_ANCHORS[5])
    clamped = hi_a if lum > hi_a else (lo_a if lum < lo_a else lum)
    li = ri = 0
    for i in range(5):
        if clamped >= float(_BARTEN_ANCHORS[i]) and clamped <= float(_BARTEN_ANCHORS[i + 1]):
            li, ri = i, i + 1
            break
    lp = f32(math.log10(float(_BARTEN_ANCHORS[li])))
    rp = f32(math.log10(float(_BARTEN_ANCHORS[ri])))
    sp = f32(math.log10(clamped))
    p = [_lerp(lp, _BARTEN_PARAMS[li][k], rp, _BARTEN_PARAMS[ri][k], sp) for k in (1, 2, 3, 4)]
    a = f32(1.0 + math.pow(float(p[0] * sf), float(p[1])))
    x = float(sf / np.float32(7))
    b = f32(1.0 / math.pow(1 - math.exp(-(x * x)), float(p[2])))
    csf = f32(float(p[3]) / math.pow(float(a * b), 0.5))
    return f32(float(csf * _barten_mtf(sf) * _barten_rod_cone(f32(lum))) * scale)


# --- Barten/Watson blends: tabulated per viewing condition --------------------------

#: libvmaf's Barten/Watson blend factors by (adm_csf_mode, display height, viewing distance):
#: mode 2 barten_watson_blend_csf, mode 3 barten_watson_blend_csf_mae; each entry is
#: (theta 0 by scale, theta 1 by scale)
_BLEND = {
    (2, 1080, 3.0): ((0.01183, 0.025026, 0.04295, 0.058621), (0.004302, 0.011778, 0.023918, 0.035901)),
    (2, 1080, 5.0): ((0.004212, 0.014809, 0.029642, 0.047464), (0.000984, 0.005852, 0.0146, 0.027574)),
    (2, 2160, 3.0): ((0.00226, 0.01183, 0.025026, 0.04295), (0.000479, 0.004302, 0.011778, 0.023918)),
    (2, 2160, 5.0): ((0.000092, 0.004212, 0.014809, 0.029642), (0.000050, 0.000984, 0.005852, 0.0146)),
    (2, 720, 3.0): ((0.018715, 0.035637, 0.052798, 0.061509), (0.007999, 0.018396, 0.031851, 0.037718)),
    (2, 720, 5.0): ((0.010144, 0.022561, 0.040309, 0.05672), (0.003463, 0.010282, 0.021839, 0.034641)),
    (2, 480, 3.0): ((0.027961, 0.045875, 0.060275, 0.056234), (0.013572, 0.026277, 0.036959, 0.034511)),
    (2, 480, 5.0): ((0.016781, 0.032822, 0.05032, 0.061594), (0.00691, 0.016545, 0.029917, 0.037777)),
    (3, 1080, 3.0): ((0.011249, 0.022606, 0.035930, 0.045673), (0.004097, 0.010921, 0.021430, 0.031313)),
    (3, 1080, 5.0): ((0.004052, 0.013939, 0.026298, 0.038833), (0.000927, 0.005544, 0.013415, 0.024515)),
    (3, 2160, 3.0): ((0.002166, 0.011249, 0.022606, 0.035930), (0.000447, 0.004097, 0.010921, 0.021430)),
    (3, 2160, 5.0): ((0.000077, 0.004052, 0.013939, 0.026298), (0.000045, 0.000927, 0.005544, 0.013415)),
    (3, 720, 3.0): ((0.017329, 0.030870, 0.042134, 0.047410), (0.007509, 0.016707, 0.028072, 0.032722)),
    (3, 720, 5.0): ((0.009689, 0.020577, 0.034162, 0.044523), (0.003302, 0.009579, 0.019661, 0.030318)),
    (3, 480, 3.0): ((0.024969, 0.037825, 0.046676, 0.043974), (0.012511, 0.023424, 0.032139, 0.030166)),
    (3, 480, 5.0): ((0.015665, 0.028766, 0.040612, 0.047483), (0.006514, 0.015107, 0.026476, 0.032776)),
}


class BlendUnsupported(ValueError):
    """The blended CSF has no table for this display height and viewing distance."""


def _blend(mode: int, scale: int, theta: int, nvd: float, rdh: int) -> np.float32:
    key = (mode, rdh, nvd)
    if rdh == 2160 and nvd == 1.5:  # same pixels per degree as 1080 at 3H
        key = (mode, 1080, 3.0)
    if key not in _BLEND:
        # libvmaf would return -EINVAL as a CSF factor and go on with garbage.
        raise BlendUnsupported(f"no blended CSF table for display height {rdh} at {nvd:g}H")
    return np.float32(_BLEND[key][theta][scale])


def csf_factors(scale: int, mode: int, nvd: float, rdh: int, csf_scale: float, diag_scale: float):
    """The float CSF weights (h, v, d) of one DWT scale, as libvmaf's ``rfactor``."""
    if mode == 1:
        f1 = _barten_csf(scale, nvd, rdh, CSF_LUMINANCE, csf_scale)
        f2 = _barten_csf(scale, nvd, rdh, CSF_LUMINANCE, diag_scale)
    elif mode in (2, 3):
        f1, f2 = _blend(mode, scale, 0, nvd, rdh), _blend(mode, scale, 1, nvd, rdh)
    else:
        f1 = np.float32(1.0) / _watson_quant_step(scale, 1, nvd, rdh)
        f2 = np.float32(1.0) / _watson_quant_step(scale, 2, nvd, rdh)
    return (f1, f1, f2)


def _double_to_uint16(x: float) -> int:
    """gcc/x86-64's ``(uint16_t)double``: a 32-bit truncating conversion, then the low 16 bits.

    Out of the int32 range the conversion yields 0x80000000, hence 0.
    """
    v = math.trunc(x) if -(2.0**31) <= x < 2.0**31 else -(2**31)
    return v & 0xFFFF


def _double_to_uint32(x: float, avx512: bool) -> int:
    """gcc/x86-64's ``(uint32_t)double``, which depends on the instruction set it compiles for.

    Plain x86-64 code truncates to 64 bits and keeps the low 32 bits (so a
    weight of 1.5 becomes 0.5 * 2^32); code built for AVX-512 uses
    ``vcvttsd2usi``, which saturates out-of-range values to 0xFFFFFFFF.
    libvmaf computes these weights inside each routine, so on an AVX-512
    host every integer stage uses the saturated value.
    """
    if avx512:
        return math.trunc(x) if -1.0 < x < 2.0**32 else 0xFFFFFFFF
    v = math.trunc(x) if abs(x) < 2.0**63 else -(2**63)
    return v & 0xFFFFFFFF


def scale0_int_rfactors(factors, mode: int, nvd: float, rdh: int) -> tuple[int, int, int]:
    """Scale 0's Q21/Q21/Q23 uint16 CSF weights.

    At the default viewing condition with the Watson CSF libvmaf uses fixed
    constants instead of converting the float weights.
    """
    if abs(nvd * rdh - 3.0 * 1080) < 1.0e-8 and mode == 0:
        return (36453, 36453, 49417)
    return (
        _double_to_uint16(float(factors[0]) * 2.0**21),
        _double_to_uint16(float(factors[1]) * 2.0**21),
        _double_to_uint16(float(factors[2]) * 2.0**23),
    )


def s123_int_rfactors(factors, avx512: bool) -> tuple[int, int, int]:
    """Scales 1-3's Q32 uint32 CSF weights."""
    return tuple(_double_to_uint32(float(f) * 2.0**32, avx512) for f in factors)
