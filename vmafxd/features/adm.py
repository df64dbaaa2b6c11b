"""Integer ADM (libvmaf's ``adm`` extractor): ``integer_adm2``, ``integer_aim``, ``integer_adm3``, per-scale ADM.

Two layers, so that a GPU kernel can share the second one:

* :func:`compute_stats` runs the per-pixel fixed-point pipeline (DWT,
  decouple, CSF, contrast masking, cubes) on a pair of luma planes and returns
  the 64-bit integer sums libvmaf accumulates (:class:`AdmStats`: per scale
  and band, the masked numerator, the denominator and the AIM numerator).
  libvmaf rounds and shifts each *row's* sum before adding rows, all in
  integers, so the per-band totals carry everything and the order in which
  rows or pixels are added does not matter.
* :func:`metrics_from_stats` does libvmaf's scalar float/double arithmetic on
  those 36 sums, in its order and precision (int64 to float or double, ``powf``
  cube roots in float, double sums over scales, the num/den division).

Only luma is scored.  The reference is libvmaf at f85a8536 as it runs on an
AVX-512 host (``feature/x86/adm_avx512.c``), which is what made the reference
numbers.  Its plain C path (``feature/integer_adm.c``) is the same except in
rare pixels, which matter on real content (p13, a sharpened clip, differs in
the last digits of ``integer_aim``); ``code_path="c"`` reproduces that path
instead.  The differences, all emulated per pixel in ``_adm_core``:

* the AVX-512 routines handle blocks of 16 columns (decouple, CSF; from the
  left edge of the region grown by the filter taps) or 14 / 6 columns
  (masking at scale 0 / 1-3) with vector code, the leftover columns at the
  right with C code (:func:`._adm_plan.vector_masks`); in vector columns
  - the masking threshold's own-pixel term is not stored as int16 first,
  - the CSF's 1/30 magnitude is taken before the int16 store,
  - the 1-degree test multiplies (|u|^2 |v|^2) cos^2 instead of
    (cos^2 |u|^2) |v|^2,
  - ``r * egl`` is rounded to nearest instead of truncated (non-integral
    ``adm_enhn_gain_limit`` only),
  - the Q32 CSF weights are multiplied as signed int32;
* the scale-0 ``h`` numerator sum is converted to float directly, not via
  double (in :func:`metrics_from_stats`);
* out-of-range float-to-uint32 weight conversions saturate (``vcvttsd2usi``)
  instead of wrapping (only for CSF weights >= 1, i.e. ``adm_csf_mode=1``).

Not reproduced: for frame widths of 33..520 whose halved width at some scale
is 16k+1 or 16k+2 (e.g. w = 32k+1..32k+4), libvmaf's AVX-512 DWT reads a few
values past its row buffer (partly uninitialised memory) for the last output
column, and for such narrow frames that column reaches the scored region;
libvmaf's result there is not a function of the input, so we keep the C
definition.  Wider frames are unaffected.
"""

from __future__ import annotations

import dataclasses

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from . import _adm_small
from ._adm_core import csf, decouple, den_sum, masked_sum
from ._adm_csf import ONE_THIRD_F, BlendUnsupported, powf, powf_array
from ._adm_plan import ScaleParams, factors_for, plan_for
from ._adm_dwt import dwt_s123, dwt_scale0
from .declaration import FeatureDeclaration, Option, OptionError, debug_option, gain_limit_option, per_frame

__all__ = ["DECLARATION", "AdmStats", "IntegerAdm", "compute_stats", "metrics_from_stats", "metrics_from_sums",
           "columns_from_sums", "BatchScorer", "check_options"]

DEFAULT_NORM_VIEW_DIST = 3.0
DEFAULT_REF_DISPLAY_HEIGHT = 1080
#: smallest frame side: below it libvmaf's DWT indices and shift amounts go out of range
MIN_SIDE = 33

