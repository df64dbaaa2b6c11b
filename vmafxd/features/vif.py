"""Integer VIF: libvmaf's ``vif`` extractor (``integer_vif_scale0`` .. ``scale3``).

VIF compares, over four dyadic scales, how much of the reference's local
variance survives in the distorted picture.  libvmaf computes it in fixed
point; this module reproduces that arithmetic exactly, in two layers:

* :func:`compute_stats` runs the per-pixel pipeline (separable Gaussian-like
  filters with libvmaf's rounding shifts and mirror padding, decimation, the
  log2 look-up table, the few per-pixel double operations) and returns the
  four *integer* accumulators libvmaf sums at each scale (:class:`VifStats`).
  Integer sums do not depend on summation order, so a GPU kernel can reduce
  them any way it likes and still match bit for bit.
* :func:`metrics_from_stats` turns those integers into the scores with the
  same float/double operations, in the same order, as libvmaf.

The pipeline, per scale ``s`` (taps ``f = FILTER_TAPS[s]``, half-width
``r``; ``rshift(v, n) = (v + 2**(n-1)) >> n``, nothing when ``n`` is 0;
every filter's taps sum to ``2**16``):

1. Mirror the picture by ``r`` rows, without repeating the edge
   (``x[-k] = x[k]``, ``x[h-1+k] = x[h-1-k]``); filter vertically:
   means ``rshift(sum f*x, a)``, second moments (x*x, y*y, x*y)
   ``rshift(sum f*x*y, b)``; ``(a, b) = (bpc, 2*(bpc-8))`` at scale 0 and
   ``(16, 16)`` above.  (C sums in 32 bits where the sum provably fits:
   the means, and the 8-bit scale-0 moments; in 64 bits otherwise.)
2. Mirror those rows by ``r`` columns the same way; filter horizontally:
   ``mu = sum f*mean`` (no shift, below ``2**32``), moments
   ``rshift(sum f*moment, 16)`` (a 64-bit sum, result below ``2**32``).
3. ``sigma = moment - rshift(mu_a * mu_b, 32)`` (a 64-bit product) read as
   int32, then libvmaf's per-pixel branch (:func:`_accumulate`).
4. The picture of scale ``s + 1``: the taps of ``s + 1`` over this picture,
   vertical ``rshift(., bpc)`` at the first step and ``rshift(., 16)``
   later, horizontal ``rshift(., 16)``, keeping even rows and columns
   (``h // 2 x w // 2``), each pass mirrored as above.

How the arithmetic is reproduced: libvmaf's integer sums are all below
``2**53``, so they are computed as float64 matrix products (BLAS), exact in
any order; shifts are float64 add-scale-floor, also exact.  The one 64-bit
product (a filtered mean squared) is done in uint64.  The per-pixel doubles
(``g``, ``sv_sq``) are float64 in the same order of operations as C.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .declaration import FeatureDeclaration, Option, debug_and_gain_limit_options, per_frame

__all__ = [
    "DECLARATION",
    "FILTER_TAPS",
    "LOG2_TABLE",
    "LOG2_ONE",
    "SIGMA_NSQ",
    "ScaleAccumulators",
    "VifExtractor",
    "VifStats",
    "check_size",
    "build_log2_table",
    "compute_stats",
    "metrics_from_stats",
    "metrics_from_sums",
    "columns_from_sums",
]

#: 1-D filter taps per scale (symmetric, odd length, each summing to 65536).
FILTER_TAPS: tuple[tuple[int, ...], ...] = (
    (489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640, 935, 489),
    (1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244),
    (3571, 16004, 26386, 16004, 3571),
    (10904, 43728, 10904),
)

#: the noise variance 2.0 in the 16.16 fixed point of the variances
SIGMA_NSQ = 2 << 16
#: log2 values are stored times 2048 (11 fractional bits)
LOG2_ONE = 2048
#: libvmaf adds this to sigma1_sq before dividing by it (a double, like the division)
_EPS = 65536 * 1.0e-10
_NUM_SCALES = 4


def build_log2_table() -> np.ndarray:
    """libvmaf's ``log2_table``: entry ``i`` (32767..65535) is ``round(log2f(i) * 2048)``.

    The C code rounds ``log2`` to *float* first and then rounds half away from
    zero.  That float step matters: about 80 entries land exactly on ``x.5``
    only after the float rounding.  Here ``log2`` in double is rounded to
    float32 (in effect the correctly rounded ``log2f``); glibc's ``log2f``
    differs from that in the last bit for a handful of inputs in this range,
    none of which changes an entry (the tests compare with the C library
    when it can be loaded).  Entries below 32767 are never read and stay 0.
    """
    table = np.zeros(65536, dtype=np.uint16)
    i = np.arange(32767, 65536, dtype=np.float64)
    as_float = np.log2(i).astype(np.float32).astype(np.float64)
    # the product by 2048 is exact; floor(v + 0.5) is round-half-away for v > 0
    table[32767:] = np.floor(as_float * LOG2_ONE + 0.5).astype(np.uint16)
    return table


LOG2_TABLE: np.ndarray = build_log2_table()
LOG2_TABLE.flags.writeable = False


# --------------------------------------------------------------------------
# statistics (the part a GPU kernel reproduces)


@dataclass(frozen=True)
class ScaleAccumulators:
    """The four integer sums libvmaf keeps for one scale."""

    #: sum over "log" pixels of log2(numerator) differences, times 2048
    num_log: int
    #: sum over "log" pixels of log2(1 + sigma1_sq / sigma_nsq), times 2048
    den_log: int
    #: sum of sigma2_sq over the other pixels (16.16 fixed point)
    num_non_log: int
    #: number of the other pixels
    den_non_log: int

    def __add__(self, other: "ScaleAccumulators") -> "ScaleAccumulators":
        return ScaleAccumulators(
            self.num_log + other.num_log,
            self.den_log + other.den_log,
            self.num_non_log + other.num_non_log,
            self.den_non_log + other.den_non_log,
        )


@dataclass(frozen=True)
class VifStats:
    """Per-scale accumulators of one frame; ``None`` for a skipped scale 0."""

    scales: tuple[ScaleAccumulators | None, ...]

    def to_array(self) -> np.ndarray:
        """``int64[4, 4]`` (scale x (num_log, den_log, num_non_log, den_non_log)); a skipped scale is zeros."""
        out = np.zeros((_NUM_SCALES, 4), dtype=np.int64)
        for s, acc in enumerate(self.scales):
            if acc is not None:
                out[s] = (acc.num_log, acc.den_log, acc.num_non_log, acc.den_non_log)
        return out

    @classmethod
    def from_array(cls, array: np.ndarray, skip_scale0: bool = False) -> "VifStats":
        """The inverse of :meth:`to_array`."""
        rows = [ScaleAccumulators(*(int(v) for v in row)) for row in np.asarray(array).reshape(_NUM_SCALES, 4)]
        if skip_scale0:
            rows[0] = None
        return cls(tuple(rows))


# Filtering runs as float64 matrix products (BLAS): every product and partial
# sum is an integer below 2**53, so float64 holds each one exactly and the
# result does not depend on the order or blocking BLAS chooses.  The band of
# taps is cut into blocks of _BLOCK outputs so that each product is small and
# dense.  Planes are kept contiguous: numpy is several times slower on
# strided views.
_BLOCK = 8
#: pixels per strip of rows in the statistics pass (a cache-sized working set)
_STRIP_PIXELS = 1 << 16


@functools.lru_cache(maxsize=None)
def _band(scale: int, step: int) -> np.ndarray:
    """``float64[_BLOCK, span]``: row ``r`` holds the taps of ``scale`` from column ``step * r``."""
    taps = FILTER_TAPS[scale]
    band = np.zeros((_BLOCK, step * (_BLOCK - 1) + len(taps)))
    for r in range(_BLOCK):
        band[r, step * r : step * r + len(taps)] = taps
    band.flags.writeable = False
    return band


@functools.lru_cache(maxsize=None)
def _band_t(scale: int, step: int) -> np.ndarray:
    """The transpose of :func:`_band`, C-contiguous (BLAS is much slower with a transposed operand here)."""
    band = np.ascontiguousarray(_band(scale, step).T)
    band.flags.writeable = False
    return band


def _blocks(count: int) -> int:
    return -(-count // _BLOCK)


def _span_needed(count: int, scale: int, step: int) -> int:
    """Padded input length the blocked filter reads to produce ``count`` outputs (rounded up to blocks)."""
    return (_blocks(count) - 1) * step * _BLOCK + _band(scale, step).shape[1]


def _half(scale: int) -> int:
    return len(FILTER_TAPS[scale]) // 2


class _Scratch:
    """Work arrays kept from frame to frame.

    A frame needs tens of megabytes of temporaries; allocating them afresh
    costs more in page faults than the arithmetic itself.  Each name owns one
    buffer, grown as needed and handed out as a contiguous array of the
    requested shape, overwritten by every use: two arrays in use at the same
    time need different names.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, np.ndarray] = {}
        self._constants: dict[tuple, np.ndarray] = {}

    def __call__(self, name: str, shape: tuple[int, ...], dtype=np.float64) -> np.ndarray:
        key = (name, np.dtype(dtype))
        size = int(math.prod(shape))  # (np.prod costs microseconds a call; this runs ~120 times a frame)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[key] = np.empty(size, dtype)
        return buffer[:size].reshape(shape)

    def constant(self, name: str, make, *key) -> np.ndarray:
        """An array made once by ``make()`` and reused for the same ``key``."""
        array = self._constants.get((name, *key))
        if array is None:
            array = self._constants[(name, *key)] = make()
        return array

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self._buffers.values(), *self._constants.values()))


