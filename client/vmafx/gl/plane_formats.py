"""Each stored plane's texture format: as GL, ``glReadPixels`` and DRM spell it (R11)."""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import PixelFormat, PlaneShape, parse_pixel_format, storage_planes
from .constants import (
    DRM_FORMAT_GR1616, DRM_FORMAT_GR88, DRM_FORMAT_R16, DRM_FORMAT_R8, GL_R16, GL_R8, GL_RED, GL_RG, GL_RG16,
    GL_RG8, GL_UNSIGNED_BYTE, GL_UNSIGNED_SHORT,
)


@dataclass(frozen=True)
class PlaneFormat:
    """One stored plane's texture format, as GL, ``glReadPixels`` and DRM spell it."""

    name: str
    gl_internal: int
    gl_format: int
    gl_type: int
    drm_fourcc: int
    bytes_per_pixel: int
    bytes_per_sample: int


#: by (bytes per sample, components): 8-bit Y/Cb/Cr -> R8, NV12 CbCr -> GR88 (byte 0 is R = Cb),
#: 10..16-bit -> R16, P010 CbCr -> GR1616.  R11: the texture's format must be the plane's.
PLANE_FORMATS: dict[tuple[int, int], PlaneFormat] = {
    (1, 1): PlaneFormat("R8", GL_R8, GL_RED, GL_UNSIGNED_BYTE, DRM_FORMAT_R8, 1, 1),
    (1, 2): PlaneFormat("GR88", GL_RG8, GL_RG, GL_UNSIGNED_BYTE, DRM_FORMAT_GR88, 2, 1),
    (2, 1): PlaneFormat("R16", GL_R16, GL_RED, GL_UNSIGNED_SHORT, DRM_FORMAT_R16, 2, 2),
    (2, 2): PlaneFormat("GR1616", GL_RG16, GL_RG, GL_UNSIGNED_SHORT, DRM_FORMAT_GR1616, 4, 2),
}


def plane_formats(pixel_format: PixelFormat | str, width: int, height: int,
                  bitdepth: int | None = None) -> list[tuple[PlaneShape, PlaneFormat]]:
    """Each stored plane's shape and the texture format it must have."""
    fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
    depth = fmt.fixed_bitdepth() or bitdepth or 8
    return [(s, PLANE_FORMATS[(s.bytes_per_sample, s.components)]) for s in storage_planes(fmt, width, height, depth)]
