"""Native integer VIF (``vif``): vif.cpp for the per-frame statistics.

The twin (:mod:`vmafxd.features.vif`) checks the options and the size, and turns
the statistics into metrics (:func:`~vmafxd.features.vif.metrics_from_sums`,
libvmaf's float and double arithmetic); vif.cpp forms the four scales' integer
sums (num_log, den_log, num_non_log, den_non_log) from the luma samples, each
equal to the twin's :func:`~vmafxd.features.vif.compute_stats` (integers: any
order gives the same sums).  The twin's log2 table is handed to vif.cpp, so both
read the very same entries.
"""

from __future__ import annotations

import ctypes
from typing import Any, Iterable, Mapping

import numpy as np

from ...features.declaration import FrameScores
from ...features.vif import LOG2_TABLE, VifExtractor, metrics_from_sums
from . import library, plane_pair

__all__ = ["Vif"]

_P = ctypes.c_void_p
_I = ctypes.c_int
_S = ctypes.c_ssize_t


_SIGNATURES = {
    "vif_new": (_P, [_I, _I, _I, ctypes.c_double, _I, _P]),
    "vif_free": (None, [_P]),
    "vif_frame": (_I, [_P, _P, _S, _P, _S, _I, _P]),
    "vif_set_isa": (_I, [_I]),
}


def _lib() -> ctypes.CDLL:
    return library("vif", _SIGNATURES)


#: vif.cpp's instruction sets: its loops in pairs of SSE2 registers, in AVX2 ones, in AVX-512 ones
ISAS = ("baseline", "avx2", "avx512")


def use_isa(name: str) -> str:
    """Run vif.cpp's frames with instruction set ``name``, or the best the CPU has below it (the
    tests compare them; the best the CPU has is the default); returns the one now in use."""
    return ISAS[_lib().vif_set_isa(ISAS.index(name))]


class _Context:
    """One vif.cpp context (freed with the object)."""

    def __init__(self, width: int, height: int, bitdepth: int, gain_limit: float, skip_scale0: bool):
        self.lib = _lib()
        self.handle = self.lib.vif_new(width, height, bitdepth, gain_limit, int(skip_scale0), LOG2_TABLE.ctypes.data)
        if not self.handle:
            raise MemoryError(f"vif.cpp: no context for {width}x{height} at {bitdepth} bits")
        self.sums = np.zeros((4, 4), np.int64)

    def frame(self, ref: tuple[np.ndarray, int], dist: tuple[np.ndarray, int]) -> np.ndarray:
        """The frame's ``int64[4, 4]`` (scale x (num_log, den_log, num_non_log, den_non_log)), a view
        overwritten by the next frame."""
        if self.lib.vif_frame(self.handle, ref[0].ctypes.data, ref[1], dist[0].ctypes.data, dist[1],
                              ref[0].itemsize, self.sums.ctypes.data):
            raise MemoryError("vif.cpp: no memory to widen the 8-bit samples")
        return self.sums

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            self.lib.vif_free(handle)


class Vif:
    """``vif`` through vif.cpp (the twin's options, errors and metrics)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.twin = VifExtractor(options, width, height, bitdepth)  # the bit depth's and the size's errors
        self.options = self.twin.options
        self.skip_scale0 = bool(self.options.get("vif_skip_scale0", False))
        gain_limit = float(self.options.get("vif_enhn_gain_limit", 100.0))
        self.shape = (height, width)
        self._context = _Context(width, height, bitdepth, gain_limit, self.skip_scale0)

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        sums = self._context.frame(*plane_pair("vif", "luma", ref.planes[0], dist.planes[0], self.shape))
        return [(index, metrics_from_sums(sums[None], self.skip_scale0, self.options)[0])]

    def flush(self) -> Iterable[FrameScores]:
        return []