OPTIONS = (
    debug_option(),
    Option("adm_csf_scale", float, 1.0, alias="scf", min=0.0, max=50.0, feature_param=True,
           help="scale coefficient for the horizontal & vertical direction terms of CSF"),
    Option("adm_csf_diag_scale", float, 1.0, alias="scfd", min=0.0, max=50.0, feature_param=True,
           help="scale coefficient for the diagonal direction term of CSF"),
    Option("adm_dlm_weight", float, 0.5, alias="dlmw", min=0.0, max=1.0, feature_param=True,
           help="linear weighting between DLM and AIM; 1 corresponds to DLM-only"),
    gain_limit_option("adm"),
    Option("adm_norm_view_dist", float, DEFAULT_NORM_VIEW_DIST, alias="nvd", min=0.75, max=24.0, feature_param=True,
           help="normalized viewing distance = viewing distance / ref display's physical height"),
    Option("adm_ref_display_height", int, DEFAULT_REF_DISPLAY_HEIGHT, alias="rdh", min=1, max=4320,
           feature_param=True, help="reference display height in pixels"),
    Option("adm_csf_mode", int, 0, alias="csf", min=0, max=3, feature_param=True,
           help="contrast sensitivity function (0 Watson, 1 Barten, 2 Barten-Watson blend, 3 blend MAE)"),
    Option("adm_noise_weight", float, 0.03125, alias="nw", min=0.0, max=1500.0, feature_param=True,
           help="noise weight"),
    Option("adm_skip_aim", bool, False, help="skip the calculation of AIM"),
    Option("adm_skip_scale0", bool, False, alias="ssz", feature_param=True, help="skip the calculation of scale 0"),
    Option("adm_min_val", float, 0.0, alias="min", min=0.0, max=1.0, feature_param=True,
           help="minimum value allowed; lower values will be clipped to this value"),
)

PROVIDES = (
    "integer_adm2", "integer_aim", "integer_adm3",
    "integer_adm_scale0", "integer_adm_scale1", "integer_adm_scale2", "integer_adm_scale3",
)
DEBUG_PROVIDES = (
    "integer_adm", "integer_adm_num", "integer_adm_den",
    "integer_adm_num_scale0", "integer_adm_den_scale0", "integer_adm_num_scale1", "integer_adm_den_scale1",
    "integer_adm_num_scale2", "integer_adm_den_scale2", "integer_adm_num_scale3", "integer_adm_den_scale3",
)


# --- options and per-geometry constants ---------------------------------------------


def check_options(options: Mapping[str, Any]) -> None:
    """Cross-option checks libvmaf makes at extraction time (raised here up front)."""
    nvd, rdh = options["adm_norm_view_dist"], options["adm_ref_display_height"]
    # The 16-bit scale-0 pipeline cannot represent angular frequencies below 1080 lines at 3H.
    if nvd * rdh < DEFAULT_NORM_VIEW_DIST * DEFAULT_REF_DISPLAY_HEIGHT:
        name = "adm_norm_view_dist" if nvd < DEFAULT_NORM_VIEW_DIST else "adm_ref_display_height"
        raise OptionError(
            f"adm.{name}",
            f"adm_norm_view_dist * adm_ref_display_height = {nvd * rdh:g} is below "
            f"{DEFAULT_NORM_VIEW_DIST:g} * {DEFAULT_REF_DISPLAY_HEIGHT} (libvmaf refuses it)",
        )
    try:
        factors_for(options)
    except BlendUnsupported as e:
        raise OptionError("adm.adm_csf_mode", str(e)) from None


def check_size(width: int, height: int) -> None:
    if width < MIN_SIDE or height < MIN_SIDE:
        raise ValueError(f"integer ADM needs frames of at least {MIN_SIDE}x{MIN_SIDE}, got {width}x{height}")


# --- layer (a): the integer pipeline ------------------------------------------------


@dataclass(frozen=True)
class AdmStats:
    """The integer sums of one frame: per scale (0..3) and band (h, v, d).

    ``num``: masked, CSF-weighted restored detail (the DLM numerator);
    ``den``: reference detail (the denominator); ``aim``: masked additive
    impairment.  Rows of skipped scale 0 / skipped AIM stay zero.
    """

    width: int
    height: int
    num: np.ndarray  # int64 (4, 3)
    den: np.ndarray  # int64 (4, 3)
    aim: np.ndarray  # int64 (4, 3)
    #: "avx512" (what libvmaf runs on an AVX-512 host; the reference) or "c" (its plain C path)
    code_path: str = "avx512"


#: samples of one strip of the scoring region: decouple, CSF and masking run
#: strip by strip so that their few dozen temporaries stay in cache
_STRIP_SAMPLES = 1 << 15


