"""Pixel formats and plane geometry (and the first bytes of a y4m stream, ``Y4M_MAGIC``).

Pure standard library: the wire protocol validates buffer layouts with this
module, so it must not pull in numpy.

Two families of formats exist:

* planar (``yuv420p``, ``yuv422p``, ``yuv444p``, ``yuv400p``) at 8 bits (one
  byte a sample) or 10 bits (16-bit little-endian samples, values 0..1023);
* semi-planar ``nv12`` (8-bit Y plane, then interleaved CbCr at half width and
  half height) and ``p010`` (the same with 16-bit samples that keep their 10
  significant bits in the *high* bits, as Microsoft's P010 and DRM's
  ``DRM_FORMAT_P010`` define it).

Scoring always works on planar pictures.  The chroma planes that scoring sees
are libvmaf's: ``(w >> 1) x (h >> 1)`` for 4:2:0 and ``(w >> 1) x h`` for
4:2:2, so for odd sizes the last chroma column/row of a file is ignored
(libvmaf's ``VmafPicture`` allocates floor-size chroma; see the reference
data's README, "Odd sizes").  Files and buffers, on the other hand, carry
ceil-size chroma (``(w + 1) >> 1``) the way y4m and FFmpeg lay them out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: the first bytes of a YUV4MPEG2 stream (a y4m file or pipe)
Y4M_MAGIC = b"YUV4MPEG2"

__all__ = [
    "SCALE_FLAGS",
    "PixelFormat",
    "PlaneShape",
    "Subsampling",
    "parse_pixel_format",
    "storage_planes",
    "scoring_planes",
    "packed_frame_size",
    "MAX_DIMENSION",
]

#: The largest width or height accepted anywhere (libvmaf has no fixed limit;
#: 16384 covers 16K video and keeps every plane offset inside 2**31 pitches).
MAX_DIMENSION = 16384


class Subsampling(enum.Enum):
    """Chroma subsampling, as the pair (horizontal shift, vertical shift)."""

    S420 = (1, 1)
    S422 = (1, 0)
    S444 = (0, 0)
    S400 = None  # luma only

    @property
    def has_chroma(self) -> bool:
        return self.value is not None


class PixelFormat(enum.Enum):
    """A pixel format as buffers and files carry it."""

    YUV420P = "yuv420p"
    YUV422P = "yuv422p"
    YUV444P = "yuv444p"
    YUV400P = "yuv400p"
    NV12 = "nv12"
    P010 = "p010"

    @property
    def subsampling(self) -> Subsampling:
        return _SUBSAMPLING[self]

    @property
    def semi_planar(self) -> bool:
        return self in (PixelFormat.NV12, PixelFormat.P010)

    def fixed_bitdepth(self) -> int | None:
        """The bit depth the format implies, or None when it is a parameter."""
        return {PixelFormat.NV12: 8, PixelFormat.P010: 10}.get(self)

    @property
    def plane_count(self) -> int:
        if self.semi_planar:
            return 2
        return 3 if self.subsampling.has_chroma else 1


_SUBSAMPLING = {
    PixelFormat.YUV420P: Subsampling.S420,
    PixelFormat.YUV422P: Subsampling.S422,
    PixelFormat.YUV444P: Subsampling.S444,
    PixelFormat.YUV400P: Subsampling.S400,
    PixelFormat.NV12: Subsampling.S420,
    PixelFormat.P010: Subsampling.S420,
}

_ALIASES = {
    "420": PixelFormat.YUV420P,
    "422": PixelFormat.YUV422P,
    "444": PixelFormat.YUV444P,
    "400": PixelFormat.YUV400P,
    "gray": PixelFormat.YUV400P,
    "yuv420p10le": PixelFormat.YUV420P,
    "yuv422p10le": PixelFormat.YUV422P,
    "yuv444p10le": PixelFormat.YUV444P,
}


def parse_pixel_format(name: str) -> PixelFormat:
    """Accepts our names, libvmaf's short names (420/422/444/400) and FFmpeg's."""
    key = str(name).strip().lower()
    try:
        return PixelFormat(key)
    except ValueError:
        pass
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(f"unknown pixel format {name!r}")


@dataclass(frozen=True)
class PlaneShape:
    """Width and height in samples, and bytes per sample, of one plane."""

    width: int
    height: int
    bytes_per_sample: int
    #: samples per pixel in the row: 2 for an interleaved CbCr plane
    components: int = 1

    @property
    def row_bytes(self) -> int:
        return self.width * self.components * self.bytes_per_sample

    @property
    def size(self) -> int:
        return self.row_bytes * self.height


def _bytes_per_sample(bitdepth: int) -> int:
    if bitdepth == 8:
        return 1
    if 8 < bitdepth <= 16:
        return 2
    raise ValueError(f"unsupported bit depth {bitdepth}")


def storage_planes(fmt: PixelFormat, width: int, height: int, bitdepth: int) -> list[PlaneShape]:
    """The planes a buffer or file holds for one frame (ceil-size chroma)."""
    bps = _bytes_per_sample(bitdepth)
    luma = PlaneShape(width, height, bps)
    sub = fmt.subsampling
    if not sub.has_chroma:
        return [luma]
    sx, sy = sub.value
    cw = (width + (1 << sx) - 1) >> sx
    ch = (height + (1 << sy) - 1) >> sy
    if fmt.semi_planar:
        return [luma, PlaneShape(cw, ch, bps, components=2)]
    return [luma, PlaneShape(cw, ch, bps), PlaneShape(cw, ch, bps)]


def scoring_planes(fmt: PixelFormat | Subsampling, width: int, height: int) -> list[tuple[int, int]]:
    """(width, height) of each planar plane that scoring sees (libvmaf's floor chroma)."""
    sub = fmt.subsampling if isinstance(fmt, PixelFormat) else fmt
    if not sub.has_chroma:
        return [(width, height)]
    sx, sy = sub.value
    c = (width >> sx, height >> sy)
    return [(width, height), c, c]


def packed_frame_size(fmt: PixelFormat, width: int, height: int, bitdepth: int) -> int:
    """Bytes of one tightly packed frame, as in a raw .yuv file or a y4m FRAME."""
    return sum(p.size for p in storage_planes(fmt, width, height, bitdepth))


#: --scale names -> PyAV's Interpolation names (FFmpeg's sws flags); here, not beside the scaler
#: (vmafx.io.av_input), so the command line's parser imports neither numpy nor PyAV
SCALE_FLAGS = {
    "fast_bilinear": "FAST_BILINEAR", "bilinear": "BILINEAR", "bicubic": "BICUBIC", "experimental": "X",
    "neighbor": "POINT", "area": "AREA", "bicublin": "BICUBLIN", "gauss": "GAUSS", "sinc": "SINC",
    "lanczos": "LANCZOS", "spline": "SPLINE",
}
