"""Float MS-SSIM (libvmaf's ``float_ms_ssim`` extractor), luma only.

What libvmaf computes
---------------------
Wang's five-scale MS-SSIM.  The float32 luma (8-bit range, see
:mod:`._ssim_core`) is the first scale; each next scale is the previous one
low-passed with a 9x9 filter (the 9/7 biorthogonal wavelet's low-pass, taken
as a full 2-D table) and subsampled by two, to ``n / 2`` plus one when ``n``
is odd.  Every scale gets the same single-scale SSIM machinery as
``float_ssim`` (11x11 Gaussian window, valid region); its mean l, c and s,
each rounded to float32, enter the product

    MS-SSIM = prod_i  l_i^alpha_i * c_i^beta_i * s_i^gamma_i

in double, with alpha = (0, 0, 0, 0, 0.1333) and beta = gamma =
(0.0448, 0.2856, 0.3001, 0.2363, 0.1333) (float32 constants).  libvmaf
refuses pictures that would fall below the window size within five halvings
(at least 176 pixels each way).

Layers as :mod:`._ssim_core` describes them: :func:`compute_stats` gives
five :class:`ScaleSums`; :func:`metrics_from_stats` takes the means, powers
and product, and dB; :class:`FloatMsSsim` is the CPU twin.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ._ssim_core import (WINDOW, ScaleSums, SsimTwin, SsimWorkspace, c_pow, frame_metrics, mirror_borders,
                         ssim_options, staggered_empty, to_float)
from .declaration import FeatureDeclaration

__all__ = [
    "ALPHAS",
    "BETAS",
    "DECLARATION",
    "FloatMsSsim",
    "GAMMAS",
    "LOW_PASS",
    "LowPassDecimator",
    "MsSsimWorkspace",
    "SCALES",
    "ScaleSums",
    "check_size",
    "compute_stats",
    "low_pass_decimate",
    "metrics_from_stats",
    "scale_sizes",
]

SCALES = 5
_F32 = np.float32

#: per-scale exponents, float32 in libvmaf (their double values are used)
ALPHAS = tuple(float(_F32(a)) for a in (0.0, 0.0, 0.0, 0.0, 0.1333))
BETAS = tuple(float(_F32(b)) for b in (0.0448, 0.2856, 0.3001, 0.2363, 0.1333))
GAMMAS = BETAS

#: the 9x9 low-pass libvmaf decimates with, a 2-D table rounded to 6 decimals
#: (so *not* exactly the outer product of its 1-D taps; the table is what it uses)
LOW_PASS = np.array(
    [
        [0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714],
        [-0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450],
        [-0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090],
        [0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132],
        [0.016114, -0.010146, -0.047149, 0.160885, 0.363505, 0.160885, -0.047149, -0.010146, 0.016114],
        [0.007132, -0.004490, -0.020867, 0.071207, 0.160885, 0.071207, -0.020867, -0.004490, 0.007132],
        [-0.002090, 0.001316, 0.006115, -0.020867, -0.047149, -0.020867, 0.006115, 0.001316, -0.002090],
        [-0.000450, 0.000283, 0.001316, -0.004490, -0.010146, -0.004490, 0.001316, 0.000283, -0.000450],
        [0.000714, -0.000450, -0.002090, 0.007132, 0.016114, 0.007132, -0.002090, -0.000450, 0.000714],
    ],
    dtype=_F32,
)
_LP_HALF = LOW_PASS.shape[0] // 2
#: bytes of the double row sums per decimation tile (keeps them in cache)
_DECIMATE_TILE_BYTES = 1_000_000

LCS_NAMES = tuple(f"float_ms_ssim_{term}_scale{i}" for term in "lcs" for i in range(SCALES))


def check_size(width: int, height: int) -> None:
    """Refuse sizes libvmaf refuses: each of five halvings must leave 11x11 or more.

    (libvmaf checks with plain halving, ``n / 2``, even though its scales
    round odd sizes up.)
    """
    w, h = width, height
    for _ in range(SCALES):
        if w < WINDOW or h < WINDOW:
            raise ValueError(
                f"float_ms_ssim: {width}x{height} is too small for {SCALES} scales "
                f"of the {WINDOW}x{WINDOW} window (at least {WINDOW << (SCALES - 1)} pixels each way)"
            )
        w //= 2
        h //= 2


def scale_sizes(width: int, height: int) -> list[tuple[int, int]]:
    """``(height, width)`` of each scale: halved, rounding odd sizes up."""
    sizes = []
    for _ in range(SCALES):
        sizes.append((height, width))
        width, height = width // 2 + (width & 1), height // 2 + (height & 1)
    return sizes


class LowPassDecimator:
    """Filters stacked float32 pictures (``(n, h, w)``) with :data:`LOW_PASS` and keeps every other sample.

    Output ``(y, x)`` is the 9x9 table applied around ``(2y, 2x)`` with
    mirrored borders, in libvmaf's exact arithmetic: each product is a
    float32 (table entry times sample) and the 81 products are summed in
    double, then rounded to float32.  The double sums are exact for picture
    data, so the order of the additions does not matter and the result is
    bit for bit libvmaf's.

    Done cheaply thanks to symmetry: the table has 25 distinct entries
    (``|dy|, |dx| <= 4``), and the samples one entry meets all share a row
    parity and a column parity.  So the padded picture is split into its four
    parity grids, each entry multiplies the matching grid once (float32), and
    every tap is a shifted view of one of those 25 product arrays.  Taps are
    added in double: first the +-dx pairs along rows, then the +-dy pairs.
    Output rows go in tiles so the double accumulators stay in cache.  The
    buffers are kept for the next frame; the result is one of them.
    """

    def __init__(self, count: int, height: int, width: int):
        r = _LP_HALF
        self.shape = (count, height, width)
        self.out_h, self.out_w = height // 2 + (height & 1), width // 2 + (width & 1)
        grid = (count, self.out_h + r, self.out_w + r)
        self.tile = max(4, min(self.out_h, _DECIMATE_TILE_BYTES // (count * self.out_w * 8)))
        bufs = staggered_empty(
            # r mirrored samples before the picture and r + 1 after, so that
            # each parity grid has out + r rows and columns
            ((count, height + 2 * r + 1, width + 2 * r + 1), _F32),
            *[(grid, _F32)] * 4,
            ((count, self.tile + r, self.out_w + r), _F32),
            ((count, self.tile + r, self.out_w), np.float64),
            ((count, self.tile, self.out_w), np.float64),
            ((count, self.out_h, self.out_w), _F32),
        )
        self._padded = bufs[0]
        self._grids = {(py, px): g for (py, px), g in zip([(0, 0), (0, 1), (1, 0), (1, 1)], bufs[1:5])}
        self._products, self._row_sums, self._total, self._out = bufs[5:]

    def __call__(self, pictures: np.ndarray) -> np.ndarray:
        if pictures.shape != self.shape:
            raise ValueError(f"decimator for {self.shape}, given {pictures.shape}")
        r = _LP_HALF
        n, h, w = self.shape
        out_h, out_w = self.out_h, self.out_w
        self._padded[:, r : r + h, r : r + w] = pictures
        mirror_borders(self._padded, r, h, w)
        for (py, px), grid in self._grids.items():
            grid[...] = self._padded[:, py::2, px::2][:, : out_h + r, : out_w + r]
        for y0 in range(0, out_h, self.tile):
            t = min(self.tile, out_h - y0)
            prod, rows, acc = self._products[:, : t + r], self._row_sums[:, : t + r], self._total[:, :t]
            acc.fill(0.0)
            for dy in range(r + 1):
                # rows: every (dy, +-dx) tap, still at grid row offsets
                first = True
                for dx in range(r + 1):
                    np.multiply(self._grids[dy & 1, dx & 1][:, y0 : y0 + t + r], LOW_PASS[r + dy, r + dx], out=prod)
                    # the tap at column offset +-dx reads grid column x + (r +- dx) // 2
                    for ox in {(r + dx) // 2, (r - dx) // 2}:
                        if first:
                            rows[...] = prod[:, :, ox : ox + out_w]
                            first = False
                        else:
                            np.add(rows, prod[:, :, ox : ox + out_w], out=rows)
                for oy in {(r + dy) // 2, (r - dy) // 2}:
                    acc += rows[:, oy : oy + t]
            self._out[:, y0 : y0 + t] = acc
        return self._out


def low_pass_decimate(pictures: np.ndarray) -> np.ndarray:
    """:class:`LowPassDecimator` once: a new array of the decimated pictures."""
    return LowPassDecimator(*pictures.shape)(pictures).copy()


class MsSsimWorkspace:
    """Everything :func:`compute_stats` needs at one picture size, reused frame after frame."""

    def __init__(self, width: int, height: int, exact: bool = True):
        sizes = scale_sizes(width, height)
        (self.pictures,) = staggered_empty(((2, height, width), _F32))
        self.ssim = [SsimWorkspace(h, w, exact=exact) for h, w in sizes]
        self.decimators = [LowPassDecimator(2, h, w) for h, w in sizes[:-1]]


def compute_stats(
    ref: np.ndarray, dist: np.ndarray, bitdepth: int, workspace: MsSsimWorkspace | None = None,
    *, exact: bool = True,
) -> tuple[ScaleSums, ...]:
    """The SSIM term sums of every scale of two luma planes (uint8/uint16 samples).

    ``exact`` (when no workspace is given): see :func:`.ssim.compute_stats`.
    """
    if workspace is None:
        workspace = MsSsimWorkspace(ref.shape[1], ref.shape[0], exact)
    pictures = workspace.pictures
    to_float(ref, bitdepth, out=pictures[0])
    to_float(dist, bitdepth, out=pictures[1])
    sums = []
    for i in range(SCALES):
        if i:
            pictures = workspace.decimators[i - 1](pictures)
        sums.append(workspace.ssim[i].sums(pictures[0], pictures[1], with_lcs=False))
    return tuple(sums)


def metrics_from_stats(
    stats: Sequence[ScaleSums], *, enable_lcs: bool = False, enable_db: bool = False, db_max: float = math.inf
) -> dict[str, float]:
    """``float_ms_ssim`` (and each scale's mean l, c, s) from the per-scale sums."""
    score = 1.0
    means = []
    for i, sums in enumerate(stats):
        n = float(sums.pixels)
        # each mean is a double quotient rounded to float32, as libvmaf returns it
        l, c, s = (float(np.float32(total / n)) for total in (sums.l, sums.c, sums.s))
        means.append((l, c, s))
        score *= c_pow(l, ALPHAS[i]) * c_pow(c, BETAS[i]) * c_pow(s, GAMMAS[i])
    terms = {f"float_ms_ssim_{term}_scale{i}": m[t]
             for t, term in enumerate("lcs") for i, m in enumerate(means)} if enable_lcs else {}
    return frame_metrics("float_ms_ssim", score, terms, enable_db=enable_db, db_max=db_max)


class FloatMsSsim(SsimTwin):
    """CPU twin of libvmaf's ``float_ms_ssim``."""

    metrics_from_stats = staticmethod(metrics_from_stats)

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        options = self._setup(DECLARATION, options, width, height, bitdepth)
        check_size(width, height)
        self.workspace = MsSsimWorkspace(width, height, bool(options["exact_filter"]))

    def _stats(self, ref: np.ndarray, dist: np.ndarray) -> tuple[ScaleSums, ...]:
        return compute_stats(ref, dist, self.bitdepth, self.workspace)


DECLARATION = FeatureDeclaration(
    name="float_ms_ssim",
    provides=("float_ms_ssim",),
    # libvmaf emits the mean l, c and s terms with enable_lcs (these features have no debug option)
    option_provides=(("enable_lcs", LCS_NAMES),),
    options=ssim_options("MS-SSIM"),
    temporal=False,
    kernel="ssim.cu",
    gpu="ssim",
    cpu=FloatMsSsim,
    help="float multi-scale SSIM of luma (5 scales, Wang's weights)",
)
