"""The per-scale arithmetic of libvmaf's float ADM (``adm.c``'s ``compute_adm``, ``adm_tools.c``), op for op.

Per scale: a Daubechies-2 DWT of both pictures (``adm_dwt2_s``), the split
of the distorted detail bands into restored and additive parts
(``adm_decouple_s``, which divides with the SSE reciprocal estimate, see
:mod:`._rcp`), the CSF weighting (``adm_csf_s``), contrast masking and the
cubed sums (``adm_cm_s``), and the reference's CSF-weighted cubed sums
(``adm_csf_den_scale_s``).  Values are C ``float`` (``np.float32``);
``FLOAT_ONE_BY_30``/``FLOAT_ONE_BY_15`` are *double* literals in libvmaf, so
the products with them are done in float64 and rounded once, as C does.
"""

from __future__ import annotations

import functools
import math
import numpy as np

from ._adm_csf import csf_factors, f32, powf, powf_array
from ._float_common import row_major_sum
from ._rcp import divs

__all__ = ["BORDER_FACTOR", "rfactors", "dwt2", "decouple", "csf", "cm_accumulators", "den_accumulators",
           "finish", "band_sizes", "region", "COS_1DEG_SQ"]

F32 = np.float32
BORDER_FACTOR = 0.1

_LO = tuple(F32(v) for v in (0.482962913144690, 0.836516303737469, 0.224143868041857, -0.129409522550921))
_HI = tuple(F32(v) for v in (-0.129409522550921, -0.224143868041857, 0.836516303737469, -0.482962913144690))
ONE_BY_30 = 0.0333333351  # a double literal in libvmaf
ONE_BY_15 = 0.0666666701
_EPS = F32(1e-30)
COS_1DEG_SQ = f32(math.cos(1.0 * math.pi / 180.0) * math.cos(1.0 * math.pi / 180.0))
_ZERO = F32(0.0)
_ONE = F32(1.0)


def _native_csf(scale: int, nvd: float, rdh: int, theta: int) -> np.float32:
    """``adm_native_csf`` (``adm_csf_tools.h``): float intermediates, double formula."""
    r = f32(nvd * rdh * math.pi / 180.0)
    sf = f32(float(r) / math.pow(2, scale + 1))
    if theta == 45:
        sf = f32(float(sf) / 0.7)
    s = float(sf)
    return f32((0.31 + 0.69 * s) * math.exp(-0.29 * s))


def rfactors(scale: int, opts) -> tuple[np.float32, np.float32, np.float32]:
    """The CSF weights (h, v, d) of one scale, with the ``adm_f1sN``/``adm_f2sN`` overrides."""
    mode = int(opts["adm_csf_mode"])
    nvd, rdh = float(opts["adm_norm_view_dist"]), int(opts["adm_ref_display_height"])
    if mode == 1:
        f1, _, f2 = csf_factors(scale, 1, nvd, rdh, float(opts["adm_csf_scale"]), float(opts["adm_csf_diag_scale"]))
    elif mode == 2:
        f1, f2 = _native_csf(scale, nvd, rdh, 0), _native_csf(scale, nvd, rdh, 45)
    else:  # Watson 97, libvmaf's fallback for every other mode
        f1, _, f2 = csf_factors(scale, 0, nvd, rdh, 1.0, 1.0)
    o1, o2 = float(opts[f"adm_f1s{scale}"]), float(opts[f"adm_f2s{scale}"])
    if o1 >= 0:
        f1 = f32(o1)
    if o2 >= 0:
        f2 = f32(o2)
    return (F32(f1), F32(f1), F32(f2))


