"""Float VIF: libvmaf's ``float_vif`` extractor (``vif_scale0`` .. ``vif_scale3`` and debug outputs).

libvmaf (``float_vif.c``, ``vif.c``'s ``compute_vif``, ``vif_tools.c``)
converts the luma planes to floats (``sample / scaler - 128``), then for each
of four scales: filters them with a normalised Gaussian of width
``2^(4 - s) + 1`` (times ``vif_kernelscale``), computes the local variances
and covariance, a per-pixel information ratio (``log2`` by libvmaf's own
polynomial approximation), and sums numerator and denominator in float, row
by row.  Between scales the pictures are filtered with the scale's Gaussian
and decimated by two.  Everything is in C ``float``; the reproduction is in
:mod:`._float_vif_core`.

Statistics: the eight float sums ``(num, den)`` per scale
(:func:`compute_stats`); scores: :func:`metrics_from_stats`, doubles as
libvmaf computes them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ._c_math import c_max
from ._float_common import to_float_plane
from ._float_vif_core import decimate, gaussian_filter, gaussian_of_width, scale_sums, valid_kernelscale
from .declaration import (FeatureDeclaration, FrameScores, Option, OptionError, PerFrameTwin,
                          debug_and_gain_limit_options)

__all__ = ["DECLARATION", "FloatVif", "compute_stats", "metrics_from_stats", "prescale"]

PROVIDES = ("vif_scale0", "vif_scale1", "vif_scale2", "vif_scale3")
DEBUG_PROVIDES = (
    "vif", "vif_num", "vif_den",
    "vif_num_scale0", "vif_den_scale0", "vif_num_scale1", "vif_den_scale1",
    "vif_num_scale2", "vif_den_scale2", "vif_num_scale3", "vif_den_scale3",
)


def prescale(plane: np.ndarray, factor: float) -> np.ndarray:
    """``vif_scale_frame_nearest_s``: nearest-neighbour resize by ``factor`` (a copy at 1.0)."""
    h, w = plane.shape
    sw, sh = int(w * factor + 0.5), int(h * factor + 0.5)
    if (sw, sh) == (w, h):
        return plane
    rx = np.float32(w) / np.float32(sw)
    ry = np.float32(h) / np.float32(sh)
    xs = (np.arange(sw, dtype=np.float32) * rx).astype(np.int64)
    ys = (np.arange(sh, dtype=np.float32) * ry).astype(np.int64)
    return np.ascontiguousarray(plane[ys][:, xs])


def compute_stats(ref: np.ndarray, dist: np.ndarray, options: Mapping[str, Any]) -> np.ndarray:
    """``float64[4, 2]``: each scale's float (num, den) sums; a skipped scale 0 is (0, 0).

    ``ref``/``dist`` are the float planes (after :func:`prescale`).
    """
    ks = float(options["vif_kernelscale"])
    egl = float(options["vif_enhn_gain_limit"])
    nsq = float(options["vif_sigma_nsq"])
    start = 1 if options["vif_skip_scale0"] else 0
    out = np.zeros((4, 2))
    for scale in range(start, 4):
        taps = gaussian_filter(scale, ks)
        if scale > 0:
            ref, dist = decimate(ref, dist, taps)
        num, den = scale_sums(ref, dist, taps, egl, nsq)
        out[scale] = (float(num), float(den))
    return out


def metrics_from_stats(stats: np.ndarray, options: Mapping[str, Any]) -> dict[str, float]:
    """``float_vif.c``'s outputs from the per-scale sums (double arithmetic, as libvmaf)."""
    skip0 = bool(options["vif_skip_scale0"])
    num = np.asarray(stats, np.float64)[:, 0].tolist()
    den = np.asarray(stats, np.float64)[:, 1].tolist()
    start = 1 if skip0 else 0
    score_num = 0.0
    score_den = 0.0
    for s in range(start, 4):
        score_num += num[s]
        score_den += den[s]
    score = 1.0 if score_den == 0.0 else score_num / score_den
    mins = (None, options["vif_scale1_min_val"], options["vif_scale2_min_val"], options["vif_scale3_min_val"])
    out = {"vif_scale0": 0.0 if skip0 else num[0] / den[0]}
    for s in (1, 2, 3):
        out[f"vif_scale{s}"] = c_max(num[s] / den[s], float(mins[s]))
    out["vif"] = score
    out["vif_num"] = score_num
    out["vif_den"] = score_den
    for s in range(4):
        if s == 0 and skip0:
            out["vif_num_scale0"], out["vif_den_scale0"] = 0.0, -1.0
        else:
            out[f"vif_num_scale{s}"], out[f"vif_den_scale{s}"] = num[s], den[s]
    return out


class FloatVif(PerFrameTwin):
    """CPU twin of libvmaf's ``float_vif`` (luma only)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.options = DECLARATION.with_defaults(options)
        _check(self.options)
        self.bitdepth = bitdepth
        self.factor = float(self.options["vif_prescale"])

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        r = prescale(to_float_plane(ref.luma, self.bitdepth), self.factor)
        d = prescale(to_float_plane(dist.luma, self.bitdepth), self.factor)
        stats = compute_stats(r, d, self.options)
        return [(index, metrics_from_stats(stats, self.options))]


def _check(values: Mapping[str, Any]) -> None:
    if not valid_kernelscale(values["vif_kernelscale"]):
        raise OptionError("float_vif.vif_kernelscale", f"{values['vif_kernelscale']!r} is not one of libvmaf's kernel scales")
    if values["vif_prescale_method"] != "nearest":
        if values["vif_prescale_method"] not in ("bilinear", "bicubic", "lanczos4"):
            raise OptionError("float_vif.vif_prescale_method",
                              f"{values['vif_prescale_method']!r}: expected nearest, bilinear, bicubic or lanczos4")
        raise OptionError("float_vif.vif_prescale_method", "only nearest is supported by vmafxd")


DECLARATION = FeatureDeclaration(
    name="float_vif",
    luma_only=True,
    provides=PROVIDES,
    debug_provides=DEBUG_PROVIDES,
    options=(
        *debug_and_gain_limit_options("vif"),
        Option("vif_kernelscale", float, 1.0, "scaling factor for the gaussian kernel",
               alias="ks", min=0.1, max=4.0, feature_param=True),
        Option("vif_prescale", float, 1.0, "scaling factor for the frame", alias="ps", min=0.1, max=4.0,
               feature_param=True),
        *(Option(f"vif_scale{s}_min_val", float, 0.0, "minimum value allowed; smaller values will be set to this value",
                 alias=f"s{s}miv", min=0.0, max=1.0, feature_param=True) for s in (1, 2, 3)),
        Option("vif_prescale_method", str, "nearest", "scaling method for the frame (vmafxd: nearest only)",
               alias="pm", feature_param=True),
        Option("vif_sigma_nsq", float, 2.0, "neural noise variance", alias="snsq", min=0.0, max=5.0,
               feature_param=True),
        Option("vif_skip_scale0", bool, False, "when set, skip scale 0 calculations", alias="ssclz",
               feature_param=True),
    ),
    kernel="float_vif.cu",
    # the filters of vif_kernelscale 1 (17, 9, 5 and 3 taps): the kernels compiled for those
    # widths take their taps from these tables (constant operands, no loads or registers)
    kernel_tables=tuple((f"float fv_gauss{n}[{n}]", gaussian_of_width(n)) for n in (17, 9, 5, 3)),
    gpu="float_vif",
    cpu=FloatVif,
    help="float VIF: visual information fidelity over four scales, in single precision",
    validate=_check,
)
