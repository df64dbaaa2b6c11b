"""Integer PSNR (libvmaf's ``psnr`` extractor).

Per plane: the integer sum of squared errors between reference and distorted
samples, then ``10 * log10(peak^2 / MSE)`` capped at a per-plane maximum.
With the defaults the peak is ``(1 << bpc) - 1`` and the cap ``6 * bpc + 12``
dB (60 dB at 8 bits, 72 dB at 10), which is what identical frames score.

Layers
------
* :func:`compute_stats`: the per-plane int64 SSE (what a GPU kernel must
  produce; any reduction order gives the same integers).
* :func:`metrics_from_stats`: libvmaf's double arithmetic on those sums.
* :func:`apsnr_from_totals`: the whole-run "aggregate PSNR" libvmaf reports
  from its flush when ``enable_apsnr`` is set.
* :class:`IntegerPsnr`: the CPU twin.  Its :meth:`IntegerPsnr.aggregate`
  returns the APSNR values (an optional method beyond the extractor protocol).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .declaration import FeatureDeclaration, FrameScores, Option, PerFrameTwin, check_bitdepth
from ._c_math import c_log10, c_min

__all__ = [
    "DECLARATION",
    "IntegerPsnr",
    "PsnrParams",
    "apsnr_from_totals",
    "compute_stats",
    "metrics_from_stats",
    "columns_from_stats",
    "psnr_params",
]

PSNR_NAMES = ("psnr_y", "psnr_cb", "psnr_cr")
MSE_NAMES = ("mse_y", "mse_cb", "mse_cr")
APSNR_NAMES = ("apsnr_y", "apsnr_cb", "apsnr_cr")
#: bit depths libvmaf's integer PSNR accepts (anything else is an error there)
SUPPORTED_BITDEPTHS = (8, 10, 12, 16)

_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


def _c_ceil(x: float) -> float:
    """C's ``ceil`` on a double (math.ceil returns an int and rejects inf/NaN)."""
    return float(np.ceil(x))


# ---------------------------------------------------------------------------
# (a) per-plane integer sums
# ---------------------------------------------------------------------------


def _plane_sse(ref: np.ndarray, dist: np.ndarray) -> int:
    if ref.shape != dist.shape:
        raise ValueError(f"psnr: plane shapes differ: {ref.shape} vs {dist.shape}")
    if ref.dtype == np.uint8:
        # |e| <= 255, so e^2 <= 65025 fits uint16: take the absolute
        # difference in int16, square it in place as uint16, and let the
        # reduction widen to uint64 (numpy sums small unsigned ints in uint64).
        e = np.subtract(ref, dist, dtype=np.int16)
        # e * e wraps in int16 past 32767, but its 16 bits read as uint16 are
        # e^2 itself (at most 255^2 = 65025 < 2^16): no abs pass needed.
        np.multiply(e, e, out=e)
        sq = e.view(np.uint16)
        # Each row in uint32, wrapping as libvmaf's per-row ``sse_inner`` does
        # (integer_psnr.c, 8-bit path), then the rows in 64 bits: the same
        # number for every width, and a uint32 reduction is faster than a
        # uint64 one.
        return int(np.add.reduce(sq, axis=1, dtype=np.uint32).sum(dtype=np.uint64))
    # Up to 16 bits: e^2 < 2^32 per sample, so square in int64 and sum.
    e = np.subtract(ref, dist, dtype=np.int64)
    np.multiply(e, e, out=e)
    return int(e.sum())


def compute_stats(ref_planes: Sequence[np.ndarray], dist_planes: Sequence[np.ndarray]) -> np.ndarray:
    """The sum of squared errors of each plane pair, as an int64 array.

    Pass only the planes to score (luma alone when chroma is disabled).
    libvmaf accumulates each 8-bit row in 32 bits before adding it to a 64-bit
    total (which only differs from the plain sum past ~66,000 samples a row);
    so does this.
    """
    return np.array([_plane_sse(r, d) for r, d in zip(ref_planes, dist_planes)], dtype=np.int64)


# ---------------------------------------------------------------------------
# (b) libvmaf's double arithmetic
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PsnrParams:
    """What libvmaf fixes at init: the peak value and each plane's dB cap."""

    bitdepth: int
    peak: int
    psnr_max: tuple[float, ...]
    enable_mse: bool = False


