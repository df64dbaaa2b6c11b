"""Per-geometry constants of integer ADM: CSF weights, shifts, regions, AVX-512 column masks.

libvmaf derives every fixed-point shift from the band sizes (``ceil(log2(..))``
of widths, heights and region areas); they are computed once per frame size
and option set here and cached.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ._adm_core import Region, region
from ._adm_csf import csf_factors, s123_int_rfactors, scale0_int_rfactors

__all__ = ["ScaleParams", "factors_for", "plan_for", "vector_masks"]


@functools.lru_cache(maxsize=32)
def _factors(mode: int, nvd: float, rdh: int, scf: float, scfd: float):
    return tuple(csf_factors(s, mode, nvd, rdh, scf, scfd) for s in range(4))


def _clog2(x: float) -> int:
    return int(math.ceil(math.log2(x)))


@dataclass(frozen=True)
class ScaleParams:
    """Fixed-point constants of one scale (libvmaf derives them from the band size)."""

    region: Region
    irf: tuple[int, int, int]  # integer CSF weights (h, v, d)
    sub_shift: tuple[int, int, int]
    sq_add: tuple[int, int, int]
    sq_shift: tuple[int, int, int]
    cub_add: tuple[int, int, int]
    cub_shift: tuple[int, int, int]
    row_add: int
    row_shift: int
    den_sq_add: int
    den_sq_shift: int
    den_cub_add: int
    den_cub_shift: int
    den_row_add: int
    den_row_shift: int
    #: AVX-512 vector columns of decouple and CSF, over the ring's columns
    vec_ring: np.ndarray | None = None
    #: AVX-512 vector pixels of contrast masking over the region: per column, or per pixel
    #: when the first or last band row is in the region (None: all scalar)
    vec_region: np.ndarray | None = None


def vector_masks(reg: Region, wide: bool):
    """Which pixels libvmaf's AVX-512 routines handle with vector code (the rest is scalar C).

    Decouple and CSF run over the region grown by the filter taps, 16 columns
    at a time from its left edge; masking runs 14 (scale 0) or 6 (scales
    1-3) columns at a time, and only when the region is clear of the band's
    left and right edges.
    """
    w, h = reg.w, reg.h
    left_raw = int(w * 0.1 - 0.5 - 1)
    left_d, right_d = max(left_raw, 0), min(w - left_raw + 2, w)
    right_vec = right_d - (right_d - left_d) % 16
    cols = np.arange(reg.ring[1].start, reg.ring[1].stop)
    vec_ring = (cols >= left_d) & (cols < right_vec)
    vec_region = None
    if reg.left > 0 and reg.right <= w - 1:
        start, end = max(reg.left, 1), min(reg.right, w - 1)
        end_vec = end - (end - start) % (6 if wide else 14)
        cols = np.arange(reg.left, reg.right)
        vec_region = (cols >= start) & (cols < end_vec)
        rows = np.arange(reg.top, reg.bottom)
        row_ok = (rows >= max(reg.top, 1)) & (rows < min(reg.bottom, h - 1))
        if not row_ok.all():
            vec_region = row_ok[:, None] & vec_region[None, :]
    vec_ring.flags.writeable = False
    if vec_region is not None:
        vec_region.flags.writeable = False
    return vec_ring, vec_region


def _half_add(shift: int) -> int:
    return 1 << (shift - 1) if shift > 0 else 0


@functools.lru_cache(maxsize=32)
def _plan(width: int, height: int, mode: int, nvd: float, rdh: int, scf: float, scfd: float, simd: bool = True):
    factors = _factors(mode, nvd, rdh, scf, scfd)
    scales = []
    w, h = width, height
    for s in range(4):
        w, h = (w + 1) // 2, (h + 1) // 2
        reg = region(w, h)
        if s == 0:
            # libvmaf: ceil(log2(w) - 4) for h and v, ceil(log2(w) - 3) for d
            cub = tuple(int(math.ceil(math.log2(w) - k)) for k in (4, 4, 3))
            den_row_shift = max(int(math.ceil(math.log2(reg.area) - 20)), 0)
            p = ScaleParams(
                reg, scale0_int_rfactors(factors[0], mode, nvd, rdh),
                sub_shift=(10, 10, 12), sq_add=(1 << 28, 1 << 28, 1 << 29), sq_shift=(29, 29, 30),
                cub_add=tuple(_half_add(c) for c in cub), cub_shift=cub,
                row_add=_half_add(_clog2(h)), row_shift=_clog2(h),
                den_sq_add=0, den_sq_shift=0, den_cub_add=0, den_cub_shift=0,
                den_row_add=_half_add(den_row_shift), den_row_shift=den_row_shift,
            )
            p = dataclasses.replace(p, **dict(zip(("vec_ring", "vec_region"), vector_masks(reg, False))))
        else:
            cub = _clog2(w)
            den_sq = (31, 30, 31)[s - 1]
            den_cub = _clog2(reg.right - reg.left)
            den_row = _clog2(reg.bottom - reg.top)
            p = ScaleParams(
                reg, s123_int_rfactors(factors[s], simd),
                sub_shift=(0, 0, 0), sq_add=(1 << 29,) * 3, sq_shift=(30,) * 3,
                cub_add=(_half_add(cub),) * 3, cub_shift=(cub,) * 3,
                row_add=_half_add(_clog2(h)), row_shift=_clog2(h),
                # libvmaf rounds this square with a whole 2^shift, not half of it.
                den_sq_add=1 << den_sq, den_sq_shift=den_sq,
                den_cub_add=_half_add(den_cub), den_cub_shift=den_cub,
                den_row_add=_half_add(den_row), den_row_shift=den_row,
            )
            p = dataclasses.replace(p, **dict(zip(("vec_ring", "vec_region"), vector_masks(reg, True))))
        scales.append(p)
    return factors, tuple(scales)


def factors_for(options: Mapping[str, Any]):
    """The float CSF weights (h, v, d) of the four scales for an option set."""
    return _factors(int(options["adm_csf_mode"]), float(options["adm_norm_view_dist"]),
                    int(options["adm_ref_display_height"]), float(options["adm_csf_scale"]),
                    float(options["adm_csf_diag_scale"]))


def plan_for(width: int, height: int, options: Mapping[str, Any], simd: bool = True):
    """(CSF weights per scale, :class:`ScaleParams` per scale) for a frame size and option set.

    ``simd``: the integer weights as libvmaf's AVX-512 build converts them.
    """
    return _plan(width, height, int(options["adm_csf_mode"]), float(options["adm_norm_view_dist"]),
                 int(options["adm_ref_display_height"]), float(options["adm_csf_scale"]),
                 float(options["adm_csf_diag_scale"]), simd)
