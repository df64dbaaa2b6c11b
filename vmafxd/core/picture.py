"""The planar picture every feature scores, and its conversion from buffers.

A :class:`Picture` is what libvmaf calls a ``VmafPicture``: planar Y, Cb, Cr
(or Y alone) with libvmaf's floor-size chroma, samples ``uint8`` at 8 bits and
``uint16`` above.  Planes may be strided numpy views straight onto a mapped
buffer: nothing here copies unless the format needs a conversion (P010's
shift; a 16-bit buffer whose rows are not 2-byte aligned).

:func:`picture_from_buffer` is the CPU twin of the GPU lanes' conversion
kernels (NV12/P010 to planar, bit-depth shifts): they must produce the same
samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vmafx.formats import (
    PixelFormat,
    Subsampling,
    scoring_planes,
    storage_planes,
)

__all__ = ["Picture", "PlaneLayout", "picture_from_buffer", "picture_from_planes", "picture_from_stored"]


@dataclass(frozen=True)
class Picture:
    """Planar samples as scoring sees them.

    ``planes[0]`` is luma (``height x width``); ``planes[1:]`` are Cb and Cr
    cropped to libvmaf's ``(w >> sx) x (h >> sy)``.  ``dtype`` is ``uint8``
    when ``bitdepth == 8`` and ``uint16`` otherwise.
    """

    planes: tuple[np.ndarray, ...]
    bitdepth: int
    subsampling: Subsampling

    @property
    def width(self) -> int:
        return self.planes[0].shape[1]

    @property
    def height(self) -> int:
        return self.planes[0].shape[0]

    @property
    def luma(self) -> np.ndarray:
        return self.planes[0]


@dataclass(frozen=True)
class PlaneLayout:
    """Where one plane lives in a buffer: byte offset of its first row and row pitch."""

    offset: int
    pitch: int


def _dtype(bitdepth: int) -> np.dtype:
    return np.dtype(np.uint8) if bitdepth == 8 else np.dtype("<u2")


def picture_from_planes(
    planes: Sequence[np.ndarray], bitdepth: int, subsampling: Subsampling
) -> Picture:
    """A picture from planar arrays that may carry ceil-size chroma (as files do).

    Chroma is cropped (a view, no copy) to libvmaf's floor size.
    """
    y = planes[0]
    h, w = y.shape
    shapes = scoring_planes(subsampling, w, h)
    out = [y]
    for plane, (cw, ch) in zip(planes[1:], shapes[1:]):
        if plane.shape[0] < ch or plane.shape[1] < cw:
            raise ValueError(f"chroma plane {plane.shape} smaller than {ch}x{cw}")
        out.append(plane[:ch, :cw])
    return Picture(tuple(out), bitdepth, subsampling)


def _plane_view(buf: np.ndarray, layout: PlaneLayout, rows: int, row_bytes: int) -> np.ndarray:
    """A (rows, row_bytes) uint8 view of ``buf`` at ``layout``; bounds are the caller's check."""
    end = layout.offset + layout.pitch * (rows - 1) + row_bytes
    if rows <= 0 or row_bytes <= 0 or layout.offset < 0 or end > buf.size:
        raise ValueError(
            f"plane at offset {layout.offset} pitch {layout.pitch} with {rows} rows of "
            f"{row_bytes} bytes ends at {end}, beyond the buffer's {buf.size} bytes"
        )
    return np.lib.stride_tricks.as_strided(
        buf[layout.offset:], shape=(rows, row_bytes), strides=(layout.pitch, 1), writeable=False
    )


def _as_samples(view: np.ndarray, bps: int) -> np.ndarray:
    if bps == 1:
        return view
    if view.ctypes.data % 2 == 0 and view.strides[0] % 2 == 0:
        return view.view("<u2")
    # An odd offset or pitch cannot be viewed as uint16 in place: copy the rows.
    return np.ascontiguousarray(view).view("<u2")


def picture_from_buffer(
    buf: np.ndarray,
    fmt: PixelFormat,
    width: int,
    height: int,
    bitdepth: int,
    layouts: Sequence[PlaneLayout],
) -> Picture:
    """Convert one frame held in ``buf`` (a flat uint8 array) to a planar picture.

    ``layouts`` gives each stored plane's offset and pitch.  NV12 chroma is
    de-interleaved as strided views; P010 samples are shifted right by 6 into
    10-bit values (P010 keeps its 10 significant bits in the high bits).
    """
    fixed = fmt.fixed_bitdepth()
    if fixed is not None:
        bitdepth = fixed
    shapes = storage_planes(fmt, width, height, bitdepth)
    if len(layouts) != len(shapes):
        raise ValueError(f"{fmt.value} needs {len(shapes)} planes, got {len(layouts)}")
    bps = shapes[0].bytes_per_sample
    raw = [
        _as_samples(_plane_view(buf, lay, s.height, s.row_bytes), bps)
        for lay, s in zip(layouts, shapes)
    ]
    if fmt.semi_planar:
        y, uv = raw
        planes = [y, uv[:, 0::2], uv[:, 1::2]]
        if fmt is PixelFormat.P010:
            planes = [np.right_shift(p, 6) for p in planes]
    else:
        planes = raw
    return picture_from_planes(planes, bitdepth, fmt.subsampling)


def picture_from_stored(planes: Sequence[np.ndarray], fmt: PixelFormat, bitdepth: int) -> Picture:
    """A picture from planes as a file stores them (see :mod:`vmafx.io.video`)."""
    if fmt.semi_planar:
        y, uv = planes
        split = [y, uv[:, 0::2], uv[:, 1::2]]
        if fmt is PixelFormat.P010:
            split = [np.right_shift(p, 6) for p in split]
        return picture_from_planes(split, fmt.fixed_bitdepth() or bitdepth, fmt.subsampling)
    return picture_from_planes(planes, bitdepth, fmt.subsampling)
