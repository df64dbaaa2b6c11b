"""libvmaf's fixed-point Daubechies-2 DWT for integer ADM, vectorised.

One level turns an ``h x w`` plane into four ``ceil(h/2) x ceil(w/2)`` bands:
``a`` (low-low), ``v`` (low vertical, high horizontal), ``h`` (high vertical,
low horizontal) and ``d`` (high-high).  Output sample ``i`` of a pass reads
input samples ``2i-1 .. 2i+2``.  libvmaf's edge rules are asymmetric:

* before the start, sample ``-1`` is sample ``1`` (whole-sample mirror);
* past the end, sample ``n`` is ``n-1`` and ``n+1`` is ``n-2`` (half-sample
  mirror), i.e. ``2n - e - 1``.

Both passes run in strips of output rows (:func:`_level`), so that their
temporaries stay in cache.  The vertical pass gathers a strip's rows in tap
order (:func:`tap_map`) and sums the four taps of every output through a
strided view with ``einsum`` (one pass over memory).  The horizontal pass splits the columns by parity so that
its four taps become contiguous slices (``einsum`` is slow when the taps are
the innermost stride).

Rounding: each pass adds half of its divisor and shifts right arithmetically
(numpy's ``>>`` on signed integers is arithmetic, like gcc's).  Sums are
int32 at scale 0 (wrapping like C's at 16 bits per sample) and int64 at
scales 1-3; scale 0 stores its bands as int16, scales 1-3 as int32, and an
``astype`` reproduces C's wrap-around on those stores bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["tap_map", "dwt_scale0", "dwt_s123"]

LO = (15826, 27411, 7345, -4240)
HI = (-4240, -7345, 27411, -15826)
LO_SUM = 46342  # sum of LO; HI sums to 0

# Per scale 1, 2, 3: (add, shift) of the vertical and of the horizontal pass.
_S123_VERTICAL = ((0, 0), (32768, 16), (32768, 16))
_S123_HORIZONTAL = ((16384, 15), (32768, 16), (16384, 15))


@functools.lru_cache(maxsize=64)
def tap_map(n: int) -> np.ndarray:
    """Source index of taps ``-1 .. 2*ceil(n/2)`` of a pass over ``n`` samples."""
    half = (n + 1) // 2
    e = np.arange(-1, 2 * half + 1)
    e = np.where(e < 0, -e, e)
    e = np.where(e >= n, 2 * n - e - 1, e).astype(np.intp)
    e.flags.writeable = False
    return e


def _vertical(rows: np.ndarray, coeffs, dtype) -> np.ndarray:
    """Sum of the four vertical taps of every output row: ``(n, 2 m + 2, w) -> (n, m, w)``,
    from rows already gathered in tap order (output ``i`` reads rows ``2i .. 2i + 3``).

    ``einsum`` reads the taps as a strided view: one pass over memory instead of seven.
    """
    n, r, w = rows.shape
    half = (r - 2) // 2
    si, sr, sc = rows.strides
    taps = as_strided(rows, shape=(4, n, half, w), strides=(sr, si, 2 * sr, sc), writeable=False)
    return np.einsum("k,knij->nij", np.asarray(coeffs, dtype=dtype), taps)


def _deinterleave(tmp: np.ndarray, dtype) -> np.ndarray:
    """Horizontal taps split by parity: ``(2, n, h, ceil(w/2) + 1)``, [0] odd taps, [1] even taps.

    Entry ``m`` of [0] is tap ``2m-1`` and of [1] tap ``2m``, edges mirrored
    as :func:`tap_map` says; so output ``j`` reads [0][j], [1][j], [0][j+1],
    [1][j+1], all contiguous.
    """
    n, h, w = tmp.shape
    half = (w + 1) // 2
    tm = tap_map(w)
    out = np.empty((2, n, h, half + 1), dtype=dtype)
    out[0, :, :, 1 : w // 2 + 1] = tmp[:, :, 1:w:2]
    out[1, :, :, :half] = tmp[:, :, 0:w:2]
    for m in [0] + list(range(w // 2 + 1, half + 1)):
        out[0, :, :, m] = tmp[:, :, tm[2 * m]]
    out[1, :, :, half] = tmp[:, :, tm[2 * half + 1]]
    return out


def _horizontal(parts: np.ndarray, coeffs, dtype) -> np.ndarray:
    """Sum of the four horizontal taps of every output column, from :func:`_deinterleave`'s parts.

    (A plain multiply-add over contiguous slices: ``einsum`` would iterate
    over the 4 taps innermost here, which is slow.)
    """
    c = [dtype(x) for x in coeffs]
    acc = parts[0, :, :, :-1] * c[0]
    tmp = np.empty_like(acc)
    for k, sl in ((1, np.s_[1, :, :, :-1]), (2, np.s_[0, :, :, 1:]), (3, np.s_[1, :, :, 1:])):
        np.multiply(parts[sl], c[k], out=tmp)
        acc += tmp
    return acc


#: samples (per picture) of the input rows of one strip: a strip's temporaries
#: stay in cache, where passes over the whole band would stream through memory
_STRIP_SAMPLES = 1 << 16


def _level(planes: np.ndarray, passes, vertical, horizontal, out_dtype) -> dict:
    """One DWT level of stacked planes ``(n, h, w)``, in strips of output rows.

    ``passes``: (low band name, high band name, vertical taps) for each vertical
    filter, a name None to skip its band; ``vertical(acc)`` rounds a vertical
    sum and returns the array the horizontal pass reads, ``horizontal(acc)``
    rounds a horizontal sum in place.  The bands are stored in ``out_dtype``
    (numpy's assignment casts like C's store: it wraps).
    """
    n, h, w = planes.shape
    half_h, half_w = (h + 1) // 2, (w + 1) // 2
    tm = tap_map(h)
    bands = {name: np.empty((n, half_h, half_w), out_dtype)
             for lo, hi, _ in passes for name in (lo, hi) if name is not None}
    step = max(1, _STRIP_SAMPLES // (2 * w))
    for r0 in range(0, half_h, step):
        r1 = min(half_h, r0 + step)
        # the input rows of output rows r0 .. r1 - 1, in tap order (edges mirrored)
        rows = np.take(planes, tm[2 * r0:2 * r1 + 2], axis=1)
        for name_lo, name_hi, vcoeffs in passes:
            acc, hdtype = vertical(rows, vcoeffs)
            parts = _deinterleave(acc, hdtype)
            for name, hc in ((name_lo, LO), (name_hi, HI)):
                if name is None:
                    continue
                b = _horizontal(parts, hc, hdtype)
                horizontal(b)
                bands[name][:, r0:r1] = b
    return bands


def dwt_scale0(planes: np.ndarray, bitdepth: int, lo_only: bool = False):
    """Scale-0 DWT of stacked planes ``(n, h, w)`` (uint8/uint16) -> dict of int16 bands.

    The vertical pass recentres the samples around zero (it subtracts
    ``LO_SUM * 2^(bpc-1)`` from the low-pass sum) and divides by ``2^bpc``;
    the horizontal pass divides by ``2^16``.  All sums are int32, as in C.
    """
    add = 1 << (bitdepth - 1)
    consts = {LO: np.int32(add - LO_SUM * add), HI: np.int32(add)}

    def vertical(rows, coeffs):
        acc = _vertical(rows, coeffs, np.int32)
        acc += consts[coeffs]
        acc >>= bitdepth
        # C stores this as int16, which changes nothing: both recentred sums
        # lie within +-27411 * 2^bpc (and at 16 bits any int32 >> 16 fits), so
        # the store is skipped.
        return acc, np.int32

    def horizontal(b):
        b += np.int32(32768)
        b >>= 16

    passes = [("a", None if lo_only else "v", LO)]
    if not lo_only:
        passes.append(("h", "d", HI))
    return _level(planes, passes, vertical, horizontal, np.int16)


def dwt_s123(band_a: np.ndarray, scale: int):
    """DWT of scale 1, 2 or 3 on stacked int32 approximation bands ``(n, h, w)``.

    Sums are 64-bit; each pass's result is stored as int32.
    """
    v_add, v_shift = _S123_VERTICAL[scale - 1]
    h_add, h_shift = _S123_HORIZONTAL[scale - 1]

    def vertical(rows, coeffs):
        acc = _vertical(rows, coeffs, np.int64)
        if v_add:
            acc += v_add
        acc >>= v_shift
        # stored as int32 (wrapping), then widened again for the horizontal sums
        return acc.astype(np.int32), np.int64

    def horizontal(b):
        b += h_add
        b >>= h_shift

    return _level(band_a, (("a", "v", LO), ("h", "d", HI)), vertical, horizontal, np.int32)
