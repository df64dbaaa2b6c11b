"""Float ADM: libvmaf's ``float_adm`` extractor (``adm2``, ``aim``, ``adm3``, ``adm_scale0..3``, debug outputs).

libvmaf (``float_adm.c``, ``adm.c``'s ``compute_adm``, ``adm_tools.c``)
converts the luma planes to floats (``sample / scaler - 128``) and, over four
DWT scales, compares the detail the distorted picture keeps (DLM, ``adm2``)
and the detail it adds (AIM, ``aim``) after CSF weighting and contrast
masking.  Per scale it produces three float sums: the DLM numerator, the
denominator (from the reference alone) and the AIM numerator; the scores are
doubles made from them (:func:`metrics_from_stats`).  The per-scale
arithmetic is in :mod:`._float_adm_core`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from . import _float_adm_core as core
from ._float_common import to_float_plane
from .declaration import FeatureDeclaration, FrameScores, Option, PerFrameTwin, debug_and_gain_limit_options
from ._c_math import c_max, c_min

__all__ = ["DECLARATION", "FloatAdm", "compute_stats", "scale_sums", "metrics_from_stats", "MIN_SIDE"]

PROVIDES = ("adm2", "aim", "adm3", "adm_scale0", "adm_scale1", "adm_scale2", "adm_scale3")
DEBUG_PROVIDES = (
    "adm", "adm_num", "adm_den",
    "adm_num_scale0", "adm_den_scale0", "adm_num_scale1", "adm_den_scale1",
    "adm_num_scale2", "adm_den_scale2", "adm_num_scale3", "adm_den_scale3",
)
#: smallest side whose scale-3 bands are at least 2 samples (libvmaf reads outside smaller ones)
MIN_SIDE = 17


def compute_stats(ref: np.ndarray, dist: np.ndarray, options: Mapping[str, Any]) -> np.ndarray:
    """``float32[4, 9]``: per scale the float sums libvmaf's ``compute_adm`` takes p-th roots of.

    Columns: DLM numerator (h, v, d), denominator (h, v, d), AIM numerator
    (h, v, d).  A skipped scale 0 is zeros.  The GPU lanes produce the same
    record; :func:`scale_sums` finishes both.
    """
    egl = float(options["adm_enhn_gain_limit"])
    p = float(options["adm_p_norm"])
    bypass = bool(options["adm_bypass_cm"])
    out = np.zeros((4, 9), np.float32)
    for scale in range(4):
        if scale == 0 and options["adm_skip_scale0"]:
            ref = core.dwt2(ref, lo_only=True)[0]
            dist = core.dwt2(dist, lo_only=True)[0]
            continue
        rb = core.dwt2(ref)
        db = core.dwt2(dist)
        rf = core.rfactors(scale, options)
        r_parts, a_parts = core.decouple(rb, db, egl)
        csf_a, flt_a = core.csf(a_parts, rf)
        out[scale, 0:3] = core.cm_accumulators(r_parts, csf_a, flt_a, rf, p, bypass)
        out[scale, 3:6] = core.den_accumulators(rb, rf, p)
        csf_r, flt_r = core.csf(r_parts, rf)
        out[scale, 6:9] = core.cm_accumulators(a_parts, csf_r, flt_r, rf, p, bypass)
        ref, dist = rb[0], db[0]
    return out


def scale_sums(acc: np.ndarray, width: int, height: int, options: Mapping[str, Any]) -> np.ndarray:
    """``float64[4, 3]``: each scale's float (num, den, aim_num) from its accumulators."""
    return scale_sums_batch(np.asarray(acc)[None], width, height, options)[0]


def scale_sums_batch(accs: np.ndarray, width: int, height: int, options: Mapping[str, Any]) -> np.ndarray:
    """:func:`scale_sums` of many frames' records (``float32[n, 4, 9]``) at once: ``float64[n, 4, 3]``.

    ``core.finish`` per frame and sum, in arrays: every ``powf(acc, 1/p)`` in
    one element-wise pass, then ``(root + noise)`` of h, v, d added in float in
    that order, as finish adds them.
    """
    nw = float(options["adm_noise_weight"])
    p = float(options["adm_p_norm"])
    accs = np.asarray(accs, np.float32).reshape(-1, 4, 9)
    n = accs.shape[0]
    roots = core.powf_array(accs.ravel(), 1.0 / p).reshape(n, 4, 3, 3)  # [frame, scale, sum, angle]
    out = np.zeros((n, 4, 3))
    for scale, (w, h) in enumerate(core.band_sizes(width, height)):
        if scale == 0 and options["adm_skip_scale0"]:
            out[:, 0] = (0.0, float(np.float32(1e-10)), 0.0)  # libvmaf's den_scale = 1e-10 (a float)
            continue
        top, bottom, left, right = core.region(w, h)
        for k, weight in enumerate((nw, nw, 0.0)):  # num, den, aim_num (no noise)
            parts = roots[:, scale, k] + core.noise_constant(right - left, bottom - top, weight, p)
            out[:, scale, k] = (parts[:, 0] + parts[:, 1]) + parts[:, 2]
    return out


def metrics_from_stats(acc: np.ndarray, width: int, height: int, options: Mapping[str, Any]) -> dict[str, float]:
    """``compute_adm``'s totals and ``float_adm.c``'s outputs from :func:`compute_stats`'s record."""
    return metrics_from_scale_sums(scale_sums(acc, width, height, options), width, height, options)