def _score_scale(bands, p: ScaleParams, wide: bool, egl: float, skip_aim: bool, simd: bool):
    """One scale's (num, den, aim) sums per band, over the region in strips of rows.

    Every stage is per pixel but masking, which reads the 3x3 neighbourhood: a
    strip is the region's rows ``y0 .. y1 - 1`` as a region of its own (same
    band, so the same edge mirroring), whose ring holds the neighbour rows above
    and below.  The sums are per row before they are added, so strips add up.
    """
    reg = p.region
    vec_ring = p.vec_ring if simd else None
    num, den, aim = np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, np.int64)
    step = max(1, _STRIP_SAMPLES // max(1, reg.right - reg.left))
    for y0 in range(reg.top, reg.bottom, step):
        sub = dataclasses.replace(reg, top=y0, bottom=min(reg.bottom, y0 + step))
        vec_region = p.vec_region if simd else None
        if vec_region is not None and vec_region.ndim == 2:
            vec_region = vec_region[y0 - reg.top:sub.bottom - reg.top]
        rows, cols = sub.ring
        ref = [bands[k][0] for k in "hvd"]
        o = [b[rows, cols] for b in ref]
        t = [bands[k][1][rows, cols] for k in "hvd"]
        restored, additive = decouple(o, t, wide, egl, vec_ring)
        den += den_sum(ref, sub, wide, p)
        csf_a, flt_a = csf(additive, p.irf, wide, vec_ring)
        num += masked_sum(restored, csf_a, flt_a, sub, wide, p, vec_region)
        if not skip_aim:
            # AIM swaps the roles: masking by the restored part, summing the additive part.
            csf_r, flt_r = csf(restored, p.irf, wide, vec_ring)
            aim += masked_sum(additive, csf_r, flt_r, sub, wide, p, vec_region)
    return num, den, aim


def compute_stats(
    ref_luma: np.ndarray, dist_luma: np.ndarray, bitdepth: int, options: Mapping[str, Any], code_path: str = "avx512"
) -> AdmStats:
    """The integer ADM sums of a pair of luma planes (uint8 at 8 bits, uint16 above).

    ``code_path`` picks which libvmaf routines to reproduce where they differ:
    ``"avx512"`` (the default: libvmaf on an AVX-512 host, which made the
    reference numbers) or ``"c"`` (its plain C code).
    """
    if code_path not in ("avx512", "c"):
        raise ValueError(f"unknown code path {code_path!r}")
    simd = code_path == "avx512"
    h, w = ref_luma.shape
    check_size(w, h)
    _, params = plan_for(w, h, options, simd)
    egl = float(options["adm_enhn_gain_limit"])
    skip0, skip_aim = bool(options["adm_skip_scale0"]), bool(options["adm_skip_aim"])
    num = np.zeros((4, 3), dtype=np.int64)
    den = np.zeros((4, 3), dtype=np.int64)
    aim = np.zeros((4, 3), dtype=np.int64)

    planes = np.stack((ref_luma, dist_luma))
    bands = dwt_scale0(planes, bitdepth, lo_only=skip0)
    if not skip0:
        num[0], den[0], aim[0] = _score_scale(bands, params[0], False, egl, skip_aim, simd)
    approx = bands["a"].astype(np.int32)
    for s in (1, 2, 3):
        bands = dwt_s123(approx, s)
        num[s], den[s], aim[s] = _score_scale(bands, params[s], True, egl, skip_aim, simd)
        approx = bands["a"]
    return AdmStats(w, h, num, den, aim, code_path)


# --- layer (b): libvmaf's float/double arithmetic -------------------------------------
#
# Vectorised over frames: every C operation is one numpy operation on a column
# of frames in the same precision (float32 arrays for C floats, float64 for
# doubles; IEEE arithmetic per element is the scalar arithmetic), and powf is
# glibc's per element (:func:`._adm_csf.powf_array`).  The constants that
# depend only on the geometry and the options (noise floors, shifts, CSF
# cubes) are computed once per (size, options) and kept.


def _pow2_u32(e: int) -> float:
    """``pow(2, e)`` where libvmaf computes ``e`` in uint32 (a negative ``e`` wraps to a huge one)."""
    return math.inf if e < 0 or e > 1023 else 2.0**e


@dataclass(frozen=True)
class _Consts:
    """The per-(size, options) constants of every scale, as arrays that broadcast over
    int64[N, 4, 3] sums (scale x band), so each C operation is one numpy operation on
    the whole batch: elementwise, with each element's own constant, as C does it."""

    noise: np.ndarray  # float32[4]: powf(area * noise_weight, 1/3) per scale
    num_div0: np.ndarray  # float64[3]: scale 0's double divisors per band
    num_div123: np.ndarray  # float32[3, 1]: scales 1..3's one float divisor each
    den_div: np.ndarray  # float64[4, 1]: per scale
    den_cube: np.ndarray  # float64[4, 3]: pow(factor, 3) per scale and band
    #: float32[kinds, 1, scales, 1]: the noise floor each root gets (num, den: the scale's;
    #: AIM: none), over the scales scored and the kinds computed (options adm_skip_*)
    floors: np.ndarray
    #: (skip0, skip_aim, simd) -> the scalar path's per-element constants (:mod:`._adm_small`)
    small: dict = field(default_factory=dict, compare=False)


#: batches of at most this many frames are scored by the scalar path (:mod:`._adm_small`: the
#: same bits), larger ones by the whole-array operations, whichever is cheaper
#: (at 1080p on a 2-core box: the scalar path 13 µs for one frame and 7 more a frame, the array
#: path 38 µs and about 2 more a frame)
SMALL_BATCH = 4


_CONSTS: dict = {}


def _consts(width: int, height: int, options: Mapping[str, Any]) -> _Consts:
    key = (width, height, tuple(sorted((k, v) for k, v in options.items() if k.startswith("adm_"))))
    got = _CONSTS.get(key)
    if got is not None:
        return got
    factors, params = plan_for(width, height, options)
    nw = float(options["adm_noise_weight"])
    noise, div123, den_div = [], [], []
    for s in range(4):
        p = params[s]
        noise.append(powf(p.region.area * nw, ONE_THIRD_F))
        if s == 0:
            base = (52, 52, 57)
            num_div0 = [_pow2_u32(base[b] - p.cub_shift[b] - p.row_shift) for b in range(3)]
            den_div.append(2.0 ** (18 - p.den_row_shift))
        else:
            e = (45, 39, 36)[s - 1] - p.cub_shift[0] - p.row_shift
            div123.append(np.float32(math.inf) if (e < 0 or e >= 128) else np.float32(2.0**e))
            den_div.append(_pow2_u32((32, 27, 23)[s - 1] - p.den_row_shift - p.den_cub_shift))
    scored = noise[1:] if options["adm_skip_scale0"] else noise
    kinds = [scored, scored] + ([] if options["adm_skip_aim"] else [[np.float32(0.0)] * len(scored)])
    got = _Consts(np.array(noise, dtype=np.float32), np.array(num_div0, dtype=np.float64),
                  np.array(div123, dtype=np.float32)[:, None], np.array(den_div, dtype=np.float64)[:, None],
                  np.array([[math.pow(float(f), 3) for f in factors[s]] for s in range(4)], dtype=np.float64),
                  np.array(kinds, dtype=np.float32)[:, None, :, None])
    if len(_CONSTS) > 64:
        _CONSTS.clear()
    _CONSTS[key] = got
    return got


def _num_terms(acc: np.ndarray, c: _Consts, simd: bool) -> np.ndarray:
    """float32[N, 4, 3]: the numerator bands (h, v, d) of every scale before their cube roots,
    from int64[N, 4, 3] sums."""
    out = np.empty(acc.shape, dtype=np.float32)
    # scale 0: int64 / double, then stored to float: rounded twice.  Except that
    # AVX-512 first converts the h sum to float (one rounding); the division by
    # a power of two is then exact.
    out[:, 0] = acc[:, 0].astype(np.float64) / c.num_div0
    if simd:
        out[:, 0, 0] = acc[:, 0, 0].astype(np.float32).astype(np.float64) / c.num_div0[0]
    # scales 1..3: int64 / float is a float division of the int64 rounded once to
    # float (an int64 array cast to float32 rounds once, like C; a Python int
    # through np.float32 would go through a double first).
    out[:, 1:] = acc[:, 1:].astype(np.float32) / c.num_div123
    return out


def _den_terms(acc: np.ndarray, c: _Consts) -> np.ndarray:
    """float32[N, 4, 3]: the denominator bands of every scale before their cube roots."""
    return ((acc.astype(np.float64) / c.den_div) * c.den_cube).astype(np.float32)


def metrics_from_sums(width: int, height: int, num: np.ndarray, den: np.ndarray, aim: np.ndarray,
                      options: Mapping[str, Any], code_path: str = "avx512") -> list[dict[str, float]]:
    """libvmaf's scores of N frames from their integer sums (int64[N, 4, 3] each), one dict per frame."""
    return per_frame(columns_from_sums(width, height, num, den, aim, options, code_path))


def columns_from_sums(width: int, height: int, num: np.ndarray, den: np.ndarray, aim: np.ndarray,
                      options: Mapping[str, Any], code_path: str = "avx512") -> dict[str, np.ndarray]:
    """:func:`metrics_from_sums` as columns: base metric name -> float64 array over the N frames."""
    c = _consts(width, height, options)
    return _columns(c, width, height, num, den, aim, options, code_path)


class BatchScorer:
    """:func:`columns_from_sums` for one size and set of options, its constants looked up once
    (a session's GPU twin calls it once per batch)."""

    def __init__(self, width: int, height: int, options: Mapping[str, Any], code_path: str = "avx512"):
        self.width, self.height, self.options, self.code_path = width, height, options, code_path
        self._consts = _consts(width, height, self.options)

    def __call__(self, num: np.ndarray, den: np.ndarray, aim: np.ndarray) -> dict[str, np.ndarray]:
        return _columns(self._consts, self.width, self.height, num, den, aim, self.options, self.code_path)

    def records(self, sums: np.ndarray) -> dict[str, np.ndarray]:
        """The same from int64[N, 3, 4, 3] sums (per frame num, den, aim: a GPU record's layout)."""
        return self(sums[:, 0], sums[:, 1], sums[:, 2])


def _columns(c: _Consts, width: int, height: int, num: np.ndarray, den: np.ndarray, aim: np.ndarray,
             options: Mapping[str, Any], code_path: str) -> dict[str, np.ndarray]:
    n = num.shape[0]
    if n <= SMALL_BATCH:
        sums = np.concatenate((num.reshape(n, 12), den.reshape(n, 12), aim.reshape(n, 12)), axis=1)
        got = _adm_small.columns(_adm_small.tables_for(c, options, code_path), width, height, sums, options)
        if got is not None:
            return got
    return _array_columns(c, width, height, num, den, aim, options, code_path)


def _array_columns(c: _Consts, width: int, height: int, num: np.ndarray, den: np.ndarray, aim: np.ndarray,
                   options: Mapping[str, Any], code_path: str) -> dict[str, np.ndarray]:
    """:func:`_columns` in whole-array operations (any batch; the scalar path's reference)."""
    skip0, skip_aim = bool(options["adm_skip_scale0"]), bool(options["adm_skip_aim"])
    simd = code_path == "avx512"
    n = num.shape[0]
    # Every band of every scale (num, den, aim) before its cube root in one float32 array,
    # so glibc's powf runs over the whole batch in one call (element by element, as C does).
    kinds = [_num_terms(num, c, simd), _den_terms(den, c)] + ([] if skip_aim else [_num_terms(aim, c, simd)])
    terms = np.stack(kinds)  # [kind, frame, scale, band]
    if skip0:
        terms = terms[:, :, 1:]
    roots = powf_array(terms.ravel(), ONE_THIRD_F).reshape(terms.shape)
    # each band's root plus the scale's noise floor (none for AIM), then h + v + d in float
    r = roots + c.floors
    sums = ((r[..., 0] + r[..., 1]) + r[..., 2]).astype(np.float64)  # [kind, frame, scale]
    if skip0:
        skipped = np.zeros((len(kinds), n, 1))
        skipped[1] = float(np.float32(1e-10))  # den
        sums = np.concatenate([skipped, sums], axis=2)
    # in double, scale by scale from 0.0, as C adds them (every kind at once)
    tot = np.zeros(sums.shape[:2])
    for s in range(4):
        tot += sums[:, :, s]
    tot_num, tot_den = tot[0], tot[1]
    tot_aim = np.zeros(n) if skip_aim else tot[2]

    limit = 1e-10 * (width * height) / (1920.0 * 1080.0)
    tot_num[tot_num < limit] = 0.0
    tot_den[tot_den < limit] = 0.0
    zero = tot_den == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        # libvmaf leaves the AIM score uninitialised when den is 0; 0 is our choice.
        score = np.where(zero, 1.0, tot_num / np.where(zero, 1.0, tot_den))
        score_aim = np.where(zero, 0.0, tot_aim / np.where(zero, 1.0, tot_den))
        per_scale = sums[0] / sums[1]  # [frame, scale]
    w = float(options["adm_dlm_weight"])
    adm3 = score * w + (1 - score_aim) * (1 - w)
    min_val = float(options["adm_min_val"])
    adm3 = np.where(adm3 > min_val, adm3, min_val)
    columns = {"integer_adm2": score, "integer_aim": score_aim, "integer_adm3": adm3}
    for s in range(4):
        columns[f"integer_adm_scale{s}"] = per_scale[:, s]
    if options.get("debug"):
        columns["integer_adm"] = score
        columns["integer_adm_num"] = tot_num
        columns["integer_adm_den"] = tot_den
        for s in range(4):
            columns[f"integer_adm_num_scale{s}"] = sums[0, :, s]
            columns[f"integer_adm_den_scale{s}"] = sums[1, :, s]
    return columns


def metrics_from_stats(stats: AdmStats, options: Mapping[str, Any]) -> dict[str, float]:
    """libvmaf's scores from one frame's integer sums (base metric names; debug ones with ``debug``)."""
    return metrics_from_sums(stats.width, stats.height, stats.num[None], stats.den[None], stats.aim[None],
                             options, stats.code_path)[0]


# --- the CPU twin ---------------------------------------------------------------------


class IntegerAdm:
    """CPU twin of libvmaf's integer ADM extractor."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.options = dict(options)
        check_options(self.options)
        check_size(width, height)
        if not 8 <= bitdepth <= 16:
            raise ValueError(f"integer ADM supports 8 to 16 bits per sample, got {bitdepth}")
        self.width, self.height, self.bitdepth = width, height, bitdepth

    def extract(self, index: int, ref, dist):
        stats = compute_stats(ref.planes[0], dist.planes[0], self.bitdepth, self.options)
        return [(index, metrics_from_stats(stats, self.options))]

    def flush(self):
        return []


DECLARATION = FeatureDeclaration(
    name="adm",
    luma_only=True,
    provides=PROVIDES,
    debug_provides=DEBUG_PROVIDES,
    options=OPTIONS,
    validate=check_options,
    temporal=False,
    kernel="adm.cu",
    gpu="adm",
    # the per-scale constants adm.cu reads, built from the CPU twin's plan (lanes/gpu/adm.py)
    kernel_params=(
        ("w", 1), ("h", 1), ("top", 1), ("bottom", 1), ("left", 1), ("right", 1),
        ("irf", 3),  # CSF weights h, v, d (uint16 narrow, uint32 wide)
        ("sub", 3),  # narrow threshold shifts
        ("sq_add", 3), ("sq_shift", 3), ("cub_add", 3), ("cub_shift", 3),
        ("row_add", 1), ("row_shift", 1), ("den_sq_add", 1), ("den_sq_shift", 1),
        ("den_cub_add", 1), ("den_cub_shift", 1), ("den_row_add", 1), ("den_row_shift", 1),
        ("vr_lo", 1), ("vr_hi", 1),  # AVX-512 vector columns of decouple and CSF: [lo, hi)
        # AVX-512 vector pixels of masking: columns [lo, hi) x rows [rlo, rhi)
        ("vg_lo", 1), ("vg_hi", 1), ("vg_rlo", 1), ("vg_rhi", 1),
        ("egl_int", 1),  # adm_enhn_gain_limit when integral, else -1
        ("egl_bits", 1),  # adm_enhn_gain_limit, double bits
        ("cos_bits", 1),  # cos^2(1 degree) as libvmaf has it (float widened), double bits
        ("skip_aim", 1),
    ),
    cpu=IntegerAdm,
    help="integer ADM (Additive Detail Metric: detail loss and additive impairment)",
)
