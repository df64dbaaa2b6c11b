"""A registered buffer's layout once its description has been checked.

:class:`Geometry` is what a frame is (shared by buffers and sessions, which
must agree); :class:`BufferLayout` is a ``register_buffer`` whose every field
the daemon has validated (``vmafxd.buffers.validate_layout``) -- format,
dimensions, pitches, planes inside the declared size -- but not yet its
memory: a lane's ``import_buffer`` checks what only the fd can tell.
Lanes read layouts; only the daemon builds them from the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from vmafx.formats import PixelFormat

__all__ = ["Geometry", "PlaneSpec", "BufferLayout"]


@dataclass(frozen=True)
class Geometry:
    """What a frame is: shared by buffers and sessions, which must agree."""

    width: int
    height: int
    pixel_format: PixelFormat
    bitdepth: int

    def differences(self, other: "Geometry") -> list[str]:
        out = []
        for attr in ("width", "height", "pixel_format", "bitdepth"):
            a, b = getattr(self, attr), getattr(other, attr)
            if a != b:
                show = (lambda v: v.value if isinstance(v, PixelFormat) else v)
                out.append(f"{attr} {show(a)} (session: {show(b)})")
        return out

    def describe(self) -> str:
        return f"{self.width}x{self.height} {self.pixel_format.value} {self.bitdepth}-bit"


@dataclass(frozen=True)
class PlaneSpec:
    """One stored plane: which packet fd, where, and how many rows of how many bytes."""

    fd_index: int
    offset: int
    pitch: int
    rows: int
    row_bytes: int

    @property
    def end(self) -> int:
        """One past the last byte the plane reads."""
        return self.offset + self.pitch * (self.rows - 1) + self.row_bytes


@dataclass(frozen=True)
class BufferLayout:
    """A ``register_buffer`` whose description has been checked (not yet its memory)."""

    kind: str
    geometry: Geometry
    size: int
    modifier: int
    #: the client allows a copy through host memory where the lane cannot import in place (ALLOW_COPY)
    allow_copy: bool
    planes: tuple[PlaneSpec, ...]
    device: int | None = None
    handle: bytes | None = None

    def fd_indices(self) -> list[int]:
        """The distinct packet fds the planes live in, in plane order."""
        seen: list[int] = []
        for p in self.planes:
            if p.fd_index not in seen:
                seen.append(p.fd_index)
        return seen
