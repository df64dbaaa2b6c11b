"""Native integer motion: libvmaf's blurred-difference SAD in C++ (motion.cpp).

The twin (:class:`vmafxd.features.motion.IntegerMotion`) spends its time in the
per-pixel SAD; here that one statistic comes from C++ and everything else --
the per-frame score in libvmaf's double arithmetic, the temporal rules of
``motion2``/``motion3``, every option -- is the twin's own Python
(:func:`~vmafxd.features.motion.metrics_from_stats`,
:class:`~vmafxd.features.motion.MotionTimeline`), so the metrics are the
twin's bit for bit once the SAD is.
"""

from __future__ import annotations

import ctypes
from collections import deque
from typing import Any, Iterable, Mapping

import numpy as np

from ...features.declaration import FrameScores
from ...features.motion import DECLARATION, MotionTimeline, metrics_from_stats
from . import NativeUnsupported, library, row_samples

__all__ = ["NativeMotion", "sad"]

_SIGNATURES = {"vx_motion_sad": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_ssize_t,
                                                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int])}


def _sad_function():
    return library("motion", _SIGNATURES).vx_motion_sad


def sad(prev_luma: np.ndarray, cur_luma: np.ndarray, bitdepth: int) -> int:
    """The int64 SAD between two luma planes (what :func:`vmafxd.features.motion.compute_stats` returns)."""
    h, w = cur_luma.shape
    if prev_luma.shape != cur_luma.shape:
        raise ValueError(f"motion: luma planes of {prev_luma.shape[1]}x{prev_luma.shape[0]} and {w}x{h}")
    if w < 3 or h < 3:
        raise ValueError(f"motion needs a luma plane of at least 3x3, got {w}x{h}")
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    prev, ps = row_samples(prev_luma, dtype)
    cur, cs = row_samples(cur_luma, dtype)
    return _sad_function()(prev.ctypes.data, ps, cur.ctypes.data, cs, w, h, bitdepth, prev.itemsize)


class NativeMotion:
    """The ``motion`` extractor with its SAD in C++ (the twin's interface and options)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        options = DECLARATION.with_defaults(options)
        if width < 3 or height < 3 or not 8 <= bitdepth <= 16:
            raise NativeUnsupported("the twin says what is wrong with this size or depth")
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self.force_zero = bool(options["motion_force_zero"])
        self.fps_weight = float(options["motion_fps_weight"])
        self.max_val = float(options["motion_max_val"])
        self.timeline = MotionTimeline(options, debug=bool(options["debug"]))
        if not self.force_zero:
            _sad_function()  # build (or load) the kernel now: a failure falls back to the twin
        self._dtype = np.dtype(np.uint8) if bitdepth == 8 else np.dtype(np.uint16)
        # copies of the last one or two reference lumas (the caller may reuse its buffers)
        self._history: deque[np.ndarray] = deque(maxlen=self.timeline.min_idx)
        self._spare: np.ndarray | None = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        score = 0.0
        if not self.force_zero:
            luma = ref.luma
            if luma.shape != (self.height, self.width):
                raise ValueError(f"luma is {luma.shape[1]}x{luma.shape[0]}, expected {self.width}x{self.height}")
            cur = self._spare if self._spare is not None else np.empty((self.height, self.width), self._dtype)
            self._spare = None
            np.copyto(cur, luma, casting="unsafe")
            if index >= self.timeline.min_idx:
                if len(self._history) < self.timeline.min_idx:
                    raise ValueError(f"motion: frame {index} arrived without its predecessors")
                score = metrics_from_stats(sad(self._history[0], cur, self.bitdepth), self.width, self.height,
                                           fps_weight=self.fps_weight, max_val=self.max_val)
            if len(self._history) == self._history.maxlen:
                self._spare = self._history[0]  # about to leave the history
            self._history.append(cur)
        return self.timeline.push(index, score)

    def flush(self) -> Iterable[FrameScores]:
        self._history.clear()
        return self.timeline.flush()
