"""CAMBI's per-picture arithmetic in numpy, following libvmaf's ``cambi.c``.

The pipeline for one luma plane (``cambi_score`` and what it calls there):

1. :func:`preprocess`: nearest-neighbour resampling to the encode size (the
   float32 position stepping of ``decimate_generic_*_and_convert_to_10b``),
   conversion to 10 bits, and for encodes below 10 bits the 2x2
   anti-dithering average.
2. :func:`spatial_mask`: a pixel is *flat* when it equals its right and lower
   neighbours (edges count as equal); the mask is set where more than
   ``mask_index`` pixels of the 7x7 window around it are flat.
3. Per scale (5 scales, each a 2x decimation of the previous scale's
   *filtered* image and of the mask): a 3x3 separable mode filter
   (:func:`mode_filter`), then a c-value per masked pixel
   (:func:`c_values`) from the histogram of the masked pixels in the
   ``window x window`` window around it, then the mean of the top ``topk``
   c-values (:func:`spatial_pooling`).
4. The scores of the scales weighted 16, 8, 4, 2, 1 and divided by the
   window's pixel count.

The c-value of a pixel of value ``v`` (+ ``num_diffs``, as cambi.c offsets
it) with ``p0`` window pixels at ``v`` is, over the contrast steps ``d`` whose
thresholds allow it, the largest ``float(w_d * p0 * pmax) * lut[p0 + pmax]``
where ``pmax`` is the larger count of ``v + d + 1`` and ``v - d - 1``: one
integer product, its conversion to float and one float multiply, exactly what
the C (and its AVX2 twin) computes.  The counts are what matter; libvmaf gets
them from a sliding per-column histogram, here they come from row-cropped
tables of each value, all the tiles' tables of a scale summed at once
(:func:`window_counts`; the counts are integers, so any way of counting gives
the same result).

Windows are clipped to the picture.  So are libvmaf's, except where a scale is
narrower or shorter than the window's half-width (a very flat aspect ratio at
the coarsest scales, e.g. 3840x216): its sliding loops then read and write
outside the scale's picture (at 3840x216 libvmaf aborts with a corrupted
heap); this twin clips there too.  Checked equal to libvmaf at 2400x216 and
216x2000, where the coarsest scale is just wide enough.
"""

from __future__ import annotations

import numpy as np

from ._cambi_tables import NUM_SCALES, SCALE_WEIGHTS, ContrastTables

__all__ = [
    "adjust_window_size",
    "pooled_mean",
    "scale_sizes",
    "topk_count",
    "weight_scales",
    "c_values",
    "cambi_score",
    "mask_index",
    "mode_filter",
    "nearest_positions",
    "preprocess",
    "spatial_mask",
    "spatial_pooling",
]

MASK_FILTER_SIZE = 7


# ---------------------------------------------------------------------------
# sizes and thresholds fixed at init
# ---------------------------------------------------------------------------


