"""Per-pixel stages of integer ADM after the DWT: decouple, CSF, contrast masking.

Scale 0 works on int16 bands ("narrow"), scales 1-3 on int32 bands
("wide"), with different fixed-point formats; both are handled here with a
``wide`` flag.  Every function mirrors one libvmaf stage bit for bit,
including its integer wrap-arounds (reproduced by ``astype`` to the C storage
type) and its rounding constants, quirks included.

Two code paths.  libvmaf's plain C and its AVX-512 routines (what the
reference numbers were made with, on an AVX-512 host) agree almost
everywhere, but not quite: the AVX-512 routines treat blocks of 16 (decouple,
CSF) or 14 (scale-0 masking) columns with vector code and the leftover
columns at the right with the C code, and the vector code differs from C in a
few operations (listed where they are emulated, each marked "AVX-512").  So
each stage takes an optional boolean *vector mask* telling which pixels the
vector code handled; ``None`` means plain C everywhere.

The stages only ever need the pixels of the *scoring region* (libvmaf's 10 %
border excluded) plus a one-pixel ring for the 3x3 masking neighbourhood, so
decouple and CSF run on that sub-rectangle only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Region", "region", "decouple", "csf", "masked_sum", "den_sum"]

# cos(1 degree)^2, computed in double and stored in a float (then used as a double).
COS_1DEG_SQ = float(np.float32(math.cos(1.0 * math.pi / 180.0) * math.cos(1.0 * math.pi / 180.0)))

# Q30 reciprocals 2^30 // i (index 0 unused), libvmaf's division table.
_RECIP = np.zeros(32769, dtype=np.int64)
_RECIP[1:] = (1 << 30) // np.arange(1, 32769, dtype=np.int64)
# Signed table indexed by value + 32768, for int16 numerators.
_SIGNED_RECIP = np.concatenate((-_RECIP[::-1], _RECIP[1:]))


@dataclass(frozen=True)
class Region:
    """A band's scoring region ``[top, bottom) x [left, right)`` and the ring around it."""

    w: int
    h: int
    top: int
    bottom: int
    left: int
    right: int

    @property
    def ring(self) -> tuple[slice, slice]:
        """Rows and columns of the region grown by one pixel, clipped to the band."""
        return (
            slice(max(self.top - 1, 0), min(self.bottom + 1, self.h)),
            slice(max(self.left - 1, 0), min(self.right + 1, self.w)),
        )

    @property
    def area(self) -> int:
        return (self.bottom - self.top) * (self.right - self.left)


def region(w: int, h: int) -> Region:
    # C truncates toward zero when it stores ``n * 0.1 - 0.5`` in an int.
    left = int(w * 0.1 - 0.5)
    top = int(h * 0.1 - 0.5)
    return Region(w, h, top, h - top, left, w - left)


def _low32(x):
    """The low 32 bits of int64 values, as signed int64 (what ``_mm512_mul_epi32`` reads)."""
    return x.astype(np.int32).astype(np.int64)


def _select(mask, vec, c):
    return c if mask is None else np.where(mask, vec, c)


# numpy's ``where`` (and masked ``copyto``/``out=..., where=``) branches per
# element: on data-dependent masks it runs at a few ns a sample, several times
# the cost of a plain arithmetic pass.  These two select by arithmetic instead.


def _pick(cond, a, b):
    """``np.where(cond, a, b)`` for integer arrays: ``b + (a - b) * cond``, exact
    because integer arithmetic is modular (a wrapped ``a - b`` comes back)."""
    x = np.subtract(a, b)
    x *= cond
    x += b
    return x


def _pick_bool(cond, a, b):
    """``np.where(cond, a, b)`` for boolean arrays, as bit operations."""
    return (a & cond) | (b & ~cond)


# --- decouple ------------------------------------------------------------------------


def _as_float_then_double(x: np.ndarray) -> np.ndarray:
    """``(double)(float)x``: the one rounding C makes storing the sum in a float."""
    return x.astype(np.float32).astype(np.float64)


