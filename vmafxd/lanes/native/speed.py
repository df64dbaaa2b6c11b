"""Native SpEED (``speed_chroma``, ``speed_temporal``): speed.cpp for the per-frame work.

The twin (:mod:`vmafxd.features._speed_core`) checks the options, makes the
geometry, the filter taps and the resize tables and turns the scores into
metrics; speed.cpp does everything between the samples and a pair's score
(the float pictures, the resize, the anti-aliased decimation, the covariance
sums, the eigenvalues, the QR solve, the entropies, the score) with the twin's
operations in the twin's order.  The twin's geometry refuses planes too small
for a block at 1/16 scale (under 80 samples across, 5 at 1/16), so the widest
filters (half widths 17 and 4, at kernel scale 3.71) always fit the pictures
they mirror.
"""

from __future__ import annotations

import ctypes
from typing import Any, Iterable, Mapping

import numpy as np

from ...features import _speed_core as core
from ...features._float_common import SCALERS
from ...features.declaration import FrameScores, check_chroma
from ...features.speed_chroma import SpeedChroma as ChromaTwin
from ...features.speed_chroma import metrics_from_scores
from ...features.speed_temporal import SpeedTemporal as TemporalTwin
from . import library, plane_pair

__all__ = ["SpeedChroma", "SpeedTemporal"]

_P = ctypes.c_void_p
_F = ctypes.c_float
_I = ctypes.c_int
_S = ctypes.c_ssize_t


_SIGNATURES = {
    "speed_new": (_P, [_I, _I, _I, _I, _I, _P, _P, _P, _P, _P, _P, _P, _I, _P, _I, _F, _F, ctypes.c_double, _I]),
    "speed_free": (None, [_P]),
    "speed_chroma_pair": (_I, [_P, _P, _S, _P, _S, _I, _F, _P]),
    "speed_temporal_push": (None, [_P, _P, _S, _P, _S, _I, _F, _I, _I, _P]),
    "speed_picture_sums": (None, [_P, _P, _P]),
}


def _lib() -> ctypes.CDLL:
    return library("speed", _SIGNATURES)


class _Context:
    """One speed.cpp context: a plane size's geometry, tables and buffers (freed with the object)."""

    def __init__(self, g: core.SpeedGeometry, options: Mapping[str, Any], mode: int):
        self.lib = _lib()
        self.geometry = g
        antialias, local = core.filter_taps(options)
        resize, tables = core.resize_tables(g, options)
        if resize:
            y1, y2, dy, x1, x2, dx = tables
            self._keep = [np.ascontiguousarray(t, np.int32) for t in (y1, y2, x1, x2)]
            self._keep += [np.ascontiguousarray(t, np.float32) for t in (dy, dx)]
        else:
            self._keep = [np.zeros(1, np.int32)] * 4 + [np.zeros(1, np.float32)] * 2
        self._taps = [np.ascontiguousarray(antialias, np.float32), np.ascontiguousarray(local, np.float32)]
        snn = np.float32(options["speed_sigma_nn"])
        nnf = np.float32(options["speed_nn_floor"])
        # get_speed_score's base entropy, as the twin forms it
        base = np.float32(core.BLOCK * core.BLOCK * (core.c_log2(float((np.float32(1.0) + nnf) * snn))
                                                     + core._LOG2_2PIE))
        ptr = [a.ctypes.data for a in self._keep]
        self.handle = self.lib.speed_new(
            g.width, g.height, g.scaled_width, g.scaled_height, resize, ptr[0], ptr[1], ptr[4], ptr[2], ptr[3],
            ptr[5], self._taps[0].ctypes.data, len(self._taps[0]), self._taps[1].ctypes.data, len(self._taps[1]),
            snn, base, core._LOG2_2PIE, mode)
        if not self.handle:
            raise MemoryError(f"speed.cpp: no SpEED context for {g} (too small for its filters, or no memory)")
        self.score = np.zeros(1, np.float32)
        self.score_ptr = self.score.ctypes.data

    def picture_sums(self, picture: np.ndarray) -> np.ndarray:
        """The covariance sums (``core.PAIRS`` doubles) of one float picture of the source size (tests)."""
        pic = np.ascontiguousarray(picture, np.float32)
        shape = (self.geometry.height, self.geometry.width)
        if pic.shape != shape:
            raise ValueError(f"picture_sums: a {pic.shape} picture, expected {shape}")
        out = np.empty(core.PAIRS, np.float64)
        self.lib.speed_picture_sums(self.handle, pic.ctypes.data, out.ctypes.data)
        return out

    def __del__(self):
        handle, self.handle = getattr(self, "handle", None), None
        if handle:
            self.lib.speed_free(handle)


class SpeedChroma:
    """``speed_chroma`` through speed.cpp (the twin's options, errors and metrics)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.twin = ChromaTwin(options, width, height, bitdepth)
        self.options = self.twin.options
        self.scaler = SCALERS[bitdepth]
        self.max_val = float(self.options["speed_max_val"])
        _lib()  # built now: where it cannot be, native.extractor leaves the frame to the twin
        self._context: _Context | None = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        check_chroma("speed_chroma", len(ref.planes))
        if self._context is None:
            ch, cw = ref.planes[1].shape
            g = core.geometry(cw, ch, float(self.options["speed_prescale"]))
            self._context = _Context(g, self.options, int(self.options["speed_weight_var_mode"]))
        ctx = self._context
        shape = (ctx.geometry.height, ctx.geometry.width)
        out = []
        for p, name in ((1, "Cb"), (2, "Cr")):
            r, d = plane_pair("speed_chroma", name, ref.planes[p], dist.planes[p], shape)
            err = ctx.lib.speed_chroma_pair(ctx.handle, r[0].ctypes.data, r[1], d[0].ctypes.data, d[1],
                                            r[0].itemsize, self.scaler, ctx.score_ptr)
            out += [np.float32(ctx.score[0]), bool(err)]
        return [(index, metrics_from_scores(*out, self.max_val))]

    def flush(self) -> Iterable[FrameScores]:
        return []


class SpeedTemporal:
    """``speed_temporal`` through speed.cpp (the previous frame's float pictures kept there)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.twin = TemporalTwin(options, width, height, bitdepth)  # the options' and the size's errors
        self.options = self.twin.options
        self.scaler = SCALERS[bitdepth]
        self.use_ref_diff = int(bool(self.options["speed_use_ref_diff"]))
        self._context = _Context(self.twin.geometry, self.options, 0)
        self._has_previous = False

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        ctx = self._context
        shape = (ctx.geometry.height, ctx.geometry.width)
        r, d = plane_pair("speed_temporal", "luma", ref.luma, dist.luma, shape)
        previous = int(index != 0 and self._has_previous)
        self._has_previous = True
        ctx.lib.speed_temporal_push(ctx.handle, r[0].ctypes.data, r[1], d[0].ctypes.data, d[1], r[0].itemsize,
                                    self.scaler, previous, self.use_ref_diff, ctx.score_ptr)
        return [(index, {"speed_temporal": float(ctx.score[0]) if previous else 0.0})]

    def flush(self) -> Iterable[FrameScores]:
        return []
