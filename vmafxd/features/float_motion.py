"""Float motion: libvmaf's ``float_motion`` extractor (``motion``, ``motion2``, ``motion3``).

libvmaf (``float_motion.c``, ``motion.c``) blurs each *reference* luma plane
(as floats, ``sample / scaler - 128``) with a separable 5-tap filter and takes
the mean absolute difference between the blurred planes of consecutive frames:

* ``motion`` of frame *i* (debug output, on by default): ``score_i``, the
  mean absolute difference between blurred frames *i - 1* and *i* (0 for frame 0);
* ``motion2`` of frame *i*: ``min(score_i, score_{i+1})``; frame 0 gets 0 and
  the last frame its own score;
* ``motion3``: ``motion2`` blended (:func:`~vmafxd.features.motion.motion_blend`);
  frame 0 takes the blended score of frame 1.

Each score is multiplied by ``motion_fps_weight`` and clipped to
``motion_max_val`` as it is written.  The SAD follows ``vmaf_image_sad_c``:
a float sum per row (``fabs`` of a float difference, added in double and
rounded back to float, which is the float sum), the row sums added into a
float, divided by ``w * h`` as floats.

Layers: :func:`blur` (per-frame statistics a GPU kernel reproduces: the
blurred plane), :func:`sad_score` (the reduction), :class:`FloatMotion` (the
temporal rules, CPU twin).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ._c_math import c_min
from ._float_common import row_major_sum, separable_filter, to_float_plane
from .declaration import FeatureDeclaration, FrameScores, Option, OptionError, debug_option
from .motion import (
    BLEND_FACTOR_OPTION, BLEND_OFFSET_OPTION, FORCE_ZERO_OPTION, FPS_WEIGHT_OPTION, MAX_VAL_OPTION, motion_blend,
)

__all__ = ["DECLARATION", "FloatMotion", "FILTER_5", "FILTER_3", "blur", "sad_score", "score_from_sum", "filter_for"]

#: libvmaf's motion_tools.h taps, as C floats
FILTER_5 = np.array([0.054488685, 0.244201342, 0.402619947, 0.244201342, 0.054488685], dtype=np.float32)
FILTER_3 = np.array([0.166378498, 0.667243004, 0.166378498], dtype=np.float32)
FILTER_5_NO_OP = np.array([0.0, 0.0, 1.0, 0.0, 0.0], dtype=np.float32)


def filter_for(size: int) -> np.ndarray:
    """``motion_filter_size``: 1 is the identity 5-tap, 3 the 3-tap, anything else the 5-tap blur."""
    if size == 1:
        return FILTER_5_NO_OP
    if size == 3:
        return FILTER_3
    return FILTER_5


def blur(plane: np.ndarray, bitdepth: int, taps: np.ndarray = FILTER_5) -> np.ndarray:
    """The blurred float plane of one reference frame."""
    return separable_filter(to_float_plane(plane, bitdepth), taps)


def sad_score(a: np.ndarray, b: np.ndarray) -> float:
    """libvmaf's ``vmaf_image_sad_c`` without scale 1: mean |a - b| in float arithmetic."""
    h, w = a.shape
    return score_from_sum(row_major_sum(np.abs(a - b)), w, h)


def score_from_sum(total: np.float32, w: int, h: int) -> float:
    """The SAD's float sum over a ``w x h`` plane to the score: divided by ``w * h`` in float."""
    return float(np.float32(total) / np.float32(w * h))


