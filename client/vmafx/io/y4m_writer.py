"""Writing YUV4MPEG2 (``.y4m``) files: the inverse of :func:`vmafx.io.video.open_video` for y4m.

Used to make small clips (tests, benchmarks) from the vendored ones::

    with open_video("src.y4m.xz") as r:
        frames = [crop_frame(f, r.info, 96, 64) for f, _ in zip(r, range(4))]
    write_y4m("tiny.y4m", replace(r.info, width=96, height=64), frames)

Planes are written as stored (ceil-size chroma, 16-bit little-endian samples
above 8 bits), which is what the reader expects back.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import numpy as np

from ..formats import PixelFormat, storage_planes
from .video import VideoInfo

__all__ = ["write_y4m", "crop_frame", "y4m_colour_tag"]

_TAGS = {PixelFormat.YUV420P: "420", PixelFormat.YUV422P: "422", PixelFormat.YUV444P: "444",
         PixelFormat.YUV400P: "mono"}


def y4m_colour_tag(fmt: PixelFormat, bitdepth: int) -> str:
    """The ``C`` tag of a y4m header: ``420`` (8-bit 4:2:0 as ``420jpeg`` readers take it), ``420p10`` ..."""
    base = _TAGS.get(fmt)
    if base is None:
        raise ValueError(f"pixel_format: y4m has no colour tag for {fmt.value}")
    return base if bitdepth == 8 else f"{base}p{bitdepth}"


def crop_frame(planes: Sequence[np.ndarray], info: VideoInfo, width: int, height: int) -> list[np.ndarray]:
    """The top-left ``width`` x ``height`` of a frame (chroma cropped to its own stored size)."""
    if not (0 < width <= info.width and 0 < height <= info.height):
        raise ValueError(f"crop: {width}x{height} is not inside {info.width}x{info.height}")
    shapes = storage_planes(info.pixel_format, width, height, info.bitdepth)
    return [np.ascontiguousarray(p[: s.height, : s.width * s.components]) for p, s in zip(planes, shapes)]


def write_y4m(path: str | os.PathLike, info: VideoInfo, frames: Iterable[Sequence[np.ndarray]]) -> int:
    """Write ``frames`` (lists of stored planes of ``info``'s geometry); returns the frame count."""
    shapes = storage_planes(info.pixel_format, info.width, info.height, info.bitdepth)
    dtype = np.dtype(np.uint8) if info.bitdepth == 8 else np.dtype("<u2")
    num, den = info.fps or (25, 1)
    header = (f"YUV4MPEG2 W{info.width} H{info.height} F{num}:{den} Ip A1:1 "
              f"C{y4m_colour_tag(info.pixel_format, info.bitdepth)}\n")
    n = 0
    with open(path, "wb") as f:
        f.write(header.encode("ascii"))
        for planes in frames:
            if len(planes) != len(shapes):
                raise ValueError(f"frame {n}: {len(planes)} planes, {info.pixel_format.value} has {len(shapes)}")
            f.write(b"FRAME\n")
            for i, (p, s) in enumerate(zip(planes, shapes)):
                if p.shape != (s.height, s.width * s.components):
                    raise ValueError(f"frame {n}: plane {i} is {p.shape}, expected {(s.height, s.width * s.components)}")
                f.write(np.ascontiguousarray(p, dtype=dtype).tobytes())
            n += 1
    return n