def _filter_rows(src: np.ndarray, scale: int, step: int, out: np.ndarray, col0: int) -> None:
    """Vertical pass of the planes ``src[q]`` into ``out[q, :, col0 : col0 + w]``.

    ``out[q, i] = sum_k taps[k] * src[q, step*i + k]`` for every row ``i`` of
    ``out`` (a whole number of blocks); ``src`` holds the mirror-padded input
    from row 0 and enough rows (zeros past the padding).
    """
    band = _band(scale, step)
    planes, _, w = src.shape
    blocks = out.shape[1] // _BLOCK
    qs, rs, cs = src.strides
    windows = as_strided(src, (planes, blocks, band.shape[1], w), (qs, step * _BLOCK * rs, rs, cs), writeable=False)
    np.matmul(band, windows, out=out[:, :, col0 : col0 + w].reshape(planes, blocks, _BLOCK, w))


def _filter_cols(ws: _Scratch, name: str, src: np.ndarray, scale: int, step: int, count: int) -> np.ndarray:
    """Horizontal pass of the planes ``src[q]``, column-blocked.

    ``out[q, c, i, b] = sum_k taps[k] * src[q, i, step*(c*_BLOCK + b) + k]``,
    a ``float64[planes, blocks, rows, _BLOCK]`` in which each plane is
    contiguous; outputs at or past ``count`` come from padding and must be
    ignored.
    """
    band_t = _band_t(scale, step)
    blocks = _blocks(count)
    planes, rows, _ = src.shape
    qs, rs, cs = src.strides
    shape = (planes, blocks, rows, band_t.shape[0])
    windows = as_strided(src, shape, (qs, step * _BLOCK * cs, rs, cs), writeable=False)
    out = ws(name, (planes, blocks, rows, _BLOCK))
    np.matmul(windows, band_t, out=out)
    return out