def psnr_params(
    options: Mapping[str, Any], bitdepth: int, plane_shapes: Sequence[tuple[int, int]]
) -> PsnrParams:
    """The peak and per-plane caps for ``plane_shapes`` (``(height, width)`` each).

    ``reduced_hbd_peak`` scales 255 up (1020 at 10 bits) instead of using the
    full code range.  With ``min_sse`` > 0 the cap is the PSNR that SSE would
    give on that plane, rounded up to a whole dB; otherwise ``6 * bpc + 12``.
    """
    if options["reduced_hbd_peak"]:
        peak = 255 << (bitdepth - 8)
    else:
        peak = (1 << bitdepth) - 1
    min_sse = float(options["min_sse"])
    caps = []
    for h, w in plane_shapes:
        if min_sse != 0.0:
            mse = min_sse / float((w * h) & _U32)
            caps.append(_c_ceil(10.0 * c_log10(float((peak * peak) & _U32) / mse)))
        else:
            caps.append(float(6 * bitdepth + 12))
    return PsnrParams(bitdepth, peak, tuple(caps), bool(options["enable_mse"]))


def metrics_from_stats(
    sse: Sequence[int], plane_shapes: Sequence[tuple[int, int]], params: PsnrParams
) -> dict[str, float]:
    """``psnr_y/cb/cr`` (and ``mse_*`` when enabled) from per-plane SSE."""
    out: dict[str, float] = {}
    # peak^2 is an unsigned 32-bit product in C (it fits for bpc <= 16).
    peak_sq = float((params.peak * params.peak) & _U32)
    for p, (total, (h, w)) in enumerate(zip(sse, plane_shapes)):
        mse = float(int(total)) / float((w * h) & _U32)
        # The floor 1e-16 keeps log10 finite on identical planes; the cap
        # then decides the value.
        floor_mse = mse if mse > 1e-16 else 1e-16
        out[PSNR_NAMES[p]] = c_min(10.0 * c_log10(peak_sq / floor_mse), params.psnr_max[p])
        if params.enable_mse:
            out[MSE_NAMES[p]] = mse
    return out


def columns_from_stats(
    sse: np.ndarray, plane_shapes: Sequence[tuple[int, int]], params: PsnrParams
) -> dict[str, np.ndarray]:
    """:func:`metrics_from_stats` of N frames at once, from int64[N, planes] SSE: name -> float64[N].

    The same operations element by element: the int64 to double conversion,
    the divisions and the floor in double, C's ``log10`` per element (through
    :func:`c_log10`: numpy's vectorised log10 may differ in the last bit), then
    the cap as ``MIN``."""
    planes = len(plane_shapes)
    peak_sq = float((params.peak * params.peak) & _U32)
    pixels = np.array([float((w * h) & _U32) for h, w in plane_shapes])
    caps = np.array(params.psnr_max[:planes], dtype=np.float64)
    # [frame, plane], every plane at once: each element's operations are the scalar ones
    mse = sse[:, :planes].astype(np.float64) / pixels
    ratios = (peak_sq / np.where(mse > 1e-16, mse, 1e-16)).ravel()
    ratio = ratios.tolist()
    # c_log10 is math.log10 on positive input (every ratio here but a NaN's): called directly then
    log10 = math.log10 if (ratios > 0.0).all() else c_log10
    db = 10.0 * np.fromiter(map(log10, ratio), dtype=np.float64, count=len(ratio)).reshape(mse.shape)
    db = np.where(db < caps, db, caps)
    out: dict[str, np.ndarray] = {}
    for p in range(planes):
        out[PSNR_NAMES[p]] = db[:, p]
        if params.enable_mse:
            out[MSE_NAMES[p]] = mse[:, p]
    return out