def _angle_flag(oh, ov, th, tv, wide: bool, vec):
    """Whether (oh, ov) and (th, tv) are within 1 degree, libvmaf's float/double test.

    The 64-bit dot product and squared norms are rounded to float (one
    rounding, straight from the integer), divided by 4096.0 in double, then
    compared in double: (u.v) >= 0 and (u.v)^2 >= cos^2(1deg) |u|^2 |v|^2,
    the right side multiplied left to right.

    The divisions by 4096 are left out: scaling by a power of two is exact and
    commutes with every rounding of the products (no value is near the double
    range's ends: they are integers below 2^64 or zero), so each side of the
    comparison is the C side times 2^24 exactly and the outcome is the same.

    Scale 0's int16 inputs are multiplied in int32 here: a sum can only
    overflow as -2^31 for +2^31 (all inputs -32768), which C's 64-bit sums
    do not do and is undone for C pixels.  AVX-512 (scale 0 only) does sum in
    int32 and keeps the wrapped value, and it multiplies the right side as
    (|u|^2 |v|^2) cos^2, which can round differently.
    """
    dtype = np.int64 if wide else np.int32
    oh, ov, th, tv = (x.astype(dtype) for x in (oh, ov, th, tv))
    sums = []
    for a, b, c, d in ((oh, th, ov, tv), (oh, oh, ov, ov), (th, th, tv, tv)):
        x = a * b
        y = c * d
        x += y
        sums.append(x)
    ot, om, tm = (_as_float_then_double(x) for x in sums)
    if not wide:
        for x, xf in zip(sums, (ot, om, tm)):
            wrapped = x == np.iinfo(np.int32).min
            if vec is not None:
                wrapped &= ~vec
            if wrapped.any():
                xf[wrapped] = 2.0**31
    lhs = ot * ot
    if vec is not None and not wide:
        rhs_vec = om * tm
        rhs_vec *= COS_1DEG_SQ
    om *= COS_1DEG_SQ
    om *= tm
    flag = lhs >= om
    if vec is not None and not wide:
        flag = _pick_bool(vec, lhs >= rhs_vec, flag)
    flag &= ot >= 0.0
    return flag


# Q30 reciprocals split as hi * 2^15 + lo, so that products with int16 stay in int32.
_SIGNED_RECIP_HI = (_SIGNED_RECIP >> 15).astype(np.int32)
_SIGNED_RECIP_LO = (_SIGNED_RECIP & 0x7FFF).astype(np.int32)


def _gain_narrow(o, t):
    """Q15 gain k = clip(t / o, 0, 1) of scale 0, division by table lookup: int32 result.

    libvmaf computes ``(recip[o] * t + 2^14) >> 15`` in 64 bits; with
    ``recip = hi * 2^15 + lo`` that is exactly ``hi * t + ((lo * t + 2^14) >> 15)``,
    whose terms fit int32.
    """
    idx = o.astype(np.int32) + 32768
    t32 = t.astype(np.int32)
    k = np.take(_SIGNED_RECIP_LO, idx) * t32
    k += 16384
    k >>= 15
    k += np.take(_SIGNED_RECIP_HI, idx) * t32
    k = _pick(o == 0, np.int32(32768), k)
    return np.clip(k, 0, 32768, out=k)


def _gain_wide(o, t):
    """Q15 gain of scales 1-3: |o| is first rounded to 15 significant bits.

    For |o| >= 2^15 libvmaf keeps the top 15 bits (rounded) of |o| and shifts
    the product right by as many more bits; the rounding term of that shift,
    ``1 << (14 + shift)``, is a 32-bit int and turns negative at shift 17.
    """
    o64 = o.astype(np.int64)
    ab = np.abs(o64)
    t64 = t.astype(np.int64)
    big = ab >= 32768
    if big.any():
        _, bits = np.frexp(ab.astype(np.float64))  # bit length, exact below 2^53
        # ab >= 2^15 exactly when its bit length is 16 or more: shift = bits - 15
        # there and 0 elsewhere, with no per-element branch (see _pick)
        shift = np.maximum(bits - 15, 0).astype(np.int64)
        one = np.int64(1) << shift
        # (1 << shift) >> 1 is the rounding half, and 0 where shift == 0 (msb = ab)
        msb = ab + (one >> 1)
        msb >>= shift
        rnd = one << 14
        rnd -= (shift == 17) * np.int64(2**32)  # 2^31 stored in an int32: -2^31
        num = np.take(_RECIP, msb) * t64
        num *= np.sign(o64)  # the o == 0 entries are replaced below
        k = (num + rnd) >> (15 + shift)
    else:
        num = np.take(_RECIP, ab) * t64
        num *= np.sign(o64)
        num += 16384
        k = num
        k >>= 15
    k = _pick(o64 == 0, np.int64(32768), k)
    return np.clip(k, 0, 32768, out=k)


