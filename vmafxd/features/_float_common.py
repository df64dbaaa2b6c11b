"""Shared arithmetic of libvmaf's float extractors (``float_vif``, ``float_adm``, ``float_motion``).

These features compute in C ``float`` with a fixed order of operations, and
every reordering changes the last bits, so the helpers here follow libvmaf's
loops op for op in ``np.float32`` (numpy's float32 elementwise arithmetic is
IEEE single precision, with no fused multiply-add and no excess precision,
which is what libvmaf's C compiled for baseline x86-64 does).

* :func:`to_float_plane` is libvmaf's ``picture_copy`` (``picture_copy.c``):
  ``(float)sample / scaler + offset`` with scaler 1, 4, 16 or 256 and offset
  -128 (0 for ``float_psnr`` and ``float_moment``).
* :func:`double_sum` is libvmaf's ``double`` accumulator of float terms
  (``psnr.c``, ``moment.c``): ``cum += term`` over the plane in row order.
* :func:`separable_filter` is libvmaf's ``vif_filter1d_s`` /
  ``convolution_f32_c_s`` (``vif_tools.c``, ``common/convolution.c``; the AVX
  variants add in the same order): a vertical then a horizontal pass, each
  output ``accum = 0; accum += f[k] * x[k]`` for ``k`` ascending, with edges
  mirrored without repeating the edge sample.
* :func:`row_major_sum` is the two-level sum libvmaf uses everywhere: a float
  accumulator per row, summed left to right, then the row sums added top to
  bottom into a float.  ``np.add.accumulate`` is strictly sequential, so it
  reproduces both levels.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["F32", "SCALERS", "FLOAT_BITDEPTHS", "to_float_plane", "double_sum", "mirror_pad", "separable_filter", "filter_stack", "row_major_sum", "row_sums"]

F32 = np.float32
_ZERO = np.float32(0.0)

#: picture_copy's divisor per bit depth
SCALERS = {8: 1.0, 10: 4.0, 12: 16.0, 16: 256.0}
#: the depths picture_copy reads as what they are (any other it reads as 8-bit samples)
FLOAT_BITDEPTHS = tuple(SCALERS)
#: the same for to_float_plane: None where the samples are used as they are (8 bits)
_SCALERS = {bd: None if s == 1.0 else np.float32(s) for bd, s in SCALERS.items()}


def to_float_plane(plane: np.ndarray, bitdepth: int, offset: float = -128.0) -> np.ndarray:
    """A luma (or chroma) plane as libvmaf's float extractors see it: ``sample / scaler + offset``."""
    if bitdepth not in _SCALERS:
        # libvmaf's picture_copy reads any other depth as 8-bit samples (garbage);
        # refuse it rather than invent a meaning.
        raise ValueError(f"float features take 8-, 10-, 12- or 16-bit pictures, not {bitdepth}-bit")
    out = plane.astype(np.float32)
    scaler = _SCALERS[bitdepth]
    if scaler is not None:
        out /= scaler
    if offset:
        out += np.float32(offset)
    return out


def double_sum(terms: np.ndarray, bitdepth: int) -> float:
    """libvmaf's ``double cum = 0; cum += term`` over float32 ``terms`` in row-major order.

    Up to 12 bits every term these features add (a sample ``k / scaler``, its
    square, or a squared difference of two) is a multiple of 2^-8 below 2^16,
    exact in float (a square is below 2^24 units of 2^-8), and every partial
    sum stays below 2^53 units for any plane up to 16384 x 16384 (2^28
    samples), so no addition rounds and any order gives libvmaf's double:
    numpy's pairwise sum is used.  At 16 bits a
    square ``(k / 256)^2`` is rounded to float and the sums can round, so the
    additions are made one after another, as libvmaf makes them.
    """
    if bitdepth <= 12:
        return float(terms.sum(dtype=np.float64))
    flat = terms.reshape(-1).astype(np.float64)
    return float(np.add.accumulate(flat)[-1]) if flat.size else 0.0


@functools.lru_cache(maxsize=64)
def _mirror_index(n: int, radius: int) -> np.ndarray:
    idx = np.abs(np.arange(-radius, n + radius))
    idx = np.where(idx >= n, 2 * (n - 1) - idx, idx)
    idx.flags.writeable = False
    return idx


def mirror_pad(a: np.ndarray, radius: int, axis: int) -> np.ndarray:
    """Mirror ``radius`` samples at both ends of ``axis`` without repeating the edge (``x[-k] = x[k]``)."""
    n = a.shape[axis]
    if radius and n <= radius:
        raise ValueError(f"a dimension of {n} is too small for a filter of half-width {radius}")
    return np.take(a, _mirror_index(n, radius), axis=axis)


def _filter_axis(padded: np.ndarray, taps: np.ndarray, n: int, axis: int) -> np.ndarray:
    """``accum = 0; accum += taps[k] * x[k]`` along ``axis`` of an already mirrored array."""
    shape = list(padded.shape)
    shape[axis] = n
    acc = np.zeros(shape, np.float32)
    term = np.empty(shape, np.float32)
    sl = [slice(None)] * padded.ndim
    for k, t in enumerate(taps):
        sl[axis] = slice(k, k + n)
        np.multiply(t, padded[tuple(sl)], out=term)
        np.add(acc, term, out=acc)
    return acc


#: samples per plane in one strip of rows of filter_stack (keeps a strip's temporaries in cache)
_STRIP_SAMPLES = 8192


def filter_stack(stack: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """The separable filter of every plane of a ``(planes, h, w)`` float32 stack (vertical pass first).

    Worked in strips of rows: every output is still ``sum taps[k] * x[k]``
    in tap order, so the strips only change what stays in cache.
    """
    taps = np.asarray(taps, dtype=np.float32)
    r = len(taps) // 2
    planes, h, w = stack.shape
    padded = mirror_pad(stack, r, 1)
    out = np.empty((planes, h, w), np.float32)
    rows = max(4, _STRIP_SAMPLES // max(w, 1))
    for y0 in range(0, h, rows):
        y1 = min(h, y0 + rows)
        tmp = _filter_axis(padded[:, y0:y1 + 2 * r], taps, y1 - y0, 1)
        out[:, y0:y1] = _filter_axis(mirror_pad(tmp, r, 2), taps, w, 2)
    return out


def separable_filter(src: np.ndarray, taps: np.ndarray, *, square: bool = False,
                     other: np.ndarray | None = None) -> np.ndarray:
    """libvmaf's float separable filter of ``src`` (float32 2-D), vertical pass first.

    ``square``: the vertical pass filters ``src * src`` (``vif_filter1d_sq_s``);
    ``other``: it filters ``src * other`` (``vif_filter1d_xy_s``).  The
    product is per sample and comes before the tap, so forming it first is
    the same arithmetic.  The horizontal pass filters the vertical result.
    """
    if square:
        src = src * src
    elif other is not None:
        src = src * other
    return filter_stack(src[None], taps)[0]


def row_sums(a: np.ndarray) -> np.ndarray:
    """Per-row float sums, each added left to right (libvmaf's ``accum_inner``)."""
    if a.shape[-1] == 0:
        return np.zeros(a.shape[:-1], np.float32)
    return np.add.accumulate(a, axis=-1, dtype=np.float32)[..., -1]


def row_major_sum(a: np.ndarray) -> np.float32:
    """libvmaf's float sum of a 2-D array: row sums left to right, then added top to bottom."""
    rows = row_sums(a)
    if rows.size == 0:
        return np.float32(0.0)
    return np.add.accumulate(rows, dtype=np.float32)[-1]