def _dwt_indices(n: int) -> tuple[np.ndarray, ...]:
    """``dwt2_src_indices_filt_s``: taps 2i-1 .. 2i+2, mirrored (-1 -> 1, n + k -> n - 1 - k)."""
    i = np.arange((n + 1) // 2)
    out = []
    for off in (-1, 0, 1, 2):
        idx = 2 * i + off
        idx = np.where(idx < 0, -idx, idx)
        idx = np.where(idx >= n, 2 * n - idx - 1, idx)
        out.append(idx)
    return tuple(out)


def _fir4(s, taps) -> np.ndarray:
    acc = _ZERO + taps[0] * s[0]
    acc += taps[1] * s[1]
    acc += taps[2] * s[2]
    acc += taps[3] * s[3]
    return acc


def dwt2(src: np.ndarray, lo_only: bool = False):
    """``adm_dwt2_s``: bands (a, v, h, d) of a float32 picture; ``lo_only``: a alone (``adm_dwt2_lo_s``)."""
    h, w = src.shape
    iy = _dwt_indices(h)
    ix = _dwt_indices(w)
    rows = [src[k] for k in iy]
    tmplo = _fir4(rows, _LO)
    cols = [tmplo[:, k] for k in ix]
    a = _fir4(cols, _LO)
    if lo_only:
        return a, None, None, None
    v = _fir4(cols, _HI)
    tmphi = _fir4(rows, _HI)
    cols = [tmphi[:, k] for k in ix]
    hb = _fir4(cols, _LO)
    d = _fir4(cols, _HI)
    return a, v, hb, d


def _clamp01(k: np.ndarray) -> np.ndarray:
    return np.where(k < 0, _ZERO, np.where(k > 1, _ONE, k))


def _gain(rst: np.ndarray, t: np.ndarray, flag: np.ndarray, egl: float) -> np.ndarray:
    """libvmaf's enhancement-gain limit: ``MIN``/``MAX`` of ``rst * egl`` (double) and ``t``, to float."""
    t64 = t.astype(np.float64)
    scaled = rst.astype(np.float64) * egl
    pos = flag & (rst > 0)
    rst = np.where(pos, np.where(scaled < t64, scaled, t64).astype(np.float32), rst)
    scaled = rst.astype(np.float64) * egl
    neg = flag & (rst < 0)
    return np.where(neg, np.where(scaled > t64, scaled, t64).astype(np.float32), rst)


def decouple(ref_bands, dis_bands, egl: float):
    """``adm_decouple_s`` over whole bands: restored (r) and additive (a) parts, each (h, v, d)."""
    _, ov, oh, od = ref_bands
    _, tv, th, td = dis_bands
    with np.errstate(all="ignore"):
        kh = _clamp01(divs(th, oh + _EPS))
        kv = _clamp01(divs(tv, ov + _EPS))
        kd = _clamp01(divs(td, od + _EPS))
        rh, rv, rd = kh * oh, kv * ov, kd * od
        ot_dp = oh * th + ov * tv
        o_mag = oh * oh + ov * ov
        t_mag = th * th + tv * tv
        flag = (ot_dp >= 0) & (ot_dp * ot_dp >= COS_1DEG_SQ * o_mag * t_mag)
        rh = _gain(rh, th, flag, egl)
        rv = _gain(rv, tv, flag, egl)
        rd = _gain(rd, td, flag, egl)
    return (rh, rv, rd), (th - rh, tv - rv, td - rd)


def csf(bands, rf):
    """``adm_csf_s``: (weighted bands, masks |weighted| / 30), per angle."""
    dst = tuple(r * b for r, b in zip(rf, bands))
    flt = tuple((ONE_BY_30 * np.abs(x).astype(np.float64)).astype(np.float32) for x in dst)
    return dst, flt


def region(w: int, h: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the scored part of a band, as ``adm_cm_s``/den compute them."""
    left = int(w * BORDER_FACTOR - 0.5)
    top = int(h * BORDER_FACTOR - 0.5)
    return top, h - top, left, w - left


def _mirror_index(n: int) -> np.ndarray:
    """Neighbour indices -1 .. n for the 3x3 masking window: -1 reads 1, n reads n - 1."""
    idx = np.arange(-1, n + 1)
    idx[0] = 1 if n > 1 else 0
    idx[-1] = n - 1
    return idx


def _threshold(angles, flts, rows: slice, cols: slice) -> np.ndarray:
    """The contrast-masking threshold of each pixel (``ADM_CM_THRESH_S_*``), float sums in libvmaf's order."""
    h, w = angles[0].shape
    ri = _mirror_index(h)[rows.start:rows.stop + 2]
    ci = _mirror_index(w)[cols.start:cols.stop + 2]
    nr, nc = rows.stop - rows.start, cols.stop - cols.start
    thr = None
    for src, flt in zip(angles, flts):
        win = flt[np.ix_(ri, ci)]
        centre = np.abs(src[rows, cols]).astype(np.float64) * ONE_BY_15
        s = None
        for dy in range(3):
            for dx in range(3):
                if dy == 1 and dx == 1:
                    s = (s.astype(np.float64) + centre).astype(np.float32)
                    continue
                term = win[dy:dy + nr, dx:dx + nc]
                s = _ZERO + term if s is None else s + term
        thr = _ZERO + s if thr is None else thr + s
    return thr


def _pnorm_sum(x: np.ndarray, p: float) -> np.float32:
    if p == 3.0:
        cubes = x * x * x
    else:
        cubes = powf_array(x.ravel(), p).reshape(x.shape)
    return row_major_sum(cubes)


@functools.lru_cache(maxsize=64)
def noise_constant(w: int, h: int, weight: float, p: float) -> np.float32:
    """``get_noise_constant``: ``powf(w * h * weight, 1.0f / p)`` (a few per geometry: kept)."""
    return powf(w * h * weight, 1.0 / p)


def cm_accumulators(src, angles, flts, rf, p: float, bypass_cm: bool) -> list[np.float32]:
    """``adm_cm_s``'s three float sums (h, v, d): masked, CSF-weighted bands to the p-th power."""
    h, w = src[0].shape
    top, bottom, left, right = region(w, h)
    rows = slice(max(top, 0), min(bottom, h))
    cols = slice(max(left, 0), min(right, w))
    thr = _ZERO if bypass_cm else _threshold(angles, flts, rows, cols)
    out = []
    for band, r in zip(src, rf):
        x = np.abs(band[rows, cols] * r) - thr
        x = np.where(x < 0, _ZERO, x)
        out.append(_pnorm_sum(x, p))
    return out


def den_accumulators(ref_bands, rf, p: float) -> list[np.float32]:
    """``adm_csf_den_scale_s``'s three float sums: the reference's CSF-weighted detail bands."""
    _, v, hb, d = ref_bands
    h, w = hb.shape
    top, bottom, left, right = region(w, h)
    return [_pnorm_sum(np.abs(r * band[top:bottom, left:right]), p) for band, r in zip((hb, v, d), rf)]


def finish(accs, w: int, h: int, noise_weight: float, p: float) -> np.float32:
    """The three angles' ``powf(accum, 1/p) + noise``, added in float (a band of ``w x h``)."""
    top, bottom, left, right = region(w, h)
    noise = noise_constant(right - left, bottom - top, noise_weight, p)
    one_by_p = 1.0 / p
    total = None
    for acc in accs:
        part = powf(acc, one_by_p) + noise
        total = part if total is None else total + part
    return total


def band_sizes(width: int, height: int) -> list[tuple[int, int]]:
    """(w, h) of each scale's DWT bands: halved, rounded up."""
    out, w, h = [], width, height
    for _ in range(4):
        w, h = (w + 1) // 2, (h + 1) // 2
        out.append((w, h))
    return out