def _mirror(buf: np.ndarray, half: int, n: int, axis: int) -> None:
    """Fill ``half`` mirrored samples on both sides of ``buf[half : half + n]`` along ``axis``, zero the rest.

    ``x[-k] = x[k]`` and ``x[n-1+k] = x[n-1-k]``: the edge is not repeated.
    """
    if n <= half:
        raise ValueError(f"vif: a dimension of {n} is too small for a filter half-width of {half}")
    idx = [slice(None)] * buf.ndim

    def at(sl: slice) -> tuple:
        idx[axis] = sl
        return tuple(idx)

    buf[at(slice(0, half))] = buf[at(slice(2 * half, half, -1))]
    buf[at(slice(half + n, n + 2 * half))] = buf[at(slice(n + half - 2, n - 2, -1))]
    buf[at(slice(n + 2 * half, None))] = 0.0


def _round_shift(buf: np.ndarray, shift: int) -> None:
    """``buf = (buf + 2**(shift-1)) >> shift`` in place on integer-valued float64 (nothing for shift 0).

    Adding an integer, scaling by a power of two and flooring are all exact
    in float64 for integers below 2**53.
    """
    if shift:
        buf += float(1 << (shift - 1))
        buf *= 2.0**-shift
        np.floor(buf, out=buf)