class FloatMotion:
    """CPU twin of libvmaf's ``float_motion`` (reference planes only)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        options = DECLARATION.with_defaults(options)
        _check(options)
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self.debug = bool(options["debug"])
        self.force_zero = bool(options["motion_force_zero"])
        self.fps_weight = float(options["motion_fps_weight"])
        self.blend_factor = float(options["motion_blend_factor"])
        self.blend_offset = float(options["motion_blend_offset"])
        self.max_val = float(options["motion_max_val"])
        self.add_uv = bool(options["motion_add_uv"])
        self.taps = filter_for(int(options["motion_filter_size"]))
        self._prev: list[np.ndarray] | None = None
        self._score = 0.0       # the last frame's score (libvmaf's s->score)
        self._last_index = -1
        self._pending: dict[str, float] = {}  # frame i - 1's early outputs (motion at i - 1)

    def _weighted(self, score: float) -> float:
        return c_min(score * self.fps_weight, self.max_val)

    def _blended(self, score: float) -> float:
        return c_min(motion_blend(score * self.fps_weight, self.blend_factor, self.blend_offset), self.max_val)

    def _planes(self, picture: Any) -> list[np.ndarray]:
        planes = [picture.planes[0]]
        if self.add_uv:
            if len(picture.planes) < 3:
                raise ValueError("float_motion: motion_add_uv needs a picture with chroma planes")
            planes += [picture.planes[1], picture.planes[2]]
        return [blur(p, self.bitdepth, self.taps) for p in planes]

    def _score_between(self, prev: list[np.ndarray], cur: list[np.ndarray]) -> float:
        score = sad_score(prev[0], cur[0])
        for a, b in zip(prev[1:], cur[1:]):
            score += sad_score(a, b)
        return score

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        if self.force_zero:
            return self.push_score(index, None)
        cur = self._planes(ref)
        prev, self._prev = self._prev, cur
        return self.push_score(index, None if index == 0 else self._score_between(prev, cur))

    def push_score(self, index: int, score: float | None) -> list[FrameScores]:
        """The temporal rules of ``float_motion.c``'s extract, given frame ``index``'s score.

        ``score`` is the mean absolute difference to the previous blurred frame
        (None for frame 0, and ignored with ``motion_force_zero``).  Shared with
        the GPU twin, which computes the scores on the device.
        """
        if self.force_zero:
            metrics = {"motion2": 0.0, "motion3": 0.0}
            if self.debug:
                metrics["motion"] = 0.0
            return [(index, metrics)]
        if index != self._last_index + 1:
            raise ValueError(f"float_motion expects frame {self._last_index + 1}, got {index}")
        self._last_index = index
        out: list[FrameScores] = []
        if index == 0:
            self._pending = {"motion2": 0.0}
            if self.debug:
                self._pending["motion"] = 0.0
            return out
        this = {"motion": self._weighted(score)} if self.debug else {}
        if index == 1:
            # frame 0's motion3 is frame 1's blended score
            self._pending["motion3"] = self._blended(score)
            out.append((0, self._pending))
        else:
            # frame i - 1: the smaller of its own score and frame i's
            prev_score = self._score
            score2 = prev_score if prev_score < score else score
            self._pending["motion2"] = self._weighted(score2)
            self._pending["motion3"] = self._blended(score2)
            out.append((index - 1, self._pending))
        self._pending = this
        self._score = score
        return out

    def flush(self) -> Iterable[FrameScores]:
        if self.force_zero or self._last_index < 0:
            return []
        last = self._last_index
        metrics = self._pending
        if last > 0:
            metrics["motion2"] = self._weighted(self._score)
            metrics["motion3"] = self._blended(self._score)
        else:
            metrics["motion3"] = 0.0
        self._pending, self._prev = {}, None
        return [(last, metrics)]


def _check(values: Mapping[str, Any]) -> None:
    if values.get("motion_add_scale1"):
        # libvmaf adds a bilinear half-size SAD; not reproduced here.
        raise OptionError("float_motion.motion_add_scale1", "not supported by vmafxd")


DECLARATION = FeatureDeclaration(
    name="float_motion",
    luma_only=True,
    provides=("motion2", "motion3"),
    debug_provides=("motion",),
    options=(
        debug_option(True),
        FORCE_ZERO_OPTION,
        FPS_WEIGHT_OPTION,
        BLEND_FACTOR_OPTION,
        BLEND_OFFSET_OPTION,
        Option("motion_add_scale1", bool, False, "add motion score from scale1 (not supported by vmafxd)",
               alias="mdc", feature_param=True),
        Option("motion_filter_size", int, 5, "filtering size (1: none, 3: 3-tap, otherwise 5-tap)",
               alias="mfs", min=0, max=9, feature_param=True),
        Option("motion_add_uv", bool, False, "include U and V terms", alias="mau", feature_param=True),
        MAX_VAL_OPTION,
    ),
    temporal=True,
    # frame i's motion2 needs frame i + 1's score
    max_lag=1,
    kernel="float_motion.cu",
    written_late={"motion3": "next"},
    gpu="float_motion",
    cpu=FloatMotion,
    help="float motion: mean absolute difference of blurred consecutive reference frames",
    validate=_check,
)
