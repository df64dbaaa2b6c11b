"""The single-scale SSIM core that ``float_ssim`` and ``float_ms_ssim`` share.

libvmaf computes both features with the same routine (its IQA library's
``_iqa_ssim``, default arguments) on float pictures in the 8-bit range:

1. samples become float32, high bit depths divided down to 8-bit range
   (:func:`to_float`), so ``L = 255`` at every bit depth;
2. the reference, the distorted picture, their squares and their product are
   filtered with an 11x11 Gaussian window (sigma 1.5, applied as two 1-D
   passes) over the *valid* region only: the maps are 10 pixels smaller in
   each direction and no border is invented;
3. each pixel gets luminance ``l``, contrast ``c`` and structure ``s`` terms,
   and the sums of ``l``, ``c``, ``s`` and ``l*c*s`` over the map are what
   the two features reduce (:class:`ScaleSums`).

Both feature modules have the same layers: ``compute_stats``, the per-pixel
float32 pipeline (conversion, decimation, windowed moments, SSIM terms) down
to :class:`ScaleSums`, which a GPU kernel produces too; ``metrics_from_stats``,
the means and dB; and the CPU twin, an :class:`SsimTwin`.

Precision
---------
libvmaf filters with float32 products summed in double and rounded to float
after each pass.  Summing in double is four times slower in numpy, so the
passes here run in float32 with two tricks that keep them within an ulp or
two of libvmaf's values:

* symmetric taps are folded (``x[c-i] + x[c+i]``), which is exact for the
  integer-valued first pass;
* each output is computed as the centre sample plus a small correction
  (``sum(k_i * (x_i - x_c)) + x_c * (sum(k) - 1)``), so the float32 partial
  sums stay small and are nearly exact where the picture is flat.  Flat areas
  matter most: there the variances are differences of two large, nearly equal
  numbers, and a larger rounding error in either would bias ``c`` and ``s``.

The per-pixel terms follow libvmaf's mix of float and double exactly (which
parts are float32 is noted at each step), and the sums are double.

Speed
-----
:class:`SsimWorkspace` keeps every buffer between frames and works in row
tiles; the horizontal pass treats a tile as one long 1-D signal (see there).
Buffers come from :func:`staggered_empty`, which keeps them from aliasing in
the cache; with plain ``np.empty`` the same code ran up to 1.7 times slower
depending on where the allocator happened to put the arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from .declaration import FrameScores, Option, PerFrameTwin, check_bitdepth

__all__ = [
    "frame_metrics",
    "EXACT_FILTER_OPTION",
    "C1",
    "C2",
    "C3",
    "GAUSSIAN_TAPS",
    "SUPPORTED_BITDEPTHS",
    "WINDOW",
    "ScaleSums",
    "SsimTwin",
    "SsimWorkspace",
    "c_pow",
    "db_cap",
    "to_db",
    "gaussian_filter_valid",
    "staggered_empty",
    "scale_sums",
    "ssim_options",
    "mirror_borders",
    "mirror_index",
    "to_float",
    "to_float_divisor",
]

F32 = np.float32
F64 = np.float64

#: picture_copy's divisors: 10/12/16-bit samples are scaled into 8-bit range
_DIVISORS = {8: 1.0, 10: 4.0, 12: 16.0, 16: 256.0}
SUPPORTED_BITDEPTHS = tuple(_DIVISORS)

#: libvmaf's 1-D Gaussian window (sigma 1.5), rounded to 6 decimals there; its
#: float32 values sum to 1.000002, not 1, and that matters to the last bit.
GAUSSIAN_TAPS = np.array(
    [0.001028, 0.007599, 0.036001, 0.109361, 0.213006, 0.266012,
     0.213006, 0.109361, 0.036001, 0.007599, 0.001028],
    dtype=F32,
)
WINDOW = GAUSSIAN_TAPS.size
_HALF = WINDOW // 2
#: the taps' excess over 1 (exact sum of the float32 taps, minus one)
_TAP_EXCESS = F32(float(GAUSSIAN_TAPS.astype(F64).sum()) - 1.0)

# K1 = 0.01, K2 = 0.03 and L = 255, multiplied and squared in float32.
_K1L = F32(F32(0.01) * F32(255))
_K2L = F32(F32(0.03) * F32(255))
C1 = F32(_K1L * _K1L)
C2 = F32(_K2L * _K2L)
C3 = F32(C2 / F32(2))

#: bytes of one row tile of the five stacked float32 maps (about 90 rows at
#: 576 wide); measured best between 0.6 and 2 MB, much worse untiled
_TILE_BYTES = 1_000_000


#: Not a libvmaf option: false trades libvmaf's double accumulation in the
#: Gaussian passes for a float32 formula (float_ssim 1.8 to 2.8 times faster
#: on the CPU in docs/performance.md's runs, the GPU kernel 1.6 times), whose
#: scores differ from libvmaf's by up to 2.4e-6 on the reference set.  Metric names do
#: not change with it (it is not a feature parameter).
EXACT_FILTER_OPTION = Option(
    "exact_filter", bool, True,
    "libvmaf's double accumulation in the Gaussian window (false: faster float32 formula, within ~3e-6)",
)


def to_float_divisor(bitdepth: int) -> float:
    """What libvmaf divides samples of ``bitdepth`` by to bring them to 8-bit range."""
    try:
        return _DIVISORS[bitdepth]
    except KeyError:
        raise ValueError(f"SSIM supports bit depths {SUPPORTED_BITDEPTHS}, not {bitdepth}") from None


def to_float(plane: np.ndarray, bitdepth: int, out: np.ndarray | None = None) -> np.ndarray:
    """A plane as libvmaf's float picture: float32 samples in 8-bit range.

    10-, 12- and 16-bit samples are divided by 4, 16 and 256 (exact in
    float32), so all the SSIM constants assume ``L = 255``.  ``out`` (a
    float32 array of the plane's shape) receives the result if given.
    """
    divisor = to_float_divisor(bitdepth)
    if out is None:
        out = np.empty(plane.shape, F32)
    if divisor == 1.0:
        np.copyto(out, plane)
    else:
        np.divide(plane, F32(divisor), out=out)
    return out


def mirror_index(index: np.ndarray, before: int, n: int) -> np.ndarray:
    """Where a padded position reads from, libvmaf's mirror (``-1 - i``, ``2 n - 1 - i``).

    Positions are in a buffer whose sample 0 sits at ``before``.
    """
    sample = index - before
    sample = np.where(sample < 0, -1 - sample, sample)
    sample = np.where(sample >= n, 2 * n - 1 - sample, sample)
    return sample + before


def mirror_borders(buf: np.ndarray, before: int, height: int, width: int) -> None:
    """Fill the borders of ``buf`` (last two axes) by mirroring its interior.

    Sample ``(0, 0)`` of a ``height x width`` picture sits at ``(before,
    before)`` and the interior, as much of the picture as fits, is filled
    already; the ``before`` rows and columns in front and whatever lies past
    the picture's end are mirrored copies.
    """
    rows, cols = buf.shape[-2:]
    inner_h, inner_w = min(height, rows - before), min(width, cols - before)
    inner = buf[..., before : before + inner_h, :]
    inner[..., :before] = inner[..., mirror_index(np.arange(before), before, width)]
    inner[..., before + inner_w :] = inner[..., mirror_index(np.arange(before + inner_w, cols), before, width)]
    buf[..., :before, :] = buf[..., mirror_index(np.arange(before), before, height), :]
    buf[..., before + inner_h :, :] = buf[..., mirror_index(np.arange(before + inner_h, rows), before, height), :]


def _window_pass(src: np.ndarray, axis: int, out: np.ndarray, pair: np.ndarray, twice_centre: np.ndarray) -> None:
    """One valid-region 1-D pass of the Gaussian window along ``axis`` (-1 or -2).

    ``out``, ``pair`` and ``twice_centre`` have the output's shape (``src``
    shortened by 10 along ``axis``).  See the module docstring for why the
    sum is taken around the centre sample, smallest taps first.
    """
    n = src.shape[axis] - (WINDOW - 1)

    def tap(i: int) -> np.ndarray:
        index = [slice(None)] * src.ndim
        index[axis] = slice(i, i + n)
        return src[tuple(index)]

    centre = tap(_HALF)
    np.add(centre, centre, out=twice_centre)
    np.multiply(centre, _TAP_EXCESS, out=out)
    for i in range(_HALF):
        np.add(tap(i), tap(WINDOW - 1 - i), out=pair)
        pair -= twice_centre
        pair *= GAUSSIAN_TAPS[i]
        out += pair
    out += centre


def _window_pass_exact(src: np.ndarray, axis: int, out: np.ndarray, product: np.ndarray, acc: np.ndarray) -> None:
    """One valid-region 1-D pass in libvmaf's own arithmetic (iqa/convolve.c,
    ``_iqa_convolve`` with ``IQA_CONVOLVE_1D``): each sample times its tap is a
    float32 product, the products are added into a double in tap order, and
    the sum is rounded to float32.  ``product`` (float32) and ``acc`` (float64)
    are scratch of the output's shape.
    """
    n = src.shape[axis] - (WINDOW - 1)

    def tap(i: int) -> np.ndarray:
        index = [slice(None)] * src.ndim
        index[axis] = slice(i, i + n)
        return src[tuple(index)]

    np.multiply(tap(0), GAUSSIAN_TAPS[0], out=product)
    np.copyto(acc, product)
    for i in range(1, WINDOW):
        np.multiply(tap(i), GAUSSIAN_TAPS[i], out=product)
        np.add(acc, product, out=acc)
    np.copyto(out, acc, casting="same_kind")


def gaussian_filter_valid(maps: np.ndarray, *, exact: bool = True) -> np.ndarray:
    """Filter float32 maps (``(..., h, w)``) with the 11x11 window, valid region only.

    Horizontal pass first, then vertical, rounding to float32 in between,
    as libvmaf does.  The result is ``(..., h - 10, w - 10)``.  ``exact``:
    libvmaf's double accumulation; otherwise the faster float32 formula.
    """
    maps = np.asarray(maps, dtype=F32)
    h, w = maps.shape[-2:]
    lead = maps.shape[:-2]
    rows = np.empty(lead + (h, w - 10), F32)
    if exact:
        _window_pass_exact(maps, -1, rows, np.empty_like(rows), np.empty(rows.shape, F64))
    else:
        _window_pass(maps, -1, rows, np.empty_like(rows), np.empty_like(rows))
    out = np.empty(lead + (h - 10, w - 10), F32)
    if exact:
        _window_pass_exact(rows, -2, out, np.empty_like(out), np.empty(out.shape, F64))
    else:
        _window_pass(rows, -2, out, np.empty_like(out), np.empty_like(out))
    return out


def _raster_sum(total: float, values: np.ndarray) -> float:
    """``total`` plus every value of a 2-D array added one by one in raster order,
    in double (libvmaf's ``sum += x`` loops; ``np.sum`` would add pairwise)."""
    flat = np.array(values, dtype=F64).ravel()  # our own copy
    if flat.size == 0:
        return total
    flat[0] += total
    return float(np.cumsum(flat)[-1])


@dataclass(frozen=True)
class ScaleSums:
    """Double sums of the per-pixel SSIM terms over one scale's valid region.

    This is what a GPU kernel must produce per scale: the pixel count and the
    sums of ``l``, ``c``, ``s`` and ``l * c * s`` (``lcs`` is NaN when not
    asked for: MS-SSIM does not use it).
    """

    pixels: int
    l: float
    c: float
    s: float
    lcs: float = float("nan")


def staggered_empty(*specs: tuple[int | tuple[int, ...], Any]) -> list[np.ndarray]:
    """Uninitialised arrays (``(shape, dtype)`` each) carved from one block.

    Reusing one block frame after frame keeps the allocator (and the page
    faults of fresh memory) out of the per-frame work.  Each array starts 576
    bytes (nine cache lines) further into its 4 KiB page than the one before:
    a numpy loop storing to one array while loading from another at the same
    page offset can stall on every element ("4K aliasing").
    """
    page, stagger = 4096, 576
    layout, end = [], 0
    for k, (shape, dtype) in enumerate(specs):
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        start = -(-end // page) * page + (k * stagger) % page
        layout.append((start, nbytes, shape, dtype))
        end = start + nbytes
    block = np.empty(end + page, np.uint8)
    base = -block.ctypes.data % page
    return [block[base + start : base + start + nbytes].view(dtype).reshape(shape)
            for start, nbytes, shape, dtype in layout]


class SsimWorkspace:
    """Buffers for the SSIM sums at one picture size, reused frame after frame.

    The picture is processed in row tiles (each with the 10 extra rows the
    window needs) so the working set stays in cache.  Each tile's five maps
    are one contiguous block, and the horizontal pass runs over that block
    as a single 1-D signal: the outputs that straddle two rows are garbage
    but land in the last 10 columns, which are never summed.  Long
    contiguous runs are much faster in numpy than 566-sample row slices.
    Results do not depend on the tiling (beyond the order of double sums).
    """

    def __init__(self, height: int, width: int, exact: bool = True):
        self.height, self.width = height, width
        self.exact = exact
        self.out_h, self.out_w = height - (WINDOW - 1), width - (WINDOW - 1)
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(f"SSIM needs at least {WINDOW}x{WINDOW} pixels, got {width}x{height}")
        self.tile = max(8, min(self.out_h, _TILE_BYTES // (5 * 4 * width)))
        # flat buffers: a shorter last tile takes a prefix, which stays contiguous
        size_in = 5 * (self.tile + WINDOW - 1) * width
        size_out = 5 * self.tile * width
        size_map = self.tile * width
        bufs = staggered_empty(
            *[(size_in, F32)] * 4,          # stacked maps, horizontal pass, its 2 scratch
            *[(size_out, F32)] * 3,         # moments, vertical pass scratch
            *[(size_map, F32)] * 6,         # per-pixel float terms
            *[(size_map, F64)] * 2,         # per-pixel double terms
            *[(size_map, np.bool_)] * 2,    # masks
            *([(size_in, F64)] if exact else []),  # the exact passes' double accumulator
        )
        self._stack, self._rows, *self._row_scratch = bufs[0:4]
        self._moments, *self._col_scratch = bufs[4:7]
        self._f32 = bufs[7:13]
        self._f64 = bufs[13:15]
        self._masks = bufs[15:17]
        self._acc = bufs[17] if exact else None

    def sums(self, ref: np.ndarray, dist: np.ndarray, with_lcs: bool = True) -> ScaleSums:
        """The SSIM term sums of two float32 pictures of this workspace's size."""
        if ref.shape != (self.height, self.width) or dist.shape != ref.shape:
            raise ValueError(
                f"SSIM: pictures {ref.shape} and {dist.shape}, workspace for {(self.height, self.width)}"
            )
        totals = np.zeros(4, F64)
        for y0 in range(0, self.out_h, self.tile):
            n = min(self.tile, self.out_h - y0)
            rows = slice(y0, y0 + n + WINDOW - 1)
            moments = self._filter_tile(ref[rows], dist[rows])
            self._add_terms(moments, totals, with_lcs)
        return ScaleSums(
            pixels=self.out_h * self.out_w,
            l=float(totals[0]),
            c=float(totals[1]),
            s=float(totals[2]),
            lcs=float(totals[3]) if with_lcs else float("nan"),
        )

    def _filter_tile(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The windowed moments (mu1, mu2, E[x^2], E[y^2], E[xy]) of one tile, full width."""
        rows_in, w = a.shape
        n = rows_in - (WINDOW - 1)
        size_in, size_out = 5 * rows_in * w, 5 * n * w
        stack = self._stack[:size_in].reshape(5, rows_in, w)
        stack[0] = a
        stack[1] = b
        np.multiply(a, a, out=stack[2])  # float32 products, as libvmaf forms them
        np.multiply(b, b, out=stack[3])
        np.multiply(a, b, out=stack[4])

        # horizontal, over the tile as one 1-D signal
        valid = size_in - (WINDOW - 1)
        flat_out = self._rows[:size_in]
        row_a, row_b = (x[:valid] for x in self._row_scratch)
        if self.exact:
            _window_pass_exact(self._stack[:size_in], -1, flat_out[:valid], row_a, self._acc[:valid])
        else:
            _window_pass(self._stack[:size_in], -1, flat_out[:valid], row_a, row_b)
        flat_out[valid:] = 0  # never summed; keep it finite
        rows = flat_out.reshape(5, rows_in, w)

        # vertical, over whole rows (the garbage columns ride along)
        moments = self._moments[:size_out].reshape(5, n, w)
        col_a, col_b = (x[:size_out].reshape(5, n, w) for x in self._col_scratch)
        if self.exact:
            _window_pass_exact(rows, -2, moments, col_a, self._acc[:size_out].reshape(5, n, w))
        else:
            _window_pass(rows, -2, moments, col_a, col_b)
        return moments

    def _add_terms(self, moments: np.ndarray, totals: np.ndarray, with_lcs: bool) -> None:
        """Add one tile's sums of l, c, s (and l*c*s) to ``totals``.

        The terms are computed over whole rows (contiguous, so faster than a
        strided view) and only the valid columns are summed.  Float32 and
        double are used exactly where libvmaf uses them.
        """
        mu1, mu2, e11, e22, e12 = moments
        shape = mu1.shape
        size = mu1.size
        sq1, sq2, var1, var2, cov, sd = (x[:size].reshape(shape) for x in self._f32)
        lum, con = (x[:size].reshape(shape) for x in self._f64)
        neg, flat = (x[:size].reshape(shape) for x in self._masks)
        valid_w = self.out_w

        # float32 maps: variances (clipped at 0), covariance, sigma1 * sigma2
        np.multiply(mu1, mu1, out=sq1)
        np.multiply(mu2, mu2, out=sq2)
        np.subtract(e11, sq1, out=var1)
        np.maximum(var1, 0, out=var1)
        np.subtract(e22, sq2, out=var2)
        np.maximum(var2, 0, out=var2)
        np.multiply(mu1, mu2, out=cov)
        np.subtract(e12, cov, out=cov)
        np.multiply(var1, var2, out=sd)  # sigma1 sigma2 = sqrt(var1 var2), in float32
        np.sqrt(sd, out=sd)

        # l = (2 mu1 mu2 + C1) / (mu1^2 + mu2^2 + C1): numerator in double
        # (2 mu1 is exact in float32, its product with mu2 exact in double),
        # denominator in float32
        den = sq1
        den += sq2
        den += C1
        twice = sq2
        np.add(mu1, mu1, out=twice)
        np.multiply(twice, mu2, out=lum, dtype=F64)
        lum += C1
        lum /= den

        # c = (2 sigma1 sigma2 + C2) / (var1 + var2 + C2): the same mix
        np.add(sd, sd, out=con, dtype=F64)
        con += C2
        den = var1
        den += var2
        den += C2
        con /= den

        # s = (cov + C3) / (sigma1 sigma2 + C3), all float32.  Where a window
        # is flat (sigma1 sigma2 == 0) a slightly negative covariance is
        # rounding noise; libvmaf zeroes it so identical flat areas score
        # exactly s = 1.
        np.less(cov, 0, out=neg)
        np.less_equal(sd, 0, out=flat)
        neg &= flat
        np.copyto(cov, 0, where=neg)
        cov += C3
        sd += C3
        cov /= sd
        struct = cov

        # libvmaf adds the terms pixel by pixel in raster order (tiles are
        # consecutive rows, so carrying the totals keeps that order)
        totals[0] = _raster_sum(totals[0], lum[:, :valid_w])
        totals[1] = _raster_sum(totals[1], con[:, :valid_w])
        totals[2] = _raster_sum(totals[2], struct[:, :valid_w])
        if with_lcs:
            lum *= con
            lum *= struct
            totals[3] = _raster_sum(totals[3], lum[:, :valid_w])


def scale_sums(ref: np.ndarray, dist: np.ndarray, *, with_lcs: bool = True, exact: bool = True) -> ScaleSums:
    """The SSIM term sums of two float32 pictures at one scale (a one-off workspace)."""
    return SsimWorkspace(*ref.shape, exact=exact).sums(ref, dist, with_lcs)


# ---------------------------------------------------------------------------
# what both features share after the sums: dB conversion, C's pow, naming
# ---------------------------------------------------------------------------


def db_cap(clip_db: bool, width: int, height: int, bitdepth: int) -> float:
    """The largest dB value ``enable_db`` may report (``inf`` unless ``clip_db``).

    libvmaf caps at the dB an MSE of half a code value squared per picture
    would give: ``ceil(10 log10(peak^2 / (0.5 / (w h))))``.
    """
    if not clip_db:
        return math.inf
    peak = (1 << bitdepth) - 1
    mse = 0.5 / float((width * height) & 0xFFFFFFFF)  # w * h is an unsigned int in C
    return float(math.ceil(10.0 * math.log10(float(peak * peak) / mse)))


def to_db(score: float, cap: float) -> float:
    """``min(-10 log10(1 - score), cap)`` with C's semantics.

    A score of exactly 1 gives ``+inf`` (then the cap); a score above 1 gives
    NaN in C, and C's ``MIN(NaN, cap)`` picks the cap.
    """
    rest = 1.0 - score
    if rest > 0.0:
        db = -10.0 * math.log10(rest)
    elif rest == 0.0:
        db = math.inf
    else:
        db = math.nan
    return db if db < cap else cap


def frame_metrics(name: str, score: float, terms: Mapping[str, float], *, enable_db: bool,
                  db_max: float) -> dict[str, float]:
    """One frame's metrics: ``name``'s score (in dB, capped, with ``enable_db``), then the mean
    l, c, s ``terms`` (empty without ``enable_lcs``)."""
    return {name: to_db(score, db_max) if enable_db else score, **terms}


def c_pow(base: float, exponent: float) -> float:
    """C's ``pow`` for the cases MS-SSIM meets (math.pow raises where C returns NaN)."""
    try:
        return math.pow(base, exponent)
    except ValueError:  # negative base, non-integer exponent
        return math.nan


def ssim_options(label: str, *extra: Option) -> tuple[Option, ...]:
    """The options both features take (``label`` names the score in ``enable_db``'s help),
    with ``extra`` before ``exact_filter``."""
    return (
        Option("enable_lcs", bool, False, "enable luminance, contrast and structure intermediate output"),
        Option("enable_db", bool, False, f"write {label} values as dB"),
        Option("clip_db", bool, False, "clip dB scores"),
        *extra,
        EXACT_FILTER_OPTION,
    )


class SsimTwin(PerFrameTwin):
    """What both CPU twins share: the bit depth check, the output options, and ``extract``.

    A twin sets ``metrics_from_stats`` (its module's) and :meth:`_stats`.
    """

    metrics_from_stats: Any = None

    def _setup(self, declaration: Any, options: Mapping[str, Any], width: int, height: int,
               bitdepth: int) -> Mapping[str, Any]:
        """The options with ``declaration``'s defaults; checks the bit depth and keeps the output options."""
        options = declaration.with_defaults(options)
        check_bitdepth(declaration.name, bitdepth, SUPPORTED_BITDEPTHS)
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self.enable_lcs = bool(options["enable_lcs"])
        self.enable_db = bool(options["enable_db"])
        self.db_max = db_cap(bool(options["clip_db"]), width, height, bitdepth)
        return options

    def _stats(self, ref: np.ndarray, dist: np.ndarray):
        raise NotImplementedError

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        metrics = type(self).metrics_from_stats(
            self._stats(ref.luma, dist.luma), enable_lcs=self.enable_lcs, enable_db=self.enable_db,
            db_max=self.db_max,
        )
        return [(index, metrics)]