def apsnr_from_totals(peak: int, sse_total: Sequence[int], pixels_total: Sequence[int]) -> dict[str, float]:
    """libvmaf's whole-run PSNR per plane from summed SSE and sample counts.

    Always three planes, as libvmaf writes them: a plane never scored (chroma
    disabled, 4:0:0) has 0 samples and 0 error, which libvmaf's arithmetic
    turns into -inf; this reproduces that rather than inventing a value.
    """
    out: dict[str, float] = {}
    peak_sq = (peak * peak) & _U32
    for p in range(3):
        sse = int(sse_total[p]) if p < len(sse_total) else 0
        n = int(pixels_total[p]) if p < len(pixels_total) else 0
        # Python floats follow C here: -inf - -inf is NaN, and NaN < x is false.
        apsnr = 10.0 * (c_log10(float(peak_sq)) + c_log10(float(n)) - c_log10(float(sse)))
        # C multiplies in uint64 (wrapping) before converting to double.
        limit = _c_ceil(10.0 * c_log10(float((peak_sq * n * 2) & _U64)))
        out[APSNR_NAMES[p]] = c_min(apsnr, limit)
    return out


# ---------------------------------------------------------------------------
# the CPU twin
# ---------------------------------------------------------------------------


class IntegerPsnr(PerFrameTwin):
    """CPU twin of libvmaf's integer ``psnr`` extractor."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        # Sessions pass resolved options; defaults fill in for partial mappings.
        options = DECLARATION.with_defaults(options)
        check_bitdepth("psnr", bitdepth, SUPPORTED_BITDEPTHS)
        self.options = dict(options)
        self.width = width
        self.height = height
        self.bitdepth = bitdepth
        self.enable_chroma = bool(options["enable_chroma"])
        self.enable_apsnr = bool(options["enable_apsnr"])
        # The plane sizes (hence min_sse's caps) come with the first picture.
        self.params: PsnrParams | None = None
        self._shapes: list[tuple[int, int]] = []
        self._sse_total = [0, 0, 0]
        self._pixels_total = [0, 0, 0]

    def _setup(self, picture: Any) -> None:
        planes = picture.planes
        if len(planes) == 1:
            self.enable_chroma = False  # 4:0:0: libvmaf turns chroma off
        # min_sse caps are computed for all three planes as libvmaf does, even
        # those not scored; only the scored ones are ever used.
        self._shapes = [p.shape for p in planes[: 3 if self.enable_chroma else 1]]
        self.params = psnr_params(self.options, self.bitdepth, [p.shape for p in planes])

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        if self.params is None:
            self._setup(ref)
        n = len(self._shapes)
        sse = self.sse(ref.planes[:n], dist.planes[:n])
        if self.enable_apsnr:
            for p, (h, w) in enumerate(self._shapes):
                self._sse_total[p] += int(sse[p])
                self._pixels_total[p] += (h * w) & _U32
        return [(index, metrics_from_stats(sse, self._shapes, self.params))]

    def sse(self, ref_planes: Sequence[np.ndarray], dist_planes: Sequence[np.ndarray]) -> np.ndarray:
        """The planes' sums of squared errors (:func:`compute_stats`; a native kernel overrides it)."""
        return compute_stats(ref_planes, dist_planes)

    def aggregate(self) -> dict[str, float]:
        """Whole-run metrics (``apsnr_*``) when ``enable_apsnr`` is set, else empty."""
        if not self.enable_apsnr:
            return {}
        peak = self.params.peak if self.params else (
            255 << (self.bitdepth - 8) if self.options["reduced_hbd_peak"] else (1 << self.bitdepth) - 1
        )
        return apsnr_from_totals(peak, self._sse_total, self._pixels_total)


DECLARATION = FeatureDeclaration(
    name="psnr",
    provides=PSNR_NAMES,
    option_provides=(("enable_mse", MSE_NAMES),),
    options=(
        Option("enable_chroma", bool, True, "enable calculation for chroma channels"),
        Option("enable_mse", bool, False, "enable MSE calculation"),
        Option("enable_apsnr", bool, False, "enable APSNR calculation"),
        Option("reduced_hbd_peak", bool, False,
               "reduce hbd peak value to align with scaled 8-bit content"),
        Option("min_sse", float, 0.0, "constrain the minimum possible sse",
               min=0.0, max=sys.float_info.max),
    ),
    temporal=False,
    kernel="psnr.cu",
    gpu="psnr",
    cpu=IntegerPsnr,
    help="integer PSNR per plane (peak (1 << bpc) - 1, capped at 6 * bpc + 12 dB)",
)