def decouple(o_bands, t_bands, wide: bool, egl: float, vec=None):
    """Split the distorted bands into restored (r) and additive (a) parts.

    ``r = clip(t/o, 0, 1) * o`` per band; where the (h, v) orientations of
    reference and distorted agree within 1 degree, an enhancement (|t| > |o|)
    is kept up to ``egl`` times ``r``: C takes MIN/MAX of the double
    ``r * egl`` with ``t`` and truncates toward zero on the store, AVX-512
    rounds ``r * egl`` to nearest-even first.  (Same thing for integral
    ``egl``.)  ``a = t - r``.
    """
    flag = _angle_flag(o_bands[0], o_bands[1], t_bands[0], t_bands[1], wide, vec)
    # Scale 0 fits int32: k <= 2^15 and |o|, |t| <= 2^15, and r * egl <= 2^15 * 100.
    work, dtype = (np.int64, np.int32) if wide else (np.int32, np.int16)
    # The three bands stacked: every step below is per pixel, so one numpy call
    # serves all three (a third of the calls, which is most of the cost on small bands).
    o = np.stack(o_bands)
    t = np.stack(t_bands)
    k = _gain_wide(o, t) if wide else _gain_narrow(o, t)
    o_w = o.astype(work)
    t_w = t.astype(work)
    rst = k * o_w
    rst += 16384
    rst >>= 15
    # The float test "rst_f > 0" is exactly k > 0 and o > 0 (no underflow possible).
    sel = k > 0
    sel &= flag
    pos = sel & (o_w > 0)
    neg = sel & (o_w < 0)
    if float(egl).is_integer():
        scaled = rst * work(int(egl))
    else:
        # For r >= 0 (pos) and r <= 0 (neg), trunc(MIN(x, t)) == MIN(trunc(x), t).
        x = rst * float(egl)
        scaled = _select(vec, np.rint(x), np.trunc(x)).astype(work)
    # rst = MIN(scaled, t) where pos, MAX(scaled, t) where neg (disjoint), by arithmetic
    lo = np.minimum(scaled, t_w)
    lo -= rst
    lo *= pos
    np.maximum(scaled, t_w, out=scaled)
    scaled -= rst
    scaled *= neg
    rst += lo
    rst += scaled
    restored = rst.astype(dtype)
    t_w -= rst
    additive = t_w.astype(dtype)
    return list(restored), list(additive)


# --- CSF -----------------------------------------------------------------------------

_NARROW_CSF_SHIFT = (15, 15, 17)
# The diagonal band rounds with 65535, not 65536: libvmaf's constant.
_NARROW_CSF_ADD = (16384, 16384, 65535)


def _as_signed32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def csf(bands, irf, wide: bool, vec=None):
    """CSF-weighted bands and their 1/30 'filtered' magnitudes (used as masking neighbours).

    Narrow: Q21/Q23 weights, results stored int16; the 1/30 magnitude is taken
    of the stored int16 in C but of the 32-bit value before the store in the
    AVX-512 code.  Wide: Q32 weights (a uint32 that AVX-512 multiplies as a
    signed int32), rounded shift by 28; the 1/30 magnitude is
    ``(c * |x| + (int32)(1u << 31)) >> 32`` where the rounding constant,
    stored in an int32, is -2^31: zero maps to -1.
    """
    out, flt = [], []
    for theta, (b, rf) in enumerate(zip(bands, irf)):
        if wide:
            b64 = b.astype(np.int64)
            d = ((b64 * rf + (1 << 27)) >> 28).astype(np.int32)
            rf_vec = _as_signed32(rf)
            if vec is not None and rf_vec != rf:
                d = np.where(vec, ((b64 * rf_vec + (1 << 27)) >> 28).astype(np.int32), d)
            f = ((np.abs(d).astype(np.int64) * 143165577 - 2**31) >> 32).astype(np.int32)
        else:
            d32 = (b.astype(np.int32) * np.int32(rf) + np.int32(_NARROW_CSF_ADD[theta])) >> _NARROW_CSF_SHIFT[theta]
            d = d32.astype(np.int16)
            f = ((np.abs(d.astype(np.int32)) * 4369 + 2048) >> 12).astype(np.int16)
            if vec is not None:
                differs = (d32 != d) & vec
                if differs.any():
                    f = np.where(differs, ((np.abs(d32) * 4369 + 2048) >> 12).astype(np.int16), f)
        out.append(d)
        flt.append(f)
    return out, flt


# --- contrast masking ------------------------------------------------------------------


def _neighbours(lo: int, hi: int, n: int, base: int):
    """Index objects (previous, same, next) for positions lo..hi-1 of a ring starting at ``base``.

    Before the start libvmaf mirrors (-1 -> 1); past the end it repeats the
    last sample (n -> n-1).
    """
    if lo >= 1 and hi <= n - 1:
        return (slice(lo - 1 - base, hi - 1 - base), slice(lo - base, hi - base), slice(lo + 1 - base, hi + 1 - base))
    i = np.arange(lo, hi)
    prev = np.where(i >= 1, i - 1, 1)
    nxt = np.where(i <= n - 2, i + 1, n - 1)
    return (prev - base, i - base, nxt - base)


