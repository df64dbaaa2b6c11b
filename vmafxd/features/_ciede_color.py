"""CIEDE2000's per-pixel arithmetic, in libvmaf's float/double order.

libvmaf's ``ciede.c`` (a port of av-metrics) mixes float and double: the
YUV -> RGB -> XYZ -> Lab conversion runs in double and stores L, a, b as
float; the colour difference keeps most intermediates in float but calls the
double ``sqrt``/``pow``/``atan2``/``sin``/``cos``/``exp`` on promoted
values.  Every function here keeps each C variable's type: ``F`` marks a
float32 rounding, ``D`` a double value, so that numpy rounds exactly where C
does.  Squares written ``pow(x, 2)`` in C are exact products here (glibc's
``pow(x, 2)`` returns the correctly rounded ``x * x``, which for a float ``x``
is exact in double).

The transcendental calls go to numpy's float64 functions, which differ from
glibc's (what libvmaf calls) in the last bit or two of a double in a few
percent of calls.  Every such result is rounded to float before it reaches
the sum, so a difference can only show where that double lies next to a
float rounding midpoint.  Each such rounding is therefore checked: a pixel
whose double lies within ``DOUBT`` float ulps of a midpoint (or of a branch
threshold) is recomputed with the C library itself; about one pixel in 10,000.
:func:`ciede2000_scalar` is that computation transcribed line by line for one
pixel (the reference); :func:`ciede2000_libm` does it for many pixels at once
(the same C calls element by element, the arithmetic between them in numpy).
The result is glibc's float for every pixel, as long as numpy's error stays
far below ``DOUBT`` (it is a few double ulps; ``DOUBT`` is about 5,000).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

__all__ = ["lab_from_yuv", "ciede2000", "chroma_to_444_indices", "ciede2000_libm"]

F = np.float32
D = np.float64

_PI = math.pi
_TWO_PI = 2.0 * math.pi
#: 25^7 as libvmaf's double pow gives it (exact) and as powf gives it (rounded to float)
_P25_7 = 6103515625.0
_P25_7F = F(6103515625.0)
#: kL as the C's float 0.65
_KL = float(F(0.65))


@functools.lru_cache(maxsize=1)
def _libm_powf():
    """The C library's ``powf``: glibc's is not correctly rounded (about one
    result in a thousand differs from the float nearest the true power), so
    it cannot be derived from a double ``pow`` and is called itself."""
    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    fn = lib.powf
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float, ctypes.c_float]
    return fn


#: how close (in float ulps) to a rounding midpoint a double power must be for
#: glibc's powf to possibly round the other way; measured differences stay
#: within 0.0018 ulp of the midpoint, so 0.01 leaves a wide margin
_POWF_DOUBT = 0.01


def powf7(x: np.ndarray) -> np.ndarray:
    """``powf(x, 7)`` per element, as the C library's powf gives it.

    The correctly rounded float of the double ``pow`` is glibc's answer
    except near a rounding midpoint; the few values there (about 2 %) are
    passed to the C library's powf itself.
    """
    d = np.power(x.astype(D), 7.0)
    out = d.astype(F)
    below = np.where(out.astype(D) <= d, out, np.nextafter(out, F(-np.inf)))
    above = np.nextafter(below, F(np.inf))
    lo, hi = below.astype(D), above.astype(D)
    with np.errstate(invalid="ignore"):
        doubt = np.abs(d - (lo + hi) * 0.5) < _POWF_DOUBT * (hi - lo)
    if doubt.any():
        fn = _libm_powf()
        values, inverse = np.unique(x[doubt], return_inverse=True)
        exact = np.fromiter((fn(v, 7.0) for v in values.tolist()), F, count=values.size)
        out[doubt] = exact[inverse]
    return out


def chroma_to_444_indices(subsampling_hv: tuple[int, int], width: int, height: int,
                          chroma_width: int, chroma_height: int) -> tuple[np.ndarray, int]:
    """Flat indices that reproduce libvmaf's ``scale_chroma_planes`` (ciede.c).

    libvmaf upsamples chroma to the luma size by repeating samples, reading a
    ``VmafPicture`` whose chroma rows are ``stride = align32(chroma_width)``
    samples apart, U plane directly followed by V.  Output row ``i`` reads
    input row ``i // 2`` for both 4:2:0 and 4:2:2, and output column ``j``
    reads column ``j // 2`` for 4:2:0 but column ``j`` for 4:2:2 (so 4:2:2
    reads past the row end into the padding and the next row, and odd sizes
    read one row past the plane).  Returned: indices into a flat buffer laid
    out as libvmaf's (U rows, V rows, then zeros) for the U plane; add
    ``stride * chroma_height`` for V.  Also the buffer length needed.
    """
    stride = (chroma_width + 31) & ~31
    rows = np.arange(height)[:, None] // 2
    cols = np.arange(width)[None, :]
    if subsampling_hv == (1, 1):  # 4:2:0: both halved
        cols = cols // 2
    idx = rows * stride + cols
    plane = stride * chroma_height
    # after V comes the end of libvmaf's allocation; those reads see zeros
    # (the picture is memset to 0 and its mmap slack is zero-filled)
    length = max(2 * plane, int(idx.max()) + plane + 1)
    return idx, length


#: how close (in float ulps) to a float rounding midpoint a double computed
#: with numpy's transcendental functions may lie before the pixel is redone
#: with the C library's (numpy's errors are a few double ulps, 2e-9 float ulps)
DOUBT = 1e-5
#: the same for a branch threshold, relative
_DOUBT_BRANCH = 1e-12


def _round(d: np.ndarray, doubt: np.ndarray | None) -> np.ndarray:
    """``(float) d``, marking in ``doubt`` the elements next to a rounding midpoint."""
    out = d.astype(F)
    if doubt is not None:
        below = np.where(out.astype(D) <= d, out, np.nextafter(out, F(-np.inf)))
        above = np.nextafter(below, F(np.inf))
        lo, hi = below.astype(D), above.astype(D)
        with np.errstate(invalid="ignore"):
            doubt |= np.abs(d - (lo + hi) * 0.5) < DOUBT * (hi - lo)
    return out


def _lab_map(c: np.ndarray, doubt: np.ndarray | None = None) -> np.ndarray:
    """``xyz_to_lab_map``: cube root above epsilon, the linear segment below; returns float."""
    eps = 216.0 / 24389.0
    kappa = 24389.0 / 27.0
    d = np.empty(c.shape, D)
    hi = c > eps
    d[hi] = np.power(c[hi], 1.0 / 3.0)
    lo = ~hi
    d[lo] = (kappa * c[lo] + 16.0) * (1.0 / 116.0)
    if doubt is not None:
        doubt |= np.abs(c - eps) < _DOUBT_BRANCH * eps
    return _round(d, doubt)


def _rgb_map(c: np.ndarray) -> np.ndarray:
    """``rgb_to_xyz_map``: sRGB gamma expansion in double (pow 2.4 above 10/255)."""
    out = c * (1.0 / 12.92)
    hi = c > 10.0 / 255.0
    out[hi] = np.power((c[hi] + 0.055) * (1.0 / 1.055), 2.4)
    return out


def _xyz_from_yuv(y, u, v, bitdepth: int, rgb_map):
    """Limited-range BT.709 samples (doubles, arrays or scalars) -> sRGB through ``rgb_map``
    -> XYZ (D65): the part of ``get_lab_color`` both forms share, the same double
    operations in the same order either way."""
    scale = float(1 << (bitdepth - 8))
    y = (y - 16.0 * scale) * (1.0 / (219.0 * scale))
    u = (u - 128.0 * scale) * (1.0 / (224.0 * scale))
    v = (v - 128.0 * scale) * (1.0 / (224.0 * scale))
    r = rgb_map(y + 1.28033 * v)
    g = rgb_map(y - 0.21482 * u - 0.38059 * v)
    b = rgb_map(y + 2.12798 * u)
    x = r * 0.4124564390896921 + g * 0.357576077643909 + b * 0.18043748326639894
    yy = r * 0.21267285140562248 + g * 0.715152155287818 + b * 0.07217499330655958
    z = r * 0.019333895582329317 + g * 0.119192025881303 + b * 0.9503040785363677
    return x, yy, z


def lab_from_yuv(y: np.ndarray, u: np.ndarray, v: np.ndarray, bitdepth: int,
                 doubt: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """libvmaf's ``get_lab_color`` on whole planes: limited-range BT.709 -> sRGB
    -> XYZ (D65) -> Lab; returns float32 L, a, b.  ``doubt`` (bool, the planes'
    shape) collects the pixels to redo with the C library (see the module doc)."""
    x, yy, z = _xyz_from_yuv(y.astype(D), u.astype(D), v.astype(D), bitdepth, _rgb_map)
    fx = _lab_map(x * (1.0 / 0.95047), doubt).astype(D)
    fy = _lab_map(yy, doubt).astype(D)
    fz = _lab_map(z * (1.0 / 1.08883), doubt).astype(D)
    return ((116.0 * fy - 16.0).astype(F), (500.0 * (fx - fy)).astype(F), (200.0 * (fy - fz)).astype(F))


def _h_prime(x: np.ndarray, y: np.ndarray, doubt: np.ndarray | None = None) -> np.ndarray:
    """``get_h_prime(x, y)``: atan2 in [0, 2 pi) as float, 0 when both are 0."""
    hue = _round(np.arctan2(x.astype(D), y.astype(D)), doubt)
    neg = hue < 0.0
    hue[neg] = (hue[neg].astype(D) + _TWO_PI).astype(F)
    hue[(x == 0.0) & (y == 0.0)] = 0.0
    return hue


def _delta_h_prime(c1, c2, h1, h2):
    """``get_delta_h_prime``: float, wrapped into (-pi, pi]; 0 when either chroma is 0."""
    diff = h2 - h1  # float
    up = (diff.astype(D) + _TWO_PI).astype(F)
    down = (diff.astype(D) - _TWO_PI).astype(F)
    out = np.where(np.abs(h1 - h2).astype(D) <= _PI, diff, np.where(h2 <= h1, up, down))
    out[(c1 == 0.0) | (c2 == 0.0)] = 0.0
    return out


def ciede2000(l1, a1, b1, l2, a2, b2, doubt: np.ndarray | None = None) -> np.ndarray:
    """libvmaf's ``ciede2000`` with kL = 0.65, kC = 1, kH = 4, per pixel, float32.
    ``doubt`` as for :func:`lab_from_yuv`."""
    dl = l2 - l1
    l_bar = (l1 + l2) / F(2)
    a1d, b1d, a2d, b2d = a1.astype(D), b1.astype(D), a2.astype(D), b2.astype(D)
    c1 = np.sqrt(a1d * a1d + b1d * b1d).astype(F)
    c2 = np.sqrt(a2d * a2d + b2d * b2d).astype(F)
    c_bar = (c1 + c2) / F(2)
    cb7 = np.power(c_bar.astype(D), 7.0)
    g = 1.0 - np.sqrt(cb7 / (cb7 + _P25_7))
    ap1 = _round(a1d + (a1 / F(2)).astype(D) * g, doubt)
    ap2 = _round(a2d + (a2 / F(2)).astype(D) * g, doubt)
    ap1d, ap2d = ap1.astype(D), ap2.astype(D)
    cp1 = np.sqrt(ap1d * ap1d + b1d * b1d).astype(F)
    cp2 = np.sqrt(ap2d * ap2d + b2d * b2d).astype(F)
    cbp = (cp1 + cp2) / F(2)
    dcp = cp2 - cp1
    lb = (l_bar - F(50)).astype(D)
    lb2 = lb * lb
    s_l = (1.0 + (0.015 * lb2) / np.sqrt(20.0 + lb2)).astype(F)
    cbpd = cbp.astype(D)
    s_c = (1.0 + 0.045 * cbpd).astype(F)
    h1 = _h_prime(b1, ap1, doubt)
    h2 = _h_prime(b2, ap2, doubt)
    dhp = _delta_h_prime(c1, c2, h1, h2)
    d_big_h = _round(2.0 * np.sqrt((cp1 * cp2).astype(D)) * np.sin(dhp.astype(D) / 2.0), doubt)
    hsum = (h1 + h2).astype(D)
    h_bar = np.where(np.abs((h1 - h2).astype(D)) > _PI, (hsum + _TWO_PI) / 2.0, hsum / 2.0).astype(F)
    hb = h_bar.astype(D)
    t = _round(1.0
               - 0.17 * np.cos(hb - _PI / 6.0)
               + 0.24 * np.cos(2.0 * hb)
               + 0.32 * np.cos(3.0 * hb + _PI / 30.0)
               - 0.20 * np.cos(4.0 * hb - 7.0 * _PI / 20.0), doubt)
    s_h = (1.0 + 0.015 * cbpd * t.astype(D)).astype(F)
    # get_r_sub_t: radians_to_degrees and degrees_to_radians return float
    deg = (hb * (180.0 / _PI)).astype(F)
    deg = ((deg.astype(D) - 275.0) * (1.0 / 25.0)).astype(F)
    p7 = powf7(cbp)  # powf(c_bar_prime, 7)
    ratio = p7 / (p7 + _P25_7F)
    deg2 = (deg.astype(D) * deg.astype(D)).astype(F)  # powf(degrees, 2)
    e60 = _round(60.0 * np.exp((-deg2).astype(D)), doubt)
    rad = (e60.astype(D) * (_PI / 180.0)).astype(F)
    r_t = _round(-2.0 * np.sqrt(ratio.astype(D)) * np.sin(rad.astype(D)), doubt)
    light = dl / (F(0.65) * s_l)
    chroma = dcp / (F(1.0) * s_c)
    hue = d_big_h / (F(4.0) * s_h)
    ld, cd, hd = light.astype(D), chroma.astype(D), hue.astype(D)
    return np.sqrt(ld * ld + cd * cd + hd * hd + (r_t * chroma * hue).astype(D)).astype(F)


# ---------------------------------------------------------------------------
# one pixel with the C library's functions (the exact path for rare pixels)
# ---------------------------------------------------------------------------


def _f(x: float) -> float:
    """Round a double to float, as a C assignment to ``float`` does."""
    return float(F(x))


def _lab_map_scalar(c: float) -> float:
    if c > 216.0 / 24389.0:
        return _f(math.pow(c, 1.0 / 3.0))
    return _f((24389.0 / 27.0 * c + 16.0) * (1.0 / 116.0))


def _rgb_map_scalar(c: float) -> float:
    if c > 10.0 / 255.0:
        return math.pow((c + 0.055) * (1.0 / 1.055), 2.4)
    return c * (1.0 / 12.92)


def lab_scalar(y: float, u: float, v: float, bitdepth: int) -> tuple[float, float, float]:
    """``get_lab_color`` for one pixel with the C library's ``pow``."""
    x, yy, z = _xyz_from_yuv(y, u, v, bitdepth, _rgb_map_scalar)
    fx = _lab_map_scalar(x * (1.0 / 0.95047))
    fy = _lab_map_scalar(yy)
    fz = _lab_map_scalar(z * (1.0 / 1.08883))
    return _f(116.0 * fy - 16.0), _f(500.0 * (fx - fy)), _f(200.0 * (fy - fz))


