"""Native integer ADM: the 36 integer sums of a frame in C++ (adm.cpp).

The twin (:class:`vmafxd.features.adm.IntegerAdm`) spends its time in the
per-pixel pipeline (DWT, decouple, CSF, contrast masking, cubes).  Here that
pipeline is C++ for one thread, fed with the twin's own per-geometry plan
(``_adm_plan.plan_for``: shifts, CSF weights, regions and libvmaf's AVX-512
vector columns, as masks), and the sums go through the twin's
:class:`~vmafxd.features.adm.BatchScorer` (:func:`~vmafxd.features.adm.metrics_from_sums`'s
arithmetic), so the metrics are the twin's bit for bit once the sums are.  Every option the twin takes is taken here.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Mapping

import numpy as np

from ...features import adm as twin
from ...features._adm_core import COS_1DEG_SQ
from ...features._adm_plan import plan_for
from ...features.declaration import OptionError, per_frame
from . import NativeUnsupported, library, row_samples

__all__ = ["ISAS", "NativeAdm", "compute_sums", "use_isa"]

_P, _S, _I = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int
_SIGNATURES = {
    "vx_adm_param_count": (_I, []),
    "vx_adm_new": (_P, []),
    "vx_adm_free": (None, [_P]),
    "vx_adm_stats": (None, [_P, _P, _S, _P, _S, _I, _I, _I, _I, _P, _P, ctypes.c_int64, ctypes.c_double,
                            ctypes.c_double, _I, _I, _P]),
    "vx_adm_set_isa": (_I, [_I]),
}

#: adm.cpp's instruction sets: its loops vectorised for SSE2, AVX2 or AVX-512 registers
ISAS = ("baseline", "avx2", "avx512")


def use_isa(name: str) -> str:
    """Run adm.cpp's frames with instruction set ``name``, or the best the CPU has below it (the
    tests compare them; the best the CPU has is the default); returns the one now in use."""
    return ISAS[_functions().vx_adm_set_isa(ISAS.index(name))]


def _functions():
    return library("adm", _SIGNATURES)


def _u8(mask) -> np.ndarray:
    return np.ascontiguousarray(mask, dtype=np.uint8)


def _scale_inputs(p) -> tuple[list[int], list[np.ndarray]]:
    """One scale's constants (adm.cpp's P_* order) and its three AVX-512 masks:
    decouple/CSF per band column, masking per region column and per region row."""
    reg = p.region
    row = [reg.w, reg.h, reg.top, reg.bottom, reg.left, reg.right, *p.irf, *p.sub_shift, *p.sq_add, *p.sq_shift,
           *p.cub_add, *p.cub_shift, p.row_add, p.row_shift, p.den_sq_add, p.den_sq_shift, p.den_cub_add,
           p.den_cub_shift, p.den_row_add, p.den_row_shift]
    vcol = np.zeros(reg.w, np.uint8)
    if p.vec_ring is not None:
        vcol[reg.ring[1]] = p.vec_ring
    rw, rh = reg.right - reg.left, reg.bottom - reg.top
    vg = p.vec_region
    if vg is None:
        gcol, grow = np.zeros(rw, bool), np.zeros(rh, bool)
    elif vg.ndim == 1:
        gcol, grow = vg, np.ones(rh, bool)
    else:
        # rows x columns: libvmaf's vector masking is a rectangle (the plan's outer product)
        gcol, grow = vg.any(axis=0), vg.any(axis=1)
        if not np.array_equal(grow[:, None] & gcol[None, :], vg):
            raise AssertionError("the AVX-512 masking mask is not a rectangle")
    return row, [vcol, _u8(gcol), _u8(grow)]


class _Plan:
    """The C++ call's constant arguments for one frame size and option set."""

    def __init__(self, width: int, height: int, options: Mapping[str, Any]):
        _, params = plan_for(width, height, options)
        rows, masks = [], []
        for p in params:
            r, m = _scale_inputs(p)
            rows.append(r)
            masks += m
        count = _functions().vx_adm_param_count()
        self.table = np.asarray(rows, dtype=np.int64)
        if self.table.shape != (4, count):
            raise AssertionError(f"adm.cpp reads {count} constants a scale, the plan gives {self.table.shape[1]}")
        self.masks = masks  # kept alive: the pointers below read them
        self.mask_ptrs = (ctypes.c_void_p * 12)(*(m.ctypes.data for m in masks))
        egl = float(options["adm_enhn_gain_limit"])
        self.egl_int = int(egl) if egl.is_integer() else -1
        self.egl = egl
        self.skip0 = int(bool(options["adm_skip_scale0"]))
        self.skip_aim = int(bool(options["adm_skip_aim"]))


class _Workspace:
    """adm.cpp's band buffers (kept between frames: no allocation per frame)."""

    def __init__(self):
        lib = _functions()
        self.handle = lib.vx_adm_new()
        self._finalizer = weakref.finalize(self, lib.vx_adm_free, self.handle)


def _sums(ws: _Workspace, plan: _Plan, ref: np.ndarray, dist: np.ndarray, bitdepth: int, out: np.ndarray) -> None:
    h, w = ref.shape
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    r, rs = row_samples(ref, dtype)
    d, ds = row_samples(dist, dtype)
    _functions().vx_adm_stats(ws.handle, r.ctypes.data, rs, d.ctypes.data, ds, w, h, bitdepth, r.itemsize,
                              plan.table.ctypes.data, plan.mask_ptrs, plan.egl_int, plan.egl, COS_1DEG_SQ,
                              plan.skip0, plan.skip_aim, out.ctypes.data)


def compute_sums(ref_luma: np.ndarray, dist_luma: np.ndarray, bitdepth: int,
                 options: Mapping[str, Any]) -> twin.AdmStats:
    """The twin's :func:`~vmafxd.features.adm.compute_stats` (AVX-512 code path), natively."""
    h, w = ref_luma.shape
    twin.check_size(w, h)
    out = np.zeros(36, np.int64)
    _sums(_Workspace(), _Plan(w, h, options), ref_luma, dist_luma, bitdepth, out)
    num, den, aim = out.reshape(3, 4, 3)
    return twin.AdmStats(w, h, num.copy(), den.copy(), aim.copy())


class NativeAdm:
    """The ``adm`` extractor with its integer pipeline in C++ (the twin's interface and options)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.options = dict(options)
        try:
            twin.check_options(self.options)
            twin.check_size(width, height)
        except (OptionError, ValueError):
            raise NativeUnsupported("the twin says what is wrong with these options or this size") from None
        if not 8 <= bitdepth <= 16:
            raise NativeUnsupported("the twin says what is wrong with this depth")
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self._plan = _Plan(width, height, self.options)
        self._metrics = twin.BatchScorer(width, height, self.options)  # the constants looked up once
        self._ws = _Workspace()
        self._out = np.zeros(36, np.int64)

    def extract(self, index: int, ref, dist):
        ref_luma, dist_luma = ref.planes[0], dist.planes[0]
        if ref_luma.shape != (self.height, self.width) or dist_luma.shape != ref_luma.shape:
            raise ValueError(f"adm: luma planes of {ref_luma.shape[::-1]} and {dist_luma.shape[::-1]}, "
                             f"expected {self.width}x{self.height}")
        _sums(self._ws, self._plan, ref_luma, dist_luma, self.bitdepth, self._out)
        num, den, aim = self._out.reshape(3, 4, 3)
        return [(index, per_frame(self._metrics(num[None], den[None], aim[None]))[0])]

    def flush(self):
        return []
