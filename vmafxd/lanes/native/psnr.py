"""Native integer PSNR (``psnr``): psnr.cpp for the planes' sums of squared errors.

The twin (:class:`vmafxd.features.psnr.IntegerPsnr`) does everything else: the
options, the peak and the caps (``min_sse``, ``reduced_hbd_peak``), which planes
are scored (``enable_chroma``, 4:0:0), ``enable_mse``, the whole-run APSNR
(``enable_apsnr``) and libvmaf's double arithmetic; this class only replaces its
:meth:`~vmafxd.features.psnr.IntegerPsnr.sse` with psnr.cpp's integer sums
(the same integers in any order).
"""

from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from ...features.psnr import IntegerPsnr
from . import library, plane_pair

__all__ = ["Psnr"]

_P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_ssize_t
_PLANES = ("luma", "Cb", "Cr")


def _lib() -> ctypes.CDLL:
    return library("psnr", {"psnr_sse": (ctypes.c_uint64, [_P, _S, _P, _S, _I, _I, _I])})


class Psnr(IntegerPsnr):
    """``psnr`` with psnr.cpp's sums of squared errors (the twin's options, errors and metrics)."""

    def __init__(self, options, width: int, height: int, bitdepth: int):
        super().__init__(options, width, height, bitdepth)
        self._lib = _lib()  # built now: where it cannot be, native.extractor leaves the frame to the twin

    def sse(self, ref_planes: Sequence[np.ndarray], dist_planes: Sequence[np.ndarray]) -> np.ndarray:
        out = np.empty(len(ref_planes), np.int64)
        for p, (ref, dist) in enumerate(zip(ref_planes, dist_planes)):
            r, d = plane_pair("psnr", _PLANES[p], ref, dist, ref.shape)
            h, w = ref.shape
            out[p] = self._lib.psnr_sse(r[0].ctypes.data, r[1], d[0].ctypes.data, d[1], w, h, r[0].itemsize)
        return out
