"""Registered buffers: their validated layout, and each client's table of them.

Buffers are registered once and referenced by id (as Wayland's
linux-dmabuf and PipeWire do).  :func:`validate_layout` checks everything
about a ``register_buffer`` that does not depend on the memory itself --
format, bit depth, dimensions, plane count, pitches and that every plane
lies inside the declared ``size`` -- names the offending field, and yields
a :class:`~vmafxd.core.layout.BufferLayout` for the lane.  The
lane then imports the memory (``Lane.import_buffer``) and checks what only
the fd can tell: its kind, its real size, its seals (R3).

A :class:`BufferRecord` counts references: one for being registered, one
per role per frame that reads it and has not been released.  It may be used
by several sessions of its client at once (R14).  Its import is freed by the
reaper -- never here, never in the scoring path (R4) -- once the count
reaches zero.
"""

from __future__ import annotations

from typing import Any, Callable

from vmafx.formats import PixelFormat, parse_pixel_format, storage_planes
from vmafx.protocol import ErrorCode, Limits, RegisterBuffer, RemoteProtocolError
from vmafx.protocol.messages import FLAG_ALLOW_COPY

from .core.layout import BufferLayout, Geometry, PlaneSpec

__all__ = ["validate_layout", "check_geometry", "BufferRecord", "BufferTable", "PLANAR_BITDEPTHS"]

#: bit depths of the planar formats (the protocol's 8 or 10 bits)
PLANAR_BITDEPTHS = (8, 10)


def _inval(field: str, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.E_INVAL, field, message)


def check_geometry(width: int, height: int, pixel_format: str, bitdepth: int, limits: Limits) -> Geometry:
    """Validate a frame description (register_buffer, open_session); errors name the field."""
    try:
        fmt = parse_pixel_format(pixel_format)
    except ValueError:
        raise _inval("pixel_format", f"unknown pixel format {pixel_format!r} (known: "
                     f"{', '.join(f.value for f in PixelFormat)})") from None
    fixed = fmt.fixed_bitdepth()
    if fixed is not None:
        if bitdepth != fixed:
            raise _inval("bitdepth", f"{fmt.value} is {fixed}-bit, not {bitdepth}-bit")
    elif bitdepth not in PLANAR_BITDEPTHS:
        raise _inval("bitdepth", f"{bitdepth} is not one of {', '.join(map(str, PLANAR_BITDEPTHS))}")
    if not 1 <= width <= limits.max_width:
        raise _inval("width", f"{width} is outside 1..{limits.max_width}")
    if not 1 <= height <= limits.max_height:
        raise _inval("height", f"{height} is outside 1..{limits.max_height}")
    return Geometry(width, height, fmt, bitdepth)


def validate_layout(msg: RegisterBuffer, limits: Limits) -> BufferLayout:
    geo = check_geometry(msg.width, msg.height, msg.pixel_format, msg.bitdepth, limits)
    if msg.size > limits.max_buffer_bytes:
        raise _inval("size", f"{msg.size} bytes exceed the limit of {limits.max_buffer_bytes} (max_buffer_bytes)")
    shapes = storage_planes(geo.pixel_format, geo.width, geo.height, geo.bitdepth)
    if msg.handle is not None and not msg.planes:
        # An IPC handle names the memory; the lane checks the handle.
        return BufferLayout(msg.kind, geo, msg.size, msg.modifier, bool(msg.flags & FLAG_ALLOW_COPY), (), msg.device, msg.handle)
    if len(msg.planes) != len(shapes):
        raise _inval("planes", f"{geo.pixel_format.value} has {len(shapes)} planes, {len(msg.planes)} given")
    planes = []
    for i, (p, shape) in enumerate(zip(msg.planes, shapes)):
        if p.pitch < shape.row_bytes:
            raise _inval(f"planes[{i}].pitch", f"{p.pitch} is less than the row's {shape.row_bytes} bytes")
        spec = PlaneSpec(p.fd, p.offset, p.pitch, shape.height, shape.row_bytes)
        if spec.end > msg.size:
            raise _inval(f"planes[{i}].offset",
                         f"the plane (offset {p.offset}, pitch {p.pitch}, {shape.height} rows of "
                         f"{shape.row_bytes} bytes) ends at byte {spec.end}, beyond the declared size {msg.size}")
        planes.append(spec)
    return BufferLayout(msg.kind, geo, msg.size, msg.modifier, bool(msg.flags & FLAG_ALLOW_COPY), tuple(planes), msg.device, msg.handle)


class BufferRecord:
    """A client's registered buffer and the references on its import."""

    def __init__(self, buffer_id: int, layout: BufferLayout, imp: Any, free: Callable[["BufferRecord"], None]):
        self.id = buffer_id
        self.layout = layout
        #: the lane's import (``LaneImport``); freed by the reaper when refs reach 0
        self.imp = imp
        self._free = free
        self.refs = 1  # the registration's own reference
        self.registered = True
        #: the seq of the unregister_buffer to answer once the import is freed
        self.unregister_seq: int | None = None
        #: the last session geometry this buffer was found to match (checked per frame: an
        #: identity test instead of comparing two dataclasses each time)
        self.matched: Geometry | None = None
        #: its import has dma-buf fds whose implicit write fences a fence-less frame waits for
        #: (R8).  An import's fds are fixed when it is made (they only close), so an import
        #: without any (a memfd) is asked once, not per frame.
        self.implicit_fences = bool(imp.implicit_fence_fds())

    @property
    def geometry(self) -> Geometry:
        return self.layout.geometry

    def ref(self) -> None:
        if self.refs <= 0:
            raise RuntimeError(f"buffer {self.id}: reference after its import was freed")
        self.refs += 1

    def unref(self) -> None:
        self.refs -= 1
        if self.refs == 0:
            self._free(self)
        elif self.refs < 0:
            raise RuntimeError(f"buffer {self.id}: more unrefs than refs")

    def drop_registration(self) -> None:
        """Unregistered (by request, or its client went away): drop the table's reference once."""
        if self.registered:
            self.registered = False
            self.unref()


class BufferTable:
    """One client's buffers, by id, bounded by ``max_buffers_per_client``."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._buffers: dict[int, BufferRecord] = {}
        self._next_id = 1

    def __len__(self) -> int:
        return len(self._buffers)

    def check_room(self) -> None:
        if len(self._buffers) >= self.limits.max_buffers_per_client:
            raise RemoteProtocolError(
                ErrorCode.E_NOMEM, "buffer",
                f"this client already has {len(self._buffers)} buffers (max_buffers_per_client)",
            )

    def add(self, layout: BufferLayout, imp: Any, free: Callable[[BufferRecord], None]) -> BufferRecord:
        self.check_room()
        bid = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        rec = BufferRecord(bid, layout, imp, free)
        self._buffers[bid] = rec
        return rec

    def get(self, buffer_id: int) -> BufferRecord | None:
        return self._buffers.get(buffer_id)

    def remove(self, buffer_id: int) -> BufferRecord | None:
        return self._buffers.pop(buffer_id, None)

    def remove_all(self) -> list[BufferRecord]:
        recs = list(self._buffers.values())
        self._buffers.clear()
        return recs