def metrics_from_scale_sums(stats: np.ndarray, width: int, height: int,
                            options: Mapping[str, Any]) -> dict[str, float]:
    """The outputs from :func:`scale_sums`'s ``float64[4, 3]`` (double arithmetic, as libvmaf)."""
    stats = stats.tolist()
    limit = 1e-10 * (width * height) / (1920.0 * 1080.0)
    skip_aim = int(options["adm_skip_aim_scale"])
    num = den = aim_num = aim_den = 0.0
    for s in range(4):
        n, d, a = stats[s]
        num += n
        den += d
        if skip_aim != s:
            aim_den += d
            aim_num += a
    num = 0.0 if num < limit else num
    den = 0.0 if den < limit else den
    if den == 0.0:
        # libvmaf leaves aim uninitialised here; report the DLM-only reading
        score, aim = 1.0, 0.0
    else:
        aim = c_min(aim_num / aim_den, 1.0)
        score = num / den
    min_val = float(options["adm_min_val"])
    if options["adm_adm3_apply_hm"]:
        adm3 = c_max(2 * score * aim / (score + aim), min_val)
    else:
        w = float(options["adm_dlm_weight"])
        adm3 = c_max(score * w + (1 - aim) * (1 - w), min_val)
    out = {"adm2": score, "aim": aim, "adm3": adm3}
    for s in range(4):
        out[f"adm_scale{s}"] = stats[s][0] / stats[s][1]
    out["adm"] = score
    out["adm_num"] = num
    out["adm_den"] = den
    for s in range(4):
        out[f"adm_num_scale{s}"] = stats[s][0]
        out[f"adm_den_scale{s}"] = stats[s][1]
    return out


class FloatAdm(PerFrameTwin):
    """CPU twin of libvmaf's ``float_adm`` (luma only)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        if width < MIN_SIDE or height < MIN_SIDE:
            raise ValueError(f"float_adm needs frames of at least {MIN_SIDE}x{MIN_SIDE}, got {width}x{height}")
        self.options = DECLARATION.with_defaults(options)
        self.width, self.height, self.bitdepth = width, height, bitdepth

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        r = to_float_plane(ref.luma, self.bitdepth)
        d = to_float_plane(dist.luma, self.bitdepth)
        stats = compute_stats(r, d, self.options)
        return [(index, metrics_from_stats(stats, self.width, self.height, self.options))]


def _factor(name: str, help_: str) -> Option:
    return Option(name, float, -1.0, help_, alias=name[4:], min=-1.0, max=10.0, feature_param=True)


DECLARATION = FeatureDeclaration(
    name="float_adm",
    luma_only=True,
    provides=PROVIDES,
    debug_provides=DEBUG_PROVIDES,
    options=(
        *debug_and_gain_limit_options("adm"),
        Option("adm_norm_view_dist", float, 3.0,
               "normalized viewing distance = viewing distance / ref display's physical height",
               alias="nvd", min=0.75, max=24.0, feature_param=True),
        Option("adm_noise_weight", float, 0.03125, "noise weight", alias="nw", min=0.0, max=1500.0,
               feature_param=True),
        Option("adm_csf_scale", float, 1.0, "scale factor for the CSF", alias="scf", min=0.0, max=50.0,
               feature_param=True),
        Option("adm_csf_diag_scale", float, 1.0, "scale factor for the CSF diag", alias="scfd", min=0.0,
               max=50.0, feature_param=True),
        Option("adm_ref_display_height", int, 1080, "reference display height in pixels", alias="rdf",
               min=1, max=4320, feature_param=True),
        Option("adm_csf_mode", int, 0, "contrast sensitivity function (0 Watson, 1 Barten, 2 ADM native)",
               alias="csf", min=0, max=9, feature_param=True),
        Option("adm_bypass_cm", int, 0, "bypass contrast masking (CM)", alias="bcm", min=0, max=1,
               feature_param=True),
        Option("adm_adm3_apply_hm", bool, False, "apply harmonic mean to combine DLM and AIM", alias="aah",
               feature_param=True),
        Option("adm_p_norm", float, 3.0, "p-norm for energy vector", alias="apn", min=1.0, max=20.0,
               feature_param=True),
        Option("adm_dlm_weight", float, 0.5, "linear weighting between DLM and AIM; 1 corresponds to DLM-only",
               alias="dlmw", min=0.0, max=1.0, feature_param=True),
        Option("adm_min_val", float, 0.0, "minimum value allowed; lower values will be clipped to this value",
               alias="min", min=0.0, max=1.0, feature_param=True),
        _factor("adm_f1s0", "factor1 scale0"), _factor("adm_f1s1", "factor1 scale1"),
        _factor("adm_f1s2", "factor1 scale2"), _factor("adm_f1s3", "factor1 scale3"),
        _factor("adm_f2s0", "factor2 scale0"), _factor("adm_f2s1", "factor2 scale1"),
        _factor("adm_f2s2", "factor2 scale2"), _factor("adm_f2s3", "factor2 scale3"),
        # libvmaf's default -1 lies outside its own bounds [0, 3]: only a given value is bounded
        Option("adm_skip_aim_scale", int, -1, "when set, skip AIM calculations for that scale", alias="sasc",
               min=0, max=3, feature_param=True),
        Option("adm_skip_scale0", bool, False, "skip the calculation of scale 0", alias="ssz", feature_param=True),
    ),
    kernel="float_adm.cu",
    gpu="float_adm",
    cpu=FloatAdm,
    help="float ADM: detail loss and additive impairment over four DWT scales, in single precision",
)