def _h_prime_scalar(x: float, y: float) -> float:
    if x == 0.0 and y == 0.0:
        return 0.0
    hue = _f(math.atan2(x, y))
    if hue < 0.0:
        hue = _f(hue + _TWO_PI)
    return hue


def ciede2000_scalar(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """``ciede2000`` for one pixel pair with the C library's functions, float result.

    Every float operation of the C is a double operation here followed by a
    rounding to float; for one operation on two floats that is exact (the
    double result of +, -, *, / on floats rounds to the correctly rounded float).
    """
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    dl = _f(l2 - l1)
    l_bar = _f(_f(l1 + l2) / 2.0)
    c1 = _f(math.sqrt(a1 * a1 + b1 * b1))
    c2 = _f(math.sqrt(a2 * a2 + b2 * b2))
    c_bar = _f(_f(c1 + c2) / 2.0)
    cb7 = math.pow(c_bar, 7.0)
    g = 1.0 - math.sqrt(cb7 / (cb7 + _P25_7))
    ap1 = _f(a1 + _f(a1 / 2.0) * g)
    ap2 = _f(a2 + _f(a2 / 2.0) * g)
    cp1 = _f(math.sqrt(ap1 * ap1 + b1 * b1))
    cp2 = _f(math.sqrt(ap2 * ap2 + b2 * b2))
    cbp = _f(_f(cp1 + cp2) / 2.0)
    dcp = _f(cp2 - cp1)
    lb = _f(l_bar - 50.0)
    s_l = _f(1.0 + (0.015 * (lb * lb)) / math.sqrt(20.0 + lb * lb))
    s_c = _f(1.0 + 0.045 * cbp)
    h1 = _h_prime_scalar(b1, ap1)
    h2 = _h_prime_scalar(b2, ap2)
    if c1 == 0.0 or c2 == 0.0:
        dhp = 0.0
    elif abs(_f(h1 - h2)) <= _PI:
        dhp = _f(h2 - h1)
    elif h2 <= h1:
        dhp = _f(_f(h2 - h1) + _TWO_PI)
    else:
        dhp = _f(_f(h2 - h1) - _TWO_PI)
    d_big_h = _f(2.0 * math.sqrt(_f(cp1 * cp2)) * math.sin(dhp / 2.0))
    hsum = _f(h1 + h2)
    h_bar = _f((hsum + _TWO_PI) / 2.0 if abs(_f(h1 - h2)) > _PI else hsum / 2.0)
    t = _f(1.0
           - 0.17 * math.cos(h_bar - _PI / 6.0)
           + 0.24 * math.cos(2.0 * h_bar)
           + 0.32 * math.cos(3.0 * h_bar + _PI / 30.0)
           - 0.20 * math.cos(4.0 * h_bar - 7.0 * _PI / 20.0))
    s_h = _f(1.0 + 0.015 * cbp * t)
    deg = _f((_f(h_bar * (180.0 / _PI)) - 275.0) * (1.0 / 25.0))
    p7 = float(_libm_powf()(cbp, 7.0))
    ratio = _f(p7 / _f(p7 + float(_P25_7F)))
    deg2 = _f(deg * deg)
    rad = _f(_f(60.0 * math.exp(-deg2)) * (_PI / 180.0))
    r_t = _f(-2.0 * math.sqrt(ratio) * math.sin(rad))
    light = _f(dl / _f(_KL * s_l))
    chroma = _f(dcp / s_c)
    hue = _f(d_big_h / _f(4.0 * s_h))
    return _f(math.sqrt(light * light + chroma * chroma + hue * hue + _f(_f(r_t * chroma) * hue)))


# ---------------------------------------------------------------------------
# many pixels with the C library's functions (the exact path for a batch of rare pixels)
# ---------------------------------------------------------------------------


def _libm(fn, *args: np.ndarray) -> np.ndarray:
    """``fn`` (a ``math`` function: the C library's) on every element, as a double array."""
    n = args[0].size
    return np.fromiter(map(fn, *(a.tolist() for a in args)), D, count=n)


def _fa(x: np.ndarray) -> np.ndarray:
    """:func:`_f` on an array: round to float, kept as double."""
    return x.astype(F).astype(D)


def _rgb_map_libm(c: np.ndarray) -> np.ndarray:
    out = c * (1.0 / 12.92)
    hi = c > 10.0 / 255.0
    out[hi] = _libm(math.pow, (c[hi] + 0.055) * (1.0 / 1.055), np.full(int(hi.sum()), 2.4))
    return out


def _lab_map_libm(c: np.ndarray) -> np.ndarray:
    hi = c > 216.0 / 24389.0
    out = (24389.0 / 27.0 * c + 16.0) * (1.0 / 116.0)
    out[hi] = _libm(math.pow, c[hi], np.full(int(hi.sum()), 1.0 / 3.0))
    return _fa(out)


def _lab_libm(y, u, v, bitdepth: int):
    x, yy, z = _xyz_from_yuv(y, u, v, bitdepth, _rgb_map_libm)
    fx = _lab_map_libm(x * (1.0 / 0.95047))
    fy = _lab_map_libm(yy)
    fz = _lab_map_libm(z * (1.0 / 1.08883))
    return _fa(116.0 * fy - 16.0), _fa(500.0 * (fx - fy)), _fa(200.0 * (fy - fz))


def _h_prime_libm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    hue = _fa(_libm(math.atan2, x, y))
    neg = hue < 0.0
    hue[neg] = _fa(hue[neg] + _TWO_PI)
    hue[(x == 0.0) & (y == 0.0)] = 0.0
    return hue


def ciede2000_libm(samples: np.ndarray, bitdepth: int) -> np.ndarray:
    """:func:`ciede2000_scalar` of :func:`lab_scalar` for many pixels at once, float32.

    ``samples`` (n, 6): reference y, u, v and distorted y, u, v per pixel (the
    upsampled chroma it used).  The same C-library calls on the same doubles
    as the scalar transcription, element by element (``math``'s functions
    mapped over the values), with the float and double arithmetic in between
    done by numpy on whole arrays in the scalar's order: IEEE +, -, *, /
    and sqrt round alike in both, so every element equals the scalar's
    result, with no rounding left in doubt, at a fraction of its cost (the
    scalar spends most of its time interpreting the arithmetic).  For the
    doubtful pixels of many frames at once (the GPU twin's host step).

    Each distinct row is computed once: doubtful pixels come in runs of the
    same colours (flat areas; a colour whose conversion lies near a rounding
    midpoint is doubtful wherever it occurs), five or more rows per distinct
    one on real frames.  A handful of distinct rows goes through the scalar
    transcription itself (cheaper than numpy's fixed cost at that size).
    """
    s = np.asarray(samples, D).reshape(-1, 6)
    distinct, inverse = s, None
    if s.shape[0] > 1:
        if bitdepth * 6 <= 63:  # the six samples packed into one integer key
            key = np.zeros(s.shape[0], np.int64)
            for k in range(6):
                key |= s[:, k].astype(np.int64) << (bitdepth * k)
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            distinct = s[first]
        else:
            distinct, inverse = np.unique(s, axis=0, return_inverse=True)
    if distinct.shape[0] < _ROWS_FOR_NUMPY:
        out = np.array([ciede2000_scalar(lab_scalar(*r[:3], bitdepth), lab_scalar(*r[3:], bitdepth))
                        for r in distinct.tolist()], F).reshape(-1)
    else:
        out = _ciede2000_libm_rows(distinct, bitdepth)
    return out if inverse is None else out[inverse.ravel()]


#: below this many distinct rows the scalar transcription is faster (numpy's
#: fixed cost, about 250 array operations, is some 14 scalar pixels' worth)
_ROWS_FOR_NUMPY = 12


def _ciede2000_libm_rows(s: np.ndarray, bitdepth: int) -> np.ndarray:
    l1, a1, b1 = _lab_libm(s[:, 0], s[:, 1], s[:, 2], bitdepth)
    l2, a2, b2 = _lab_libm(s[:, 3], s[:, 4], s[:, 5], bitdepth)
    dl = _fa(l2 - l1)
    l_bar = _fa(_fa(l1 + l2) / 2.0)
    c1 = _fa(np.sqrt(a1 * a1 + b1 * b1))
    c2 = _fa(np.sqrt(a2 * a2 + b2 * b2))
    c_bar = _fa(_fa(c1 + c2) / 2.0)
    cb7 = _libm(math.pow, c_bar, np.full(c_bar.size, 7.0))
    g = 1.0 - np.sqrt(cb7 / (cb7 + _P25_7))
    ap1 = _fa(a1 + _fa(a1 / 2.0) * g)
    ap2 = _fa(a2 + _fa(a2 / 2.0) * g)
    cp1 = _fa(np.sqrt(ap1 * ap1 + b1 * b1))
    cp2 = _fa(np.sqrt(ap2 * ap2 + b2 * b2))
    cbp = _fa(_fa(cp1 + cp2) / 2.0)
    dcp = _fa(cp2 - cp1)
    lb = _fa(l_bar - 50.0)
    s_l = _fa(1.0 + (0.015 * (lb * lb)) / np.sqrt(20.0 + lb * lb))
    s_c = _fa(1.0 + 0.045 * cbp)
    h1 = _h_prime_libm(b1, ap1)
    h2 = _h_prime_libm(b2, ap2)
    diff = _fa(h2 - h1)
    wide = np.abs(_fa(h1 - h2)) > _PI
    dhp = np.where(~wide, diff, np.where(h2 <= h1, _fa(diff + _TWO_PI), _fa(diff - _TWO_PI)))
    dhp[(c1 == 0.0) | (c2 == 0.0)] = 0.0
    d_big_h = _fa(2.0 * np.sqrt(_fa(cp1 * cp2)) * _libm(math.sin, dhp / 2.0))
    hsum = _fa(h1 + h2)
    h_bar = _fa(np.where(wide, (hsum + _TWO_PI) / 2.0, hsum / 2.0))
    t = _fa(1.0
            - 0.17 * _libm(math.cos, h_bar - _PI / 6.0)
            + 0.24 * _libm(math.cos, 2.0 * h_bar)
            + 0.32 * _libm(math.cos, 3.0 * h_bar + _PI / 30.0)
            - 0.20 * _libm(math.cos, 4.0 * h_bar - 7.0 * _PI / 20.0))
    s_h = _fa(1.0 + 0.015 * cbp * t)
    deg = _fa((_fa(h_bar * (180.0 / _PI)) - 275.0) * (1.0 / 25.0))
    p7 = powf7(cbp.astype(F)).astype(D)  # powf(c_bar_prime, 7), the C library's
    ratio = _fa(p7 / _fa(p7 + float(_P25_7F)))
    deg2 = _fa(deg * deg)
    rad = _fa(_fa(60.0 * _libm(math.exp, -deg2)) * (_PI / 180.0))
    r_t = _fa(-2.0 * np.sqrt(ratio) * _libm(math.sin, rad))
    light = _fa(dl / _fa(_KL * s_l))
    chroma = _fa(dcp / s_c)
    hue = _fa(d_big_h / _fa(4.0 * s_h))
    return np.sqrt(light * light + chroma * chroma + hue * hue + _fa(_fa(r_t * chroma) * hue)).astype(F)
