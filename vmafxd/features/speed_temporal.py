"""SpEED across time: libvmaf's ``speed_temporal`` extractor (``speed.c``).

Frame *i*'s score is the SpEED score (:mod:`._speed_core`) of the reference's
luma difference ``ref[i - 1] - ref[i]`` against the distorted one's
``dis[i - 1] - dis[i]`` (``ref[i - 1] - ref[i]`` is replaced by
``dis[i - 1] - ref[i]`` with ``speed_use_ref_diff``); frame 0 scores 0.
The score is final with its own frame (the previous pictures are kept).

libvmaf's quirks, kept: the score is not clipped to ``speed_max_val`` (the
option exists and renames the output, nothing more) and the variance
weighting is always mode 0 (the temporal extractor never sets it).  One is
refused: a ``speed_prescale`` above 1 makes libvmaf resize into frame
buffers allocated at the unscaled height, writing past them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ._float_common import FLOAT_BITDEPTHS, to_float_plane
from ._speed_core import almost_one, check_common, common_options, extract_scores, geometry
from .declaration import FeatureDeclaration, FrameScores, Option, OptionError, PerFrameTwin, check_bitdepth

__all__ = ["DECLARATION", "SpeedTemporal"]


class SpeedTemporal(PerFrameTwin):
    """CPU twin of libvmaf's ``speed_temporal`` (luma)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.options = DECLARATION.with_defaults(options)
        _check(self.options)
        check_bitdepth("speed_temporal", bitdepth, FLOAT_BITDEPTHS)
        self.bitdepth = bitdepth
        self.geometry = geometry(width, height, float(self.options["speed_prescale"]))
        self._previous: tuple[np.ndarray, np.ndarray] | None = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        r = to_float_plane(ref.luma, self.bitdepth)
        d = to_float_plane(dist.luma, self.bitdepth)
        previous, self._previous = self._previous, (r, d)
        if index == 0 or previous is None:
            return [(index, {"speed_temporal": 0.0})]
        pr, pd = previous
        rdiff = pr - r
        ddiff = pd - (r if self.options["speed_use_ref_diff"] else d)
        ((score, _),) = extract_scores([(rdiff, ddiff)], self.geometry, self.options)
        return [(index, {"speed_temporal": float(score)})]


def _check(values: Mapping[str, Any]) -> None:
    check_common("speed_temporal", values)
    ps = float(values["speed_prescale"])
    if ps > 1.0 and not almost_one(ps):
        raise OptionError("speed_temporal.speed_prescale",
                          f"{ps!r}: above 1 libvmaf writes the resized picture past its frame buffers")


DECLARATION = FeatureDeclaration(
    name="speed_temporal",
    provides=("speed_temporal",),
    options=(
        *common_options(),
        Option("speed_use_ref_diff", bool, False,
               "compare the distorted frame difference with the reference's current frame", alias="urd",
               feature_param=True),
    ),
    temporal=True,
    kernel="speed.cu",
    gpu="speed",
    cpu=SpeedTemporal,
    help="SpEED across time: entropy differences of consecutive luma differences at 1/16 scale",
    validate=_check,
)