def adjust_window_size(window_size: int, width: int, height: int, high_res_speedup: bool) -> int:
    """cambi.c ``adjust_window_size``: the window scales with (w + h) / (3840 + 2160)."""
    ws = ((window_size * (width + height)) // 375) >> 4
    if high_res_speedup:
        ws = (ws + 1) >> 1
    return (ws | 1) & 0xFFFF


def _ceil_log2(num: int) -> int:
    return 0 if num == 0 else (num - 1).bit_length()


def mask_index(width: int, height: int, filter_size: int = MASK_FILTER_SIZE) -> int:
    """How many flat pixels of the filter window make a pixel part of the mask (strictly more)."""
    shifted = ((width >> 6) * (height >> 6)) & 0xFFFFFFFF
    return ((filter_size * filter_size + 3 * (_ceil_log2(shifted) - 11) - 1) >> 1) & 0xFFFF


def nearest_positions(in_n: int, out_n: int) -> np.ndarray:
    """Source indices of the resampling along one axis, with cambi.c's float32 stepping."""
    ratio = np.float32(in_n) / np.float32(out_n)
    # float start = ratio / 2 - 0.5: the subtraction is in double, stored as float
    x = np.float32(float(ratio / np.float32(2)) - 0.5)
    out = np.empty(out_n, dtype=np.intp)
    for j in range(out_n):
        out[j] = int(float(x) + 0.5)  # (int)(x + 0.5) in double, truncating
        x = np.float32(x + ratio)
    return out


# ---------------------------------------------------------------------------
# (1) preprocessing
# ---------------------------------------------------------------------------


def preprocess(luma: np.ndarray, bitdepth: int, out_w: int, out_h: int, enc_bitdepth: int,
               positions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The luma at the encode size in 10 bits (uint16), anti-dithered below 10-bit encodes."""
    in_h, in_w = luma.shape
    if (in_w, in_h) == (out_w, out_h):
        src = luma
    else:
        ys, xs = positions if positions is not None else (nearest_positions(in_h, out_h),
                                                          nearest_positions(in_w, out_w))
        src = luma[ys[:, None], xs[None, :]]
    # Up to 9 bits the 10-bit samples and the anti-dithering's sums of four (< 2^12)
    # fit uint16: half the memory traffic of int32.
    if bitdepth <= 8:
        img = src.astype(np.uint16) << np.uint16(10 - bitdepth)
    elif bitdepth == 9:
        img = src.astype(np.uint16) << np.uint16(1)
    else:
        shift = bitdepth - 10
        rounding = 0 if shift == 0 else 1 << (shift - 1)
        img = (src.astype(np.int32) + rounding) >> shift
    if enc_bitdepth < 10:
        img = _anti_dither(img)
    return img.astype(np.uint16, copy=False)


def _anti_dither(d: np.ndarray) -> np.ndarray:
    # In place in C, but each output reads only samples to its right and below,
    # which are not yet overwritten: the same as this out-of-place form.
    out = d.copy()
    inner = out[:-1, :-1]
    np.add(d[:-1, :-1], d[:-1, 1:], out=inner)
    inner += d[1:, :-1]
    inner += d[1:, 1:]
    inner >>= 2
    out[:-1, -1] = (d[:-1, -1] + d[1:, -1]) >> 1
    out[-1, :-1] = (d[-1, :-1] + d[-1, 1:]) >> 1
    return out


# ---------------------------------------------------------------------------
# (2) the spatial mask
# ---------------------------------------------------------------------------


def spatial_mask(img: np.ndarray) -> np.ndarray:
    """Bool mask: more than ``mask_index`` flat pixels in the clipped 7x7 window."""
    h, w = img.shape
    flat = np.ones((h, w), dtype=bool)
    flat[:, :-1] = img[:, :-1] == img[:, 1:]
    flat[:-1, :] &= img[:-1, :] == img[1:, :]
    pad = MASK_FILTER_SIZE >> 1
    box = _box_sums(flat, pad)
    return box > mask_index(w, h)


def _box_sums(a: np.ndarray, pad: int) -> np.ndarray:
    """Sum of ``a`` (0/1) over the (2 pad + 1)^2 window around each sample, clipped to
    the plane, in uint8 (so for windows of at most 255 samples)."""
    h, w = a.shape
    k = 2 * pad + 1
    x = np.zeros((h + 2 * pad, w + 2 * pad), dtype=np.uint8)
    x[pad:pad + h, pad:pad + w] = a
    rows = _run_sums(x, k, w)
    return _run_sums(rows.T, k, h).T


def _run_sums(x: np.ndarray, width: int, count: int) -> np.ndarray:
    """Sums of ``width`` consecutive samples along the last axis, starting at 0 ..
    count - 1: sums of 1, 2, 4, .. samples by doubling, added up to ``width``
    (in ``x``'s type, which must hold them)."""
    box, size, done = x, 1, 0  # ``box`` sums ``size`` samples; ``done`` samples are in ``acc``
    acc = None
    while True:
        if width & size:
            part = box[..., done:done + count]
            acc = part.copy() if acc is None else acc + part
            done += size
        if size * 2 > width:
            return acc
        box = box[..., :-size] + box[..., size:]
        size *= 2


# ---------------------------------------------------------------------------
# (3) per scale: mode filter, c-values, pooling
# ---------------------------------------------------------------------------


def _mode3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The value two of three share, else the smallest (non-negative samples).

    Sorted, lo <= mid <= hi: when mid == hi that is the shared value (also when all
    three are equal); otherwise either lo == mid is shared or none is, and the answer
    is lo.  So it is ``max(lo, hi * (mid == hi))``: min/max and one product, each a
    vector pass, instead of masked copies (2.4x faster at 576x324)."""
    mn = np.minimum(a, b)
    mx = np.maximum(a, b)
    lo = np.minimum(mn, c)
    hi = np.maximum(mx, c)
    np.minimum(mx, c, out=mx)
    np.maximum(mn, mx, out=mn)  # the median
    np.multiply(hi, mn == hi, out=hi)
    return np.maximum(lo, hi, out=lo)


def mode_filter(img: np.ndarray) -> np.ndarray:
    """cambi.c ``filter_mode``: horizontal mode-of-3 (end columns kept), then vertical
    mode-of-3 of those rows; the first and last rows keep their original samples."""
    h, w = img.shape
    hz = img.copy()
    if w >= 3:
        hz[:, 1:-1] = _mode3(img[:, :-2], img[:, 1:-1], img[:, 2:])
    out = img.copy()
    if h >= 3:
        out[1:-1] = _mode3(hz[:-2], hz[1:-1], hz[2:])
    return out


def window_counts(img: np.ndarray, counted: np.ndarray, qr: np.ndarray, qc: np.ndarray, pad: int,
                  num_diffs: int, wanted: list[tuple[int, int]] | None = None,
                  qv: np.ndarray | None = None) -> np.ndarray:
    """Window histogram counts at the pixels ``(qr, qc)`` (counted ones):
    ``out[k + nd, n]`` is the number of ``counted`` pixels of value ``v + k`` in the
    clipped window around pixel n (of value ``v``), for k = -nd .. nd
    (``nd = num_diffs``).  With ``wanted``, count k only for the pixels
    ``wanted[k + nd][0] .. wanted[k + nd][1] - 1`` (the others stay 0).  ``qv``: the
    pixels' values when the caller has them (``img[qr, qc]``, any integer type).

    The picture is cut into tiles (64 x 64 or larger); a tile's *region* is the
    tile grown by the window's half-width, so it holds every window of the tile's
    pixels.  Each (tile, value) pair that a pixel of the tile asks for and that
    occurs in the region gets a table: that value's indicator over the region's
    rows from the first to the last that hold the value, box-summed along each
    row over the window's width (at the tile's columns).  All the tables of a
    scale are the rows of one buffer, summed down the whole buffer at once: a
    window's count is the difference of two of those sums (the rows of the tables
    above cancel out).  The sums wrap around (uint8 when a window holds at most
    255 pixels, else uint16), which leaves those differences exact.  The regions
    read zeros outside the picture, which is how the windows are clipped.

    libvmaf's cambi.c slides per-column histograms down the picture instead;
    the counts are integers, so any way of counting gives the same numbers.
    """
    h, w = img.shape
    nd = num_diffs
    nk = 2 * nd + 1
    nq = qr.size
    out = np.zeros((nk, nq), dtype=np.uint16)
    if nq == 0:
        return out
    v = img.astype(np.int32)
    cvals = v[counted]
    vmin, vmax = int(cvals.min()), int(cvals.max())
    # values as "slots": 0 for not counted, else v - vmin + nd + 1, so that every
    # asked-for value v + k of a counted v is a slot from 1 to nslot - 1
    nslot = vmax - vmin + 2 * nd + 2
    # tiles of 64 (a power of two: positions by shifts), wide enough that a region is
    # at most two tiles wide
    shift = max(6, (2 * pad - 1).bit_length())
    tile = 1 << shift
    span = tile + 2 * pad
    nty, ntx = -(-h // tile), -(-w // tile)
    hp = nty * tile + 2 * pad  # the padded height
    # the counted values' slots, and for the tables a short code of each (0: not
    # counted): the rank among the values that occur, one byte when it fits
    ps = cvals - (vmin - nd - 1)
    occurring = np.zeros(nslot, dtype=bool)
    occurring[ps] = True
    code_of = np.cumsum(occurring, dtype=np.int32)
    code_type = np.uint8 if code_of[-1] < 256 else np.uint16
    code_of = code_of.astype(code_type)
    slots = np.zeros((hp, ntx * tile + 2 * pad), dtype=code_type)
    slots[pad:pad + h, pad:pad + w][counted] = code_of[ps]
    # the regions' column strips, each contiguous: strips[tx, row] is padded row
    # ``row`` of the columns of tile column tx's regions
    strips = np.ascontiguousarray(
        np.lib.stride_tricks.sliding_window_view(slots, span, axis=1)[:, ::tile].transpose(1, 0, 2))

    # (tile, value) pairs asked for: the values of a tile's pixels, +- nd; tiles
    # are numbered down each column of tiles
    qslot = (v[qr, qc] if qv is None else qv) - (vmin - nd - 1)
    qtile = (qc >> shift) * nty + (qr >> shift)
    asked = np.zeros((ntx * nty, nslot), dtype=bool)
    asked[qtile, qslot] = True
    near = asked.copy()
    for k in range(1, nd + 1):
        near[:, k:] |= asked[:, :-k]
        near[:, :-k] |= asked[:, k:]
    # The padded rows of each strip in which each value occurs: a counted pixel at
    # padded column x lies in strip x // tile and, when x % tile < 2 pad, in the
    # one to its left.  A pixel equal to its left neighbour, in the same strips,
    # adds nothing: only the starts of runs are looked at.
    wp = slots.shape[1]
    phase = np.arange(wp) % tile
    starts = slots != 0
    starts[:, 1:] &= (slots[:, 1:] != slots[:, :-1]) | ((phase[1:] == 0) | (phase[1:] == 2 * pad))
    pr, pc = np.nonzero(starts)
    pcode = slots[pr, pc].astype(np.intp)
    ncode = int(code_of[-1]) + 1
    # the first and last row of each value in each strip, per band of ``tile`` rows
    tcol = pc >> shift
    own = tcol < ntx  # not so for pixels in the right padding of the last strip
    left = ((pc & (tile - 1)) < 2 * pad) & (tcol > 0)
    nband = nty + 1  # the last band holds the bottom padding only
    keys = np.concatenate(((tcol[own] * ncode + pcode[own]) * nband + (pr[own] >> shift),
                           ((tcol[left] - 1) * ncode + pcode[left]) * nband + (pr[left] >> shift)))
    at_rows = np.concatenate((pr[own], pr[left])).astype(np.int32)
    lowest = np.full(ntx * ncode * nband, hp, dtype=np.int32)
    highest = np.full(ntx * ncode * nband, -1, dtype=np.int32)
    np.minimum.at(lowest, keys, at_rows)
    np.maximum.at(highest, keys, at_rows)
    # A tile's region is its band and the first 2 pad rows of the next.  Its table
    # covers the value's rows from the first to the last there; in the next band
    # only whether the value occurs before the region's end is known, so the table
    # may run on to that end (rows of true zeros, the sums stay exact).
    ptile, pslot = np.nonzero(near & occurring)
    ptx, pty = ptile // nty, ptile % nty
    k0 = (ptx * ncode + code_of[pslot]) * nband + pty
    top, end = pty * tile, pty * tile + span
    in_band = highest[k0] >= 0
    in_next = lowest[k0 + 1] < end
    has = in_band | in_next
    first = np.where(in_band, lowest[k0], lowest[k0 + 1]) - top
    last = np.where(in_next, np.minimum(highest[k0 + 1], end - 1), highest[k0]) - top
    ptile, pslot, pty, ptx = ptile[has], pslot[has], pty[has], ptx[has]
    first, height = first[has], (last - first + 1)[has]
    # The tables go into buffers of at most MAX_BUFFER_ROWS rows (a 4K picture's
    # would not fit one in a reasonable memory), each for the pixels of a run of
    # tile columns; pairs come in tile-column order.
    code_row = code_of[pslot]
    strip_end = np.searchsorted(ptx, np.arange(1, ntx + 1))  # [tx]: the pairs of columns <= tx
    rows_through = np.concatenate(([0], np.cumsum(height)))[strip_end]  # and their rows
    pcol = qc >> shift
    lo_pair = 0
    ctx = (strips.reshape(-1, span), tile, span, hp, pad, nd, wanted)
    while lo_pair < ptile.size:
        # the next tile columns whose rows fit (at least one column)
        tx0 = int(ptx[lo_pair])
        base_rows = rows_through[tx0 - 1] if tx0 else 0
        fits = int(np.searchsorted(rows_through, base_rows + MAX_BUFFER_ROWS, "right"))
        tx1 = max(tx0 + 1, min(fits, ntx))
        hi_pair = int(strip_end[tx1 - 1])
        pairs = slice(lo_pair, hi_pair)
        if tx0 == 0 and hi_pair == ptile.size:
            pixels = None  # all of them
        else:
            pixels = np.flatnonzero((pcol >= tx0) & (pcol < tx1))
        _count_group(out, ctx, ptile[pairs], pslot[pairs], ptx[pairs], pty[pairs], first[pairs],
                     height[pairs], code_row[pairs], qtile, qslot, qr, qc, pixels, nty * ntx * nslot, nslot)
        lo_pair = hi_pair
    return out


#: most rows of one buffer of tables (at 64 columns, 8 MB in uint16)
MAX_BUFFER_ROWS = 1 << 16


def _count_group(out, ctx, ptile, pslot, ptx, pty, first, height, code_row, qtile, qslot, qr, qc,
                 pixels, nkeys, nslot) -> None:
    """:func:`window_counts` for one buffer of tables: the pairs given, the pixels of
    their tile columns (``pixels``: their indices, None for all)."""
    rows_of, tile, span, hp, pad, nd, wanted = ctx
    nq = qr.size
    npair = ptile.size
    # buffer rows: a zero row, then each pair's rows first .. first + height - 1
    start = np.zeros(npair, dtype=np.int64)
    np.cumsum(height[:-1], out=start[1:])
    start += 1
    nrow = int(start[-1] + height[-1]) - 1
    block = 64
    total = -(-(nrow + 1) // block) * block
    strip_row = np.arange(1, nrow + 1) + np.repeat(ptx * hp + pty * tile + first - start, height)
    row_code = np.repeat(code_row, height)[:, None]
    # Each row's sums across the window's width, at the tile's columns: box sums of
    # widths 1, 2, 4, .. by doubling, added up to 2 pad + 1 (in uint8: at most 65).
    # In chunks of rows that stay in cache.  The sums down the buffer wrap around in
    # uint8 when no window holds more than 255 pixels, else in uint16.
    width = 2 * pad + 1
    across = np.zeros((total, tile), dtype=np.uint8 if width * width < 256 else np.uint16)
    chunk = 8192
    for c0 in range(0, nrow, chunk):
        c1 = min(nrow, c0 + chunk)
        ones = (np.take(rows_of, strip_row[c0:c1], axis=0) == row_code[c0:c1]).view(np.uint8)
        across[1 + c0:1 + c1] = _run_sums(ones, width, tile)
    # then the prefix sums down the buffer: within blocks of rows by adding each row
    # to the next (vectorised across blocks), then the blocks' totals
    by_block = across.reshape(-1, block, tile)
    for r in range(1, block):
        by_block[:, r] += by_block[:, r - 1]
    carry = np.cumsum(by_block[:-1, -1], axis=0, dtype=across.dtype)
    by_block[1:] += carry[:, None, :]
    flat = across.ravel()

    # A pixel's window in its tile's region: rows row_in .. row_in + 2 pad, columns
    # col .. col + 2 pad (the first column of ``across`` is that difference).  Its
    # count is the difference of the sums down ``across`` at the window's last row
    # and at the row above its first, in the table's rows: above the pair's rows
    # the sums are those of the row before them, below them its last row's.  Those
    # two rows' flat offsets, for each pair and each row_in; pair 0 is an empty one
    # at the buffer's zero row: the values asked for that do not occur in the region.
    above = _row_offsets(start, first, height, np.arange(tile), tile)
    below = _row_offsets(start, first, height, np.arange(tile) + (2 * pad + 1), tile)
    pair_of = np.zeros(nkeys, dtype=np.intp)
    pair_of[ptile * nslot + pslot] = np.arange(1, npair + 1) * tile
    if pixels is None:
        key = qtile.astype(np.intp) * nslot + qslot
        row_in = qr & (tile - 1)
        col = qc & (tile - 1)
    else:
        key = qtile[pixels].astype(np.intp) * nslot + qslot[pixels]
        row_in = qr[pixels] & (tile - 1)
        col = qc[pixels] & (tile - 1)
    for k in range(-nd, nd + 1):
        lo, hi = (0, nq) if wanted is None else wanted[k + nd]
        if pixels is not None:
            lo, hi = int(np.searchsorted(pixels, lo)), int(np.searchsorted(pixels, hi))
        if hi <= lo:
            continue
        at = np.take(pair_of, key[lo:hi] + k)
        at += row_in[lo:hi]
        top = np.take(above, at)
        top += col[lo:hi]
        bottom = np.take(below, at)
        bottom += col[lo:hi]
        counts = np.take(flat, bottom) - np.take(flat, top)
        if pixels is None:
            out[k + nd, lo:hi] = counts
        else:
            out[k + nd, pixels[lo:hi]] = counts


def _row_offsets(start: np.ndarray, first: np.ndarray, height: np.ndarray, region_rows: np.ndarray,
                 width: int) -> np.ndarray:
    """Flat offsets (rows of ``width``) of the buffer rows whose sums stand for
    ``region_rows`` of each pair's table: an empty pair at row 0, then the pairs."""
    table = np.zeros((start.size + 1, region_rows.size), dtype=np.intp)
    table[1:] = start[:, None] - 1 + np.minimum(np.maximum(region_rows[None, :] - first[:, None], 0),
                                                height[:, None])
    return (table * width).ravel()


def c_values(img: np.ndarray, mask: np.ndarray, window: int, tables: ContrastTables,
             lut: np.ndarray) -> np.ndarray:
    """cambi.c ``calculate_c_values``: the float32 c-value of every pixel (0 off the mask)."""
    qr, qc, cq = _c_values_at(img, mask, window, tables, lut)
    out = np.zeros(img.shape, dtype=np.float32)
    out[qr, qc] = cq
    return out


def _c_values_at(img: np.ndarray, mask: np.ndarray, window: int, tables: ContrastTables,
                 lut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pixels whose c-value libvmaf computes (rows, columns) and their c-values;
    every other pixel's is 0."""
    nd = tables.num_diffs
    v = img.astype(np.int32)
    counted = mask & (v >= tables.band_base) & (v < tables.band_base + tables.band_size)
    # The values whose c-value libvmaf computes: for contrast step d, those with
    # v + nd <= tvi_for_diff[d] and v + nd + d + 1 > vlt_luma, an interval of v.
    steps = [(tables.vlt_luma - d - nd, tables.tvi_for_diff[d] - nd) for d in range(nd)]
    asked = np.zeros(int(v.max()) + 1, dtype=bool)
    for lo, hi in steps:
        asked[max(lo, 0):max(hi + 1, 0)] = True
    qr, qc = np.nonzero(counted & np.take(asked, v))
    if qr.size == 0:
        return qr, qc, np.zeros(0, dtype=np.float32)
    qv = v[qr, qc]
    qr, qc = qr.astype(np.int32), qc.astype(np.int32)  # half the memory of the pixel lists
    wanted = [(0, 0)] * (2 * nd + 1)
    wanted[nd] = (0, qv.size)
    if all(steps[d + 1][0] <= steps[d][0] and steps[d + 1][1] >= steps[d][1] for d in range(nd - 1)):
        # Nested intervals (the usual case: tvi_for_diff grows with d): order the
        # pixels by the first step they take (stably, so row-major within it), and
        # the pixels of step d are the first ones.
        first_step = np.full(asked.size, nd - 1, dtype=np.uint8)
        for d in range(nd - 1, -1, -1):
            lo, hi = steps[d]
            first_step[max(lo, 0):max(hi + 1, 0)] = d
        cls = first_step[qv]
        order = np.argsort(cls, kind="stable")
        ends = np.cumsum(np.bincount(cls, minlength=nd))
        qr, qc, qv = qr[order], qc[order], qv[order]
        for d in range(nd):
            wanted[nd - d - 1] = wanted[nd + d + 1] = (0, int(ends[d]))
    else:
        # sorted by value, so that the pixels of step d are one slice
        order = np.argsort(qv.astype(np.int16), kind="stable")
        qr, qc, qv = qr[order], qc[order], qv[order]
        for d, (lo, hi) in enumerate(steps):
            span = (int(np.searchsorted(qv, lo, "left")), int(np.searchsorted(qv, hi, "right")))
            wanted[nd - d - 1] = wanted[nd + d + 1] = span
    counts = window_counts(img, counted, qr, qc, window >> 1, nd, wanted, qv)
    return qr, qc, c_values_from_counts(counts, qv, tables, lut, wanted)


def c_values_from_counts(counts: np.ndarray, qv: np.ndarray, tables: ContrastTables,
                         lut: np.ndarray, wanted: list[tuple[int, int]] | None = None) -> np.ndarray:
    """c-values (float32) of pixels of value ``qv`` from their window counts of qv - nd .. qv + nd.

    With ``wanted`` (as :func:`window_counts` takes it), step d is taken for the
    pixels of the slice ``wanted[nd + d + 1]``, which must be those whose
    thresholds allow it.
    """
    nd = tables.num_diffs
    n = qv.size
    va = qv.astype(np.int32) + nd
    p0 = counts[nd].astype(np.int32)
    c = np.zeros(n, dtype=np.float32)
    for d in range(nd):
        lo, hi = (0, n) if wanted is None else wanted[nd + d + 1]
        if hi <= lo:
            continue
        pz = p0[lo:hi]
        pmax = np.maximum(counts[nd + d + 1, lo:hi], counts[nd - d - 1, lo:hi]).astype(np.int32)
        # (float)(weight * p0 * pmax) * reciprocal_lut[pmax + p0], all in float32; the
        # product is below 2^31 (weight <= 9, counts <= 65 x 65)
        val = (tables.weights[d] * pz * pmax).astype(np.float32) * lut[pmax + pz]
        cs = c[lo:hi]
        if wanted is None:
            vs = va[lo:hi]
            better = (val > cs) & (vs <= tables.tvi_for_diff[d]) & (vs + d + 1 > tables.vlt_luma)
            np.copyto(cs, val, where=better)
        else:
            # every pixel of the slice takes step d: the larger of the two (finite,
            # non-negative floats: the same as a copy where val > cs)
            np.maximum(cs, val, out=cs)
    return c


def topk_count(topk: float, n: int) -> int:
    """How many c-values the pooling averages: ``clip(topk * n, 1, n)``, truncated as C does."""
    k = int(topk * n)
    return 1 if k < 1 else (n if k > n else k)


def pooled_mean(total: int, k: int) -> float:
    """The mean of the top ``k`` c-values from their exact sum times 2^24 (an integer)."""
    return (float(total) / float(1 << 24)) / k


def spatial_pooling(c: np.ndarray, topk: float) -> float:
    """Mean of the ``topk`` share of largest c-values (cambi.c ``spatial_pooling``).

    libvmaf sums the selected floats in double in quick_select's order.  Every
    non-zero c-value is at least 0.5 (p0 and pmax are at least 1), so each is a
    whole multiple of 2^-24 and the sum is taken exactly in integers here and
    rounded once; libvmaf's double sum is exact too while it stays below 2^29
    (e.g. 1080p with a mean top-k c-value under ~430), so the two agree.
    """
    flat = c.ravel()
    return _pool(flat, flat.size, topk)


def _pool(values: np.ndarray, n: int, topk: float) -> float:
    """:func:`spatial_pooling` of ``n`` c-values: ``values`` and the rest zeros.

    c-values are never negative, so the top k are the non-zero ones when there
    are at most k of them (the zeros add nothing), else the top k of those.
    """
    k = topk_count(topk, n)
    nz = values[values > 0]
    top = nz if nz.size <= k else np.partition(nz, nz.size - k)[nz.size - k:]
    scaled = (top.astype(np.float64) * float(1 << 24)).astype(np.int64)
    total = sum(int(part.sum()) for part in np.array_split(scaled, max(1, top.size >> 22)))
    return pooled_mean(total, k)


def weight_scales(scores, window: int) -> float:
    """cambi.c ``weight_scores_per_scale``: the 16, 8, 4, 2, 1 inner product over the window's pixels."""
    score = 0.0
    for s, wgt in zip(scores, SCALE_WEIGHTS):
        score += s * wgt
    pixels_in_window = (2 * (window >> 1) + 1) ** 2 & 0xFFFF
    return score / pixels_in_window


def scale_sizes(width: int, height: int, high_res_speedup: bool) -> list[tuple[int, int]]:
    """(w, h) of each scale: halved (rounding up) before every scale but the first,
    and before the first too with the high-resolution speed-up."""
    sizes = []
    for scale in range(NUM_SCALES):
        if scale > 0 or high_res_speedup:
            width, height = (width + 1) >> 1, (height + 1) >> 1
        sizes.append((width, height))
    return sizes


def cambi_score(img: np.ndarray, window: int, topk: float, tables: ContrastTables, lut: np.ndarray,
                high_res_speedup: bool = False, heatmap=None) -> float:
    """The CAMBI score of one preprocessed (10-bit, encode-size) luma plane.

    ``heatmap(scale, c_values)`` is called with each scale's c-values when given.
    """
    mask = spatial_mask(img)
    image = img
    scores = []
    for scale in range(NUM_SCALES):
        if scale > 0 or high_res_speedup:
            image = image[::2, ::2]
            mask = mask[::2, ::2]
        image = mode_filter(image)
        qr, qc, cq = _c_values_at(image, mask, window, tables, lut)
        if heatmap is not None:
            c = np.zeros(image.shape, dtype=np.float32)
            c[qr, qc] = cq
            heatmap(scale, c)
        scores.append(_pool(cq, image.size, topk))
    return weight_scales(scores, window)