def _padded_pictures(ws: _Scratch, scale: int, h: int, w: int) -> np.ndarray:
    """``uint16[2, rows, w]`` for ref and dist of ``scale``, placed from row ``_half(scale)``.

    Samples of every scale are below ``2**16``.  They are mirrored by the
    half-width of the scale's filter, zeros below; rows suffice for the
    statistics pass and for the next scale's decimating pass.
    """
    half = _half(scale)
    rows = max(h + 2 * half, _span_needed(h, scale, 1))
    if scale + 1 < _NUM_SCALES:
        rows = max(rows, half - _half(scale + 1) + _span_needed(h // 2, scale + 1, 2))
    return ws(f"pictures{scale}", (2, rows, w), np.uint16)


_LOG2_UPPER = LOG2_TABLE[32768:]


def _log2_sum(ws: _Scratch, values: np.ndarray) -> int:
    """Sum of libvmaf's fixed-point ``log2`` (times 2048) over integer-valued float64 ``values``.

    libvmaf keeps the top 16 bits of the value: with ``bl`` its bit length,
    ``table[v >> (bl - 16)] + 2048 * (bl - 16)``.  Every value that counts is
    an integer in ``[2**17, 2**53)``, held exactly in a float64 whose bits give
    both directly: the biased exponent ``E = bl + 1022`` (bits 52..62) and,
    below the implicit leading 1, the next 15 bits of the value (bits
    37..51).  (Values that do not count are positive and finite, and cancel.)
    """
    bits = values.view(np.int64)
    work = ws("log2_bits", values.shape, np.int64)
    looked_up = ws("log2_values", values.shape, np.uint16)
    np.right_shift(bits, 37, out=work)
    work &= 0x7FFF
    np.take(_LOG2_UPPER, work, out=looked_up, mode="clip")  # indices are in range; "clip" avoids a buffer
    table_sum = int(looked_up.sum(dtype=np.int64))
    np.right_shift(bits, 52, out=work)
    exponent_sum = int(work.sum())
    return table_sum + LOG2_ONE * (exponent_sum - (1022 + 16) * values.size)


def _valid(ws: _Scratch, shape: tuple[int, int, int], h: int, w: int) -> np.ndarray | None:
    """Mask of the real pixels in a column-blocked ``[blocks, rows, _BLOCK]`` layout (None: all are)."""
    blocks, rows, _ = shape
    if rows == h and blocks * _BLOCK == w:
        return None

    def make() -> np.ndarray:
        cols = np.arange(blocks * _BLOCK).reshape(blocks, 1, _BLOCK) < w
        return cols & (np.arange(rows) < h).reshape(1, rows, 1)

    return ws.constant("valid", make, shape, h, w)


def _accumulate(ws: _Scratch, filtered: np.ndarray, h: int, w: int, gain_limit: float) -> ScaleAccumulators:
    """libvmaf's per-pixel VIF arithmetic and its four sums.

    ``filtered`` (``float64[5, blocks, rows, _BLOCK]`` from :func:`_filter_cols`,
    consumed) holds, per pixel, the two filtered means with 24 fractional
    bits (in units of an 8-bit sample) and the three filtered second moments
    (ref*ref, dist*dist, ref*dist) with 32; rows at or past ``h`` and
    columns at or past ``w`` are padding.
    """
    _, blocks, rows, _ = filtered.shape
    shape = (blocks, rows, _BLOCK)
    sigma = filtered[2:]
    _round_shift(sigma, 16)  # moments back to 16 fractional bits, < 2**32
    # (mu * mu + 2**31) >> 32 needs the exact 64-bit product; mu < 2**32 - 2**16,
    # so product plus rounding term stays below 2**64.
    mu = ws("mu", (2,) + shape, np.uint64)
    np.copyto(mu, filtered[:2], casting="unsafe")
    product = ws("mu_product", shape, np.uint64)
    as_float = ws("mu_product_float", shape)
    for q, (a, b) in enumerate(((0, 0), (1, 1), (0, 1))):
        np.multiply(mu[a], mu[b], out=product)
        product += 1 << 31
        product >>= 32
        # below 2**32 now: read as int64, numpy's fast conversion to float64
        np.copyto(as_float, product.view(np.int64), casting="unsafe")
        # libvmaf subtracts in uint32 and reads the result as int32.  Both
        # terms approximate E[x*x] and E[x]**2 in 16.16 (8-bit units), so the
        # true difference lies within about +-2**30: no wrap-around can occur
        # and the float64 difference is the same number.
        sigma[q] -= as_float
    sigma1_sq, sigma2_sq, sigma12 = sigma
    np.maximum(sigma2_sq, 0.0, out=sigma2_sq)

    log_px = ws("log_px", shape, np.bool_)
    other_px = ws("other_px", shape, np.bool_)
    np.greater_equal(sigma1_sq, SIGMA_NSQ, out=log_px)
    np.logical_not(log_px, out=other_px)
    valid = _valid(ws, shape, h, w)
    if valid is not None:
        log_px &= valid
        other_px &= valid
    den_non_log = int(np.count_nonzero(other_px))
    work = ws("work", shape)
    np.multiply(sigma2_sq, other_px, out=work)
    # per-block float sums stay below 2**53 (rows * 8 values below 2**31): exact
    num_non_log = int(work.sum(axis=(1, 2)).astype(np.int64).sum())

    # log2(sigma_nsq + sigma1_sq) - 17: a pixel outside the log branch gets
    # sigma_nsq alone, whose log2 is exactly 17, contributing nothing
    np.multiply(sigma1_sq, log_px, out=work)
    work += SIGMA_NSQ
    den_log = _log2_sum(ws, work) - 17 * LOG2_ONE * work.size

    gained = ws("gained", shape, np.bool_)
    np.greater(sigma12, 0.0, out=gained)
    gained &= log_px
    np.greater(sigma2_sq, 0.0, out=other_px)
    gained &= other_px
    # the gain g and the noise variance sv_sq are computed in double, as in C
    # (elsewhere they are finite garbage, cancelled below)
    g = ws("g", shape)
    np.add(sigma1_sq, _EPS, out=g)
    np.divide(sigma12, g, out=g)
    numer1 = ws("numer1", shape)
    np.multiply(g, sigma12, out=numer1)
    np.subtract(sigma2_sq, numer1, out=numer1)
    # the int32 conversion truncates toward zero; negatives are then clamped
    np.trunc(numer1, out=numer1)
    np.maximum(numer1, 0.0, out=numer1)
    numer1 += SIGMA_NSQ
    np.minimum(g, gain_limit, out=g)
    # a pixel outside the branch gets g = 0, so numer == numer1 and its log2
    # difference is exactly 0
    g *= gained
    # (int64)(g * g * sigma1_sq) truncates; below 2**53 as g <= 100, sigma1_sq < 2**31
    numer = work
    np.multiply(g, g, out=numer)
    numer *= sigma1_sq
    np.trunc(numer, out=numer)
    numer += numer1
    num_log = _log2_sum(ws, numer) - _log2_sum(ws, numer1)
    return ScaleAccumulators(num_log, den_log, num_non_log, den_non_log)


def _scale_stats(
    ws: _Scratch, pictures: np.ndarray, h: int, w: int, scale: int, bitdepth: int, gain_limit: float
) -> ScaleAccumulators:
    """Filter means and second moments at one scale (from :func:`_padded_pictures`), then accumulate.

    Vertical pass: means are rounded to 16 fractional bits (shift by the bit
    depth at scale 0, 16 above); second moments to 16 fractional bits in
    8-bit units (shift ``2 * (bitdepth - 8)`` at scale 0, none at 8 bits, 16
    above).  Horizontal pass: means are *not* shifted (24 fractional bits
    left), second moments are shifted by 16 in :func:`_accumulate`.

    The picture is processed in strips of rows small enough for the work
    arrays to stay in cache; the sums are integers, so strips add up exactly.
    """
    half = _half(scale)
    if scale == 0:
        mu_shift, sq_shift = bitdepth, 2 * (bitdepth - 8)
    else:
        mu_shift = sq_shift = 16
    cols = max(_span_needed(w, scale, 1), w + 2 * half)
    strip = max(1, _STRIP_PIXELS // (w * _BLOCK)) * _BLOCK
    total = ScaleAccumulators(0, 0, 0, 0)
    for top in range(0, h, strip):
        n = min(strip, h - top)
        rows = _blocks(n) * _BLOCK
        # the vertical input: ref, dist, ref*ref, dist*dist, ref*dist (samples
        # are below 2**16, so products are below 2**32: exact)
        planes = ws("stat_planes", (5, rows + 2 * half, w))
        planes[:2] = pictures[:, top : top + rows + 2 * half]
        np.multiply(planes[0], planes[0], out=planes[2])
        np.multiply(planes[1], planes[1], out=planes[3])
        np.multiply(planes[0], planes[1], out=planes[4])
        vertical = ws("stat_rows", (5, rows, cols))
        _filter_rows(planes, scale, 1, vertical, half)
        _mirror(vertical, half, w, 2)
        _round_shift(vertical[:2], mu_shift)
        _round_shift(vertical[2:], sq_shift)
        total += _accumulate(ws, _filter_cols(ws, "stat_cols", vertical, scale, 1, w), n, w, gain_limit)
    return total


def _downsample(ws: _Scratch, pictures: np.ndarray, h: int, w: int, scale: int, bitdepth: int, out: np.ndarray) -> None:
    """Write the ref and dist pictures of ``scale`` (1..3) into ``out`` (``[2, h // 2, w // 2]``).

    ``pictures`` are the previous scale's :func:`_padded_pictures`.  libvmaf
    filters every sample with the taps of ``scale`` and then keeps the even
    rows and columns; only the kept ones are computed here.  The vertical
    pass shifts by the bit depth the first time (raw samples to 16-bit
    range; 128 >> 8 at 8 bits), by 16 later; the horizontal pass by 16.
    """
    half = _half(scale)
    offset = _half(scale - 1) - half  # pictures are padded for the previous scale's wider filter
    h2, w2 = h // 2, w // 2
    cols = max(_span_needed(w2, scale, 2), w + 2 * half)
    strip = max(1, _STRIP_PIXELS // (w * _BLOCK)) * _BLOCK
    full, rest = divmod(w2, _BLOCK)
    for top in range(0, h2, strip):
        n = min(strip, h2 - top)
        first = offset + 2 * top
        planes = ws("down_planes", (2, _span_needed(n, scale, 2), w))
        planes[...] = pictures[:, first : first + planes.shape[1]]
        vertical = ws("down_rows", (2, _blocks(n) * _BLOCK, cols))
        _filter_rows(planes, scale, 2, vertical, half)
        _mirror(vertical, half, w, 2)
        _round_shift(vertical, bitdepth if scale == 1 else 16)
        blocked = _filter_cols(ws, "down_cols", vertical, scale, 2, w2)
        _round_shift(blocked, 16)
        # back from column blocks to plain rows
        rows = out[:, top : top + n]
        if full:
            rows[:, :, : full * _BLOCK].reshape(2, n, full, _BLOCK)[...] = blocked[:, :full, :n].transpose(0, 2, 1, 3)
        if rest:
            rows[:, :, full * _BLOCK :] = blocked[:, full, :n, :rest]


def compute_stats(
    ref_luma: np.ndarray,
    dist_luma: np.ndarray,
    bitdepth: int,
    options: Mapping[str, Any],
    scratch: _Scratch | None = None,
) -> VifStats:
    """The integer VIF accumulators of one frame (luma planes, uint8 at 8 bits, uint16 above).

    ``scratch`` keeps work arrays between calls (a :class:`VifExtractor` holds
    one); it never changes the result.
    """
    if not 8 <= bitdepth <= 16:
        raise ValueError(f"vif: unsupported bit depth {bitdepth}")
    if ref_luma.shape != dist_luma.shape:
        raise ValueError(f"vif: reference {ref_luma.shape} and distorted {dist_luma.shape} differ in size")
    ws = scratch if scratch is not None else _Scratch()
    gain_limit = float(options.get("vif_enhn_gain_limit", 100.0))
    skip_scale0 = bool(options.get("vif_skip_scale0", False))
    h, w = ref_luma.shape
    pictures = _padded_pictures(ws, 0, h, w)
    pictures[0, _half(0) : _half(0) + h] = ref_luma
    pictures[1, _half(0) : _half(0) + h] = dist_luma
    scales: list[ScaleAccumulators | None] = []
    for scale in range(_NUM_SCALES):
        _mirror(pictures, _half(scale), h, 1)
        if scale == 0 and skip_scale0:
            scales.append(None)
        else:
            scales.append(_scale_stats(ws, pictures, h, w, scale, bitdepth, gain_limit))
        if scale + 1 < _NUM_SCALES:
            smaller = _padded_pictures(ws, scale + 1, h // 2, w // 2)
            half = _half(scale + 1)
            _downsample(ws, pictures, h, w, scale + 1, bitdepth, smaller[:, half : half + h // 2])
            pictures, h, w = smaller, h // 2, w // 2
    return VifStats(tuple(scales))


# --------------------------------------------------------------------------
# scores (shared by the CPU twin and the GPU lanes)


def metrics_from_sums(acc: np.ndarray, skip_scale0: bool, options: Mapping[str, Any]) -> list[dict[str, float]]:
    """libvmaf's scores of N frames from their accumulators (``int64[N, 4, 4]``, rows as
    :meth:`VifStats.to_array`): one dict of base metric name -> value per frame."""
    return per_frame(columns_from_sums(acc, skip_scale0, options))


def columns_from_sums(acc: np.ndarray, skip_scale0: bool, options: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """:func:`metrics_from_sums` as columns: base metric name -> float64 array over the N frames.

    Debug metrics are included when ``options["debug"]`` is true.  libvmaf
    evaluates ``num`` and ``den`` in double and stores them in ``float``; the
    per-scale score is a float division; the debug totals add the floats in
    double, scale by scale.  (Vectorised over frames: each C operation is one
    numpy operation in the same precision.)
    """
    acc = np.asarray(acc, dtype=np.int64).reshape(-1, _NUM_SCALES, 4)
    if acc.shape[0] <= SMALL_BATCH and not options.get("debug", False):
        got = _small_columns(acc, skip_scale0)
        if got is not None:
            return got
    f = acc.astype(np.float64)  # int64 -> double, as C promotes
    # int64 / double and int64 - double promote to double, as in C
    nums = (f[:, :, 0] / 2048.0 + (f[:, :, 3] - (f[:, :, 2] / 16384.0) / 65025.0)).astype(np.float32)
    dens = (f[:, :, 1] / 2048.0 + f[:, :, 3]).astype(np.float32)
    if skip_scale0:
        nums[:, 0], dens[:, 0] = 0.0, -1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (nums / dens).astype(np.float64)
    if skip_scale0:
        ratios[:, 0] = 0.0
    columns = {f"integer_vif_scale{s}": ratios[:, s] for s in range(_NUM_SCALES)}
    if options.get("debug", False):
        # the floats are added in double, scale by scale from the first one computed
        first = 1 if skip_scale0 else 0
        n64, d64 = nums.astype(np.float64), dens.astype(np.float64)
        score_num, score_den = n64[:, first].copy(), d64[:, first].copy()
        for s in range(first + 1, _NUM_SCALES):
            score_num += n64[:, s]
            score_den += d64[:, s]
        with np.errstate(divide="ignore", invalid="ignore"):
            columns["integer_vif"] = np.where(score_den == 0.0, 1.0, score_num / np.where(score_den == 0.0, 1.0, score_den))
        columns["integer_vif_num"] = score_num
        columns["integer_vif_den"] = score_den
        for s in range(_NUM_SCALES):
            columns[f"integer_vif_num_scale{s}"] = n64[:, s]
            columns[f"integer_vif_den_scale{s}"] = d64[:, s]
    return columns


#: batches of at most this many frames (without debug) are scored by :func:`_small_columns`, the
#: same bits at less than half the whole-array operations' cost for one frame (4 against 10 µs
#: on a 2-core box)
SMALL_BATCH = 4
_SCALE_NAMES = tuple(f"integer_vif_scale{s}" for s in range(_NUM_SCALES))


def _small_columns(acc: np.ndarray, skip_scale0: bool) -> dict[str, np.ndarray] | None:
    """:func:`columns_from_sums` without debug for a few frames, on Python floats: the double
    expressions as they are; each stored to float by numpy's conversion of the list (C's
    ``(float)``); the float division in double, rounded to float once (the double quotient of two
    floats rounded to float is their float quotient: double has more than 2 * 24 + 2 bits).
    None where a ``den`` is 0.0 (the array path's inf or nan)."""
    n = acc.shape[0]
    terms = []
    for f0, f1, f2, f3 in acc.reshape(n * _NUM_SCALES, 4).astype(np.float64).tolist():
        terms.append(f0 / 2048.0 + (f3 - (f2 / 16384.0) / 65025.0))  # num
        terms.append(f1 / 2048.0 + f3)  # den
    terms = np.array(terms, dtype=np.float32).tolist()
    try:
        ratios = [a / b for a, b in zip(terms[0::2], terms[1::2])]
    except ZeroDivisionError:
        return None
    out = np.array(ratios, dtype=np.float32).astype(np.float64).reshape(n, _NUM_SCALES).T
    if skip_scale0:
        out[0] = 0.0
    return dict(zip(_SCALE_NAMES, out))


def metrics_from_stats(stats: VifStats, options: Mapping[str, Any]) -> dict[str, float]:
    """libvmaf's scores from one frame's accumulators: base metric name -> value."""
    return metrics_from_sums(stats.to_array()[None], stats.scales[0] is None, options)[0]


# --------------------------------------------------------------------------
# the CPU twin


def check_size(width: int, height: int) -> None:
    """The smallest picture VIF scores (both lanes refuse a smaller one alike)."""
    # every scale must be wider and taller than its filter's half-width
    # (scale 3, an eighth of the picture, needs 2 samples)
    if width < 16 or height < 16:
        raise ValueError(f"vif: a {width}x{height} picture is too small (16x16 at least)")


class VifExtractor:
    """Integer VIF on the luma plane, one frame at a time (not temporal)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        if not 8 <= bitdepth <= 16:
            raise ValueError(f"vif: unsupported bit depth {bitdepth}")
        check_size(width, height)
        self.options = dict(options)
        self.width = width
        self.height = height
        self.bitdepth = bitdepth
        self._scratch = _Scratch()

    def extract(self, index: int, ref, dist) -> list[tuple[int, dict[str, float]]]:
        stats = compute_stats(ref.planes[0], dist.planes[0], self.bitdepth, self.options, self._scratch)
        return [(index, metrics_from_stats(stats, self.options))]

    def flush(self) -> list[tuple[int, dict[str, float]]]:
        return []


DECLARATION = FeatureDeclaration(
    name="vif",
    luma_only=True,
    provides=tuple(f"integer_vif_scale{s}" for s in range(_NUM_SCALES)),
    debug_provides=("integer_vif", "integer_vif_num", "integer_vif_den")
    + tuple(f"integer_vif_{kind}_scale{s}" for s in range(_NUM_SCALES) for kind in ("num", "den")),
    options=(
        *debug_and_gain_limit_options("vif"),
        Option(
            "vif_skip_scale0",
            bool,
            False,
            help="when set, skip scale 0 calculations",
            alias="ssclz",
            feature_param=True,
        ),
    ),
    temporal=False,
    kernel="vif.cu",
    gpu="vif",
    cpu=VifExtractor,
    help="integer visual information fidelity (libvmaf's fixed-point VIF), luma only",
)