def _threshold(csf_bands, flt_bands, rp, rc, rn, cp, cc, cn, wide: bool, vec):
    """The masking threshold of every region pixel.

    The 3x3 sum, over the three orientations, of the neighbours' 1/30
    magnitudes with the centre replaced by its own 1/15 magnitude.  C sums in
    int32 (wrapping is modular, so the order of additions does not matter)
    and stores the narrow centre term in an int16 first; AVX-512 keeps that
    term in 32 bits, and the wide sums in 64 bits.
    """
    acc = np.int64 if wide else np.int32
    fsum = flt_bands[0].astype(acc) + flt_bands[1] + flt_bands[2]
    vert = fsum[rp] + fsum[rc] + fsum[rn]
    thr = vert[:, cp] + vert[:, cc] + vert[:, cn]
    thr -= fsum[rc][:, cc]
    if wide:
        for c in csf_bands:
            thr += (np.abs(c[rc][:, cc]).astype(np.int64) * 286331153 - 2**31) >> 32
        return thr  # 64-bit; C's int32 view is taken by the caller
    wrapped = None
    for c in csf_bands:
        centre = (np.abs(c[rc][:, cc].astype(np.int32)) * 8738 + 2048) >> 12
        if vec is not None and (centre > 32767).any():
            wrapped = np.zeros_like(thr) if wrapped is None else wrapped
            wrapped += np.where(centre > 32767, 65536, 0)
        thr += centre.astype(np.int16)
    if wrapped is not None:
        thr = np.where(vec, thr + wrapped, thr)  # AVX-512: no int16 store of the centre term
    return thr


def masked_sum(src, csf_bands, flt_bands, reg: Region, wide: bool, p, vec=None) -> list[int]:
    """Sum over the region of max(|csf(src)| - threshold, 0)^3, per band (h, v, d).

    ``src``, ``csf_bands`` and ``flt_bands`` all cover ``reg.ring``; ``vec``
    (region-shaped) marks the pixels AVX-512 computed with vector code.
    Cubes are taken in fixed point with libvmaf's intermediate shifts: the
    square is rounded, shifted and stored as int32 before it multiplies again.
    Each row's 64-bit sum is rounded and shifted before the rows are added.
    ``p`` holds the shifts.
    """
    rows, cols = reg.ring
    rp, rc, rn = _neighbours(reg.top, reg.bottom, reg.h, rows.start)
    cp, cc, cn = _neighbours(reg.left, reg.right, reg.w, cols.start)
    thr = _threshold(csf_bands, flt_bands, rp, rc, rn, cp, cc, cn, wide, vec)
    if wide:
        thr32 = thr.astype(np.int32)
    totals = []
    for theta in range(3):
        s = src[theta][rc][:, cc]
        if wide:
            s64 = s.astype(np.int64)
            rf = p.irf[theta]
            x32 = ((s64 * rf + (1 << 27)) >> 28).astype(np.int32)
            x = (np.abs(x32) - thr32).astype(np.int64)
            if vec is not None:
                # AVX-512 keeps x and the threshold in 64 bits (and multiplies by the weight as an int32).
                xv = np.abs((s64 * _as_signed32(rf) + (1 << 27)) >> 28) - thr
                x = _pick(vec, xv, x)
            np.maximum(x, 0, out=x)
            x = _low32(x)
        else:
            x = s.astype(np.int32) * np.int32(p.irf[theta])
            x = np.abs(x) - (thr << p.sub_shift[theta])
            np.maximum(x, 0, out=x)
            x = x.astype(np.int64)
        xsq = _low32((x * x + p.sq_add[theta]) >> p.sq_shift[theta])
        val = (xsq * x + p.cub_add[theta]) >> p.cub_shift[theta]
        per_row = (val.sum(axis=1) + p.row_add) >> p.row_shift
        totals.append(int(per_row.sum()))
    return totals


def den_sum(ref_bands, reg: Region, wide: bool, p) -> list[int]:
    """Sum over the region of |ref|^3 per band (h, v, d), with libvmaf's fixed-point shifts.

    (The AVX-512 code computes exactly the same.)
    """
    reg_rows = slice(reg.top, reg.bottom)
    reg_cols = slice(reg.left, reg.right)
    totals = []
    for b in ref_bands:
        a = np.abs(b[reg_rows, reg_cols].astype(np.int64))
        if wide:
            # The square is rounded with a whole 2^shift (not half of it): libvmaf's constant.
            val = ((((a * a) + p.den_sq_add) >> p.den_sq_shift) * a + p.den_cub_add) >> p.den_cub_shift
        else:
            val = a * a * a
        per_row = (val.sum(axis=1) + p.den_row_add) >> p.den_row_shift
        totals.append(int(per_row.sum()))
    return totals
