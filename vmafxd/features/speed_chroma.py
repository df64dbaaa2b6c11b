"""SpEED on chroma: libvmaf's ``speed_chroma`` extractor (``speed.c``), as the v1.0.16 models use it.

For each of Cb and Cr (at the chroma plane's size: half width and height
for 4:2:0), the SpEED score of reference against distorted
(:mod:`._speed_core`); ``speed_chroma_uv`` is their mean, or the one channel
whose covariance matrix was not singular when the other's was.  All three
are clipped to ``speed_max_val``.  4:0:0 pictures are refused, as libvmaf
refuses them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ._float_common import FLOAT_BITDEPTHS, to_float_plane
from ._speed_core import check_common, common_options, extract_scores, geometry
from .declaration import FeatureDeclaration, FrameScores, Option, PerFrameTwin, check_bitdepth, check_chroma

__all__ = ["DECLARATION", "SpeedChroma", "metrics_from_scores"]

PROVIDES = ("speed_chroma_u", "speed_chroma_v", "speed_chroma_uv")


def metrics_from_scores(score_u: np.float32, err_u: bool, score_v: np.float32, err_v: bool,
                        max_val: float) -> dict[str, float]:
    """``extract_chroma``'s outputs: a singular channel's score is imputed from the other's."""
    if err_u and not err_v:
        uv = score_v
    elif err_v and not err_u:
        uv = score_u
    else:
        uv = np.float32((float(score_u) + float(score_v)) / 2.0)
    # speed.c's MIN(x, y) is ``x < y ? x : y``: the bound replaces a NaN score too
    return {name: float(v) if float(v) < max_val else max_val
            for name, v in zip(PROVIDES, (score_u, score_v, uv))}


class SpeedChroma(PerFrameTwin):
    """CPU twin of libvmaf's ``speed_chroma``."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.options = DECLARATION.with_defaults(options)
        check_common("speed_chroma", self.options)
        check_bitdepth("speed_chroma", bitdepth, FLOAT_BITDEPTHS)
        self.bitdepth = bitdepth
        self.geometry = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        check_chroma("speed_chroma", len(ref.planes))
        if self.geometry is None:
            ch, cw = ref.planes[1].shape
            self.geometry = geometry(cw, ch, float(self.options["speed_prescale"]))
        mode = int(self.options["speed_weight_var_mode"])
        pairs = [(to_float_plane(ref.planes[p], self.bitdepth), to_float_plane(dist.planes[p], self.bitdepth))
                 for p in (1, 2)]
        (su, eu), (sv, ev) = extract_scores(pairs, self.geometry, self.options, mode)
        return [(index, metrics_from_scores(su, eu, sv, ev, float(self.options["speed_max_val"])))]


def _check(values: Mapping[str, Any]) -> None:
    check_common("speed_chroma", values)


DECLARATION = FeatureDeclaration(
    name="speed_chroma",
    provides=PROVIDES,
    options=(
        *common_options(),
        Option("speed_weight_var_mode", int, 0, "different approaches to perform variance-based weighting",
               alias="wvm", min=0, max=6, feature_param=True),
    ),
    kernel="speed.cu",
    gpu="speed",
    cpu=SpeedChroma,
    help="SpEED on Cb and Cr: entropy differences of the chroma planes at 1/16 scale",
    validate=_check,
)
