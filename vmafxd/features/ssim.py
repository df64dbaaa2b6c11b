"""Float SSIM (libvmaf's ``float_ssim`` extractor), luma only.

What libvmaf computes
---------------------
The luma plane becomes float32 in 8-bit range; unless ``scale`` says
otherwise, pictures whose shorter side is 384 pixels or more are first shrunk
by an integer factor ``round(min(w, h) / 256)`` (3 at 720p, 4 at 1080p) with a
box filter; then the mean of ``l * c * s`` over the valid region of the 11x11
Gaussian window is the score (see :mod:`._ssim_core`).  The mean is rounded
to float32 before it is reported, and so are the mean l, c and s that
``enable_lcs`` adds.

Layers as :mod:`._ssim_core` describes them: :func:`compute_stats` (box
decimation first) gives one :class:`ScaleSums`; :func:`metrics_from_stats`
rounds the means to float and converts to dB; :class:`FloatSsim` is the CPU twin.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ._ssim_core import (WINDOW, ScaleSums, SsimTwin, SsimWorkspace, db_cap, frame_metrics, mirror_borders,
                         ssim_options, staggered_empty, to_float, to_float_divisor)
from .declaration import FeatureDeclaration, Option

__all__ = [
    "BoxDecimator",
    "DECLARATION",
    "FloatSsim",
    "FloatSsimWorkspace",
    "ScaleSums",
    "box_decimate",
    "compute_stats",
    "db_cap",
    "decimated_size",
    "metrics_from_stats",
    "resolve_scale",
]

LCS_NAMES = ("float_ssim_l", "float_ssim_c", "float_ssim_s")


def resolve_scale(scale_option: int, width: int, height: int) -> int:
    """The decimation factor: the option when > 0, else libvmaf's automatic one.

    Automatic: ``min(w, h) / 256`` rounded half up, at least 1.
    """
    if scale_option > 0:
        return scale_option
    ratio = min(width, height) / 256.0  # exact, as the float32 division in C is
    whole = int(ratio)
    return max(1, whole + 1 if ratio - whole >= 0.5 else whole)


def decimated_size(width: int, height: int, factor: int) -> tuple[int, int]:
    """libvmaf's decimated size: ``n / factor``, plus one when ``n`` is odd.

    (Not a ceiling: 1280 / 3 gives 426, and an odd 641 / 3 gives 214.)
    """
    if factor <= 1:
        return width, height
    return width // factor + (width & 1), height // factor + (height & 1)


class BoxDecimator:
    """Shrinks pictures by ``factor`` with libvmaf's box low-pass into float32.

    Input: float32 pictures in 8-bit range, or raw uint8/uint16 samples with
    the ``divisor`` that :func:`to_float` would apply (folded into the
    weight, which gives the same float32 products since the divisors are
    powers of two).

    Output pixel ``(y, x)`` sums the ``factor x factor`` block that starts
    ``factor // 2`` samples above and left of ``(factor y, factor x)``, with
    mirrored borders.  libvmaf multiplies each sample by the float32 weight
    ``1 / factor^2`` and adds the products in double.  Here the products are
    formed once over the picture (float32, the same roundings), then added
    in double, first ``factor`` rows, then ``factor`` columns; those sums are
    exact, so the result is libvmaf's to the bit.
    """

    def __init__(self, height: int, width: int, factor: int):
        self.height, self.width, self.factor = height, width, factor
        self.out_w, self.out_h = decimated_size(width, height, factor)
        self.before = factor // 2
        # the products over every block: row i holds sample row i - before
        rows, cols = self.out_h * factor, self.out_w * factor
        self._weighted, self._row_sums, self._total = staggered_empty(
            ((rows, cols), np.float32), ((self.out_h, cols), np.float64), ((self.out_h, self.out_w), np.float64)
        )

    def __call__(self, samples: np.ndarray, divisor: float = 1.0, out: np.ndarray | None = None) -> np.ndarray:
        if samples.shape != (self.height, self.width):
            raise ValueError(f"decimator for {(self.height, self.width)}, given {samples.shape}")
        f, before = self.factor, self.before
        weight = np.float32(1.0) / np.float32(f * f) / np.float32(divisor)
        weighted = self._weighted
        rows, cols = weighted.shape
        inner_h, inner_w = min(self.height, rows - before), min(self.width, cols - before)
        np.multiply(
            samples[:inner_h, :inner_w], weight, out=weighted[before : before + inner_h, before : before + inner_w]
        )
        mirror_borders(weighted, before, self.height, self.width)
        row_sums = self._row_sums
        blocks = weighted.reshape(self.out_h, f, cols)
        np.copyto(row_sums, blocks[:, 0])
        for dy in range(1, f):
            row_sums += blocks[:, dy]
        total = self._total
        cells = row_sums.reshape(self.out_h, self.out_w, f)
        np.copyto(total, cells[:, :, 0])
        for dx in range(1, f):
            total += cells[:, :, dx]
        if out is None:
            return total.astype(np.float32)
        np.copyto(out, total, casting="same_kind")
        return out


def box_decimate(samples: np.ndarray, factor: int, divisor: float = 1.0) -> np.ndarray:
    """:class:`BoxDecimator` once."""
    return BoxDecimator(*samples.shape, factor)(samples, divisor)


class FloatSsimWorkspace:
    """Everything :func:`compute_stats` needs at one picture size, reused frame after frame."""

    def __init__(self, width: int, height: int, factor: int, exact: bool = True):
        self.factor = factor
        w, h = decimated_size(width, height, factor)
        (self.pictures,) = staggered_empty(((2, h, w), np.float32))
        self.box = BoxDecimator(height, width, factor) if factor > 1 else None
        self.ssim = SsimWorkspace(h, w, exact=exact)


def compute_stats(
    ref: np.ndarray, dist: np.ndarray, bitdepth: int, factor: int, workspace: FloatSsimWorkspace | None = None,
    *, exact: bool = True,
) -> ScaleSums:
    """The SSIM term sums of two luma planes (uint8/uint16 samples), after decimation by ``factor``.

    ``exact`` (when no workspace is given): libvmaf's double accumulation in
    the Gaussian passes, else the faster float32 formula.
    """
    if workspace is None:
        workspace = FloatSsimWorkspace(ref.shape[1], ref.shape[0], factor, exact)
    ref_f, dist_f = workspace.pictures
    if factor > 1:
        # straight from the samples: the divisor folds into the box weight
        divisor = to_float_divisor(bitdepth)
        workspace.box(ref, divisor, out=ref_f)
        workspace.box(dist, divisor, out=dist_f)
    else:
        to_float(ref, bitdepth, out=ref_f)
        to_float(dist, bitdepth, out=dist_f)
    return workspace.ssim.sums(ref_f, dist_f, with_lcs=True)


def metrics_from_stats(
    stats: ScaleSums, *, enable_lcs: bool = False, enable_db: bool = False, db_max: float = math.inf
) -> dict[str, float]:
    """``float_ssim`` (and the mean l, c, s) from the sums.

    Every mean is a double quotient rounded to float32, as libvmaf returns
    them from a float function; dB conversion then happens in double.
    """
    n = float(stats.pixels)
    terms = {name: float(np.float32(total / n))
             for name, total in zip(LCS_NAMES, (stats.l, stats.c, stats.s))} if enable_lcs else {}
    return frame_metrics("float_ssim", float(np.float32(stats.lcs / n)), terms, enable_db=enable_db, db_max=db_max)


class FloatSsim(SsimTwin):
    """CPU twin of libvmaf's ``float_ssim``."""

    metrics_from_stats = staticmethod(metrics_from_stats)

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        options = self._setup(DECLARATION, options, width, height, bitdepth)
        self.factor = resolve_scale(int(options["scale"]), width, height)
        w, h = decimated_size(width, height, self.factor)
        if w < WINDOW or h < WINDOW:
            raise ValueError(
                f"float_ssim: {width}x{height} decimated by {self.factor} is {w}x{h}, "
                f"smaller than the {WINDOW}x{WINDOW} window"
            )
        self.workspace = FloatSsimWorkspace(width, height, self.factor, bool(options["exact_filter"]))

    def _stats(self, ref: np.ndarray, dist: np.ndarray) -> ScaleSums:
        return compute_stats(ref, dist, self.bitdepth, self.factor, self.workspace)


DECLARATION = FeatureDeclaration(
    name="float_ssim",
    provides=("float_ssim",),
    # libvmaf emits the mean l, c and s terms with enable_lcs (these features have no debug option)
    option_provides=(("enable_lcs", LCS_NAMES),),
    options=ssim_options(
        "SSIM",
        Option("scale", int, 0, "decimation scale factor (0=auto, 1=no downscaling, 2-10=explicit)",
               min=0, max=10),
    ),
    temporal=False,
    kernel="ssim.cu",
    gpu="ssim",
    cpu=FloatSsim,
    help="float SSIM of luma (11x11 Gaussian window; auto-downscaled when the shorter side is 384 or more)",
)
