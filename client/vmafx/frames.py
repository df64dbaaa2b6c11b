"""Frame buffers a producer hands to vmafxd, their plane layouts, and acquire fences.

A :class:`FrameBuffer` describes one frame's memory the way ``register_buffer``
does (docs/protocol.md): the kind of memory, the frame geometry, the declared
size, the DRM format modifier, and per stored plane the fd it lives in (an
index into the buffer's fds), its byte offset and its row pitch.  The buffer
is registered once and then referenced by id in every ``submit``; the
producer rewrites it in place once the daemon has ``released`` it.

Kinds built here:

* ``memfd`` -- :func:`memfd_buffer` / :func:`memfd_buffer_from_planes` /
  :func:`from_y4m_frame`: a sealed memfd (the stand-in for a dma-buf where no
  DRM device exists, PLATFORM.md).  It is sealed against shrinking and
  growing, so the daemon can map it and trust its size, but *not* against
  writes: the whole point is that the producer refills it for the next frame
  (through :meth:`FrameBuffer.write_frame`, a writable shared mapping) once
  it has been released.  It is created with ``MFD_NOEXEC_SEAL`` where the
  kernel knows it (6.3+): a frame buffer is never executable.
* ``dmabuf`` -- :func:`wrap_dmabuf`: a dma-buf another API exported (a
  decoder, a GL texture through EGL).  Borrowed by default: the exporter
  keeps owning its fd; SCM_RIGHTS sends the daemon a duplicate anyway.

Fences stand for "the producer's write of this buffer is done":
:class:`SyncFileFence` wraps a real ``sync_file`` fd; :class:`EventFdFence`
is an eventfd the producer writes when its write is done, which polls
readable exactly as a signalled ``sync_file`` does (the daemon waits for
either on the host, bounded, R2).  A fence is single-use: the daemon's copy
and ours share one counter, so "resetting" ours would reset the daemon's.

Every fd here has exactly one owner object (:class:`~vmafx.transport.OwnedFd`)
or is explicitly borrowed; ``close()`` is idempotent everywhere.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import mmap
import os
import select
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .exceptions import LayoutError
from .formats import PixelFormat, PlaneShape, parse_pixel_format, storage_planes
from .protocol.messages import BUFFER_KINDS, FLAG_ALLOW_COPY, Plane, RegisterBuffer
from .transport import ClosedOnExit, HeldFd, OwnedFd

__all__ = [
    "BufferFlags", "ALLOW_COPY", "FrameBuffer", "BufferLayout", "plane_layout",
    "memfd_buffer", "memfd_buffer_from_planes", "from_y4m_frame", "wrap_dmabuf",
    "to_semi_planar", "from_semi_planar", "BorrowedFd",
    "Fence", "EventFdFence", "SyncFileFence", "SEALS",
]

# Python 3.11's fcntl has F_ADD_SEALS and the basic seals; spelled out for clarity.
F_SEAL_SEAL = 0x1
F_SEAL_SHRINK = 0x2
F_SEAL_GROW = 0x4
#: What a memfd buffer is sealed with.  SHRINK|GROW let the daemon trust the size it maps
#: (a shrink under a mapping would SIGBUS it); SEAL freezes that set so nobody can add
#: F_SEAL_WRITE later (which would break our in-place refills).  Never F_SEAL_WRITE:
#: buffers are reused.
SEALS = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL


class BufferFlags(enum.IntFlag):
    NONE = 0
    #: the producer consents to a copy (host or GPU) where zero-copy is impossible
    ALLOW_COPY = FLAG_ALLOW_COPY


ALLOW_COPY = BufferFlags.ALLOW_COPY


class BorrowedFd(HeldFd):
    """An fd someone else owns: we may send it, never close it.  ``close()`` only forgets it."""

    __slots__ = ()
    _gone = "released"

    def __init__(self, fd: int):
        if fd < 0:
            raise LayoutError("fd", f"invalid fd {fd}")
        self._fd: int | None = fd

    def close(self) -> None:
        self._fd = None

    def __repr__(self) -> str:
        return f"BorrowedFd({self._fd if self._fd is not None else 'released'})"


@dataclass(frozen=True)
class BufferLayout:
    """Where each stored plane of a frame lives, and how many bytes the buffer needs."""

    planes: tuple[Plane, ...]
    size: int


def _dtype(bitdepth: int) -> np.dtype:
    return np.dtype(np.uint8) if bitdepth == 8 else np.dtype("<u2")


def _check_geometry(pixel_format, width: int, height: int, bitdepth: int | None) -> tuple[PixelFormat, int]:
    fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
    fixed = fmt.fixed_bitdepth()
    if fixed is not None:
        if bitdepth not in (fixed, None):
            raise LayoutError("bitdepth", f"{fmt.value} is {fixed}-bit, not {bitdepth}-bit")
        bitdepth = fixed
    elif bitdepth is None:
        bitdepth = 8
    if isinstance(bitdepth, bool) or not isinstance(bitdepth, int) or not (bitdepth == 8 or 8 < bitdepth <= 16):
        raise LayoutError("bitdepth", f"unsupported bit depth {bitdepth!r}")
    for name, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise LayoutError(name, f"must be a positive integer, got {v!r}")
    return fmt, bitdepth


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _plane_end(p: Plane, shape: PlaneShape) -> int:
    return p.offset + p.pitch * (shape.height - 1) + shape.row_bytes


def _check_planes(planes: Sequence[Plane], shapes: Sequence[PlaneShape], sizes: Sequence[int | None]) -> None:
    """Pitch covers the row, every plane lies inside its fd's buffer, planes sharing an fd do not overlap."""
    if len(planes) != len(shapes):
        raise LayoutError("planes", f"the format stores {len(shapes)} planes, got {len(planes)}")
    for i, (p, s) in enumerate(zip(planes, shapes)):
        if p.fd >= len(sizes):
            raise LayoutError(f"planes[{i}].fd", f"fd index {p.fd} but the buffer has {len(sizes)} fds")
        if p.pitch < s.row_bytes:
            raise LayoutError(f"planes[{i}].pitch", f"{p.pitch} is less than the row's {s.row_bytes} bytes")
        size = sizes[p.fd]
        if size is not None and _plane_end(p, s) > size:
            raise LayoutError(f"planes[{i}].offset",
                              f"the plane ends at byte {_plane_end(p, s)}, beyond the buffer's {size}")
    spans = sorted((p.fd, p.offset, _plane_end(p, s), i) for i, (p, s) in enumerate(zip(planes, shapes)))
    for (fd_a, _, end_a, ia), (fd_b, start_b, _, ib) in zip(spans, spans[1:]):
        if fd_a == fd_b and start_b < end_a:
            raise LayoutError(f"planes[{ib}].offset", f"overlaps plane {ia} (which ends at byte {end_a})")


def plane_layout(
    pixel_format: PixelFormat | str,
    width: int,
    height: int,
    bitdepth: int | None = None,
    *,
    pitch_align: int = 1,
    plane_align: int | None = None,
    pitches: Sequence[int] | None = None,
    offsets: Sequence[int] | None = None,
    size: int | None = None,
) -> BufferLayout:
    """The planes of one frame in one fd.

    By default the planes are packed one after another with no padding (the
    layout of a y4m frame).  ``pitch_align`` rounds each row pitch up (GPU
    allocators like 256); ``plane_align`` rounds each plane's start up
    (default: ``pitch_align``); ``pitches``/``offsets`` give them outright;
    ``size`` makes the buffer larger than its planes need.
    """
    fmt, bitdepth = _check_geometry(pixel_format, width, height, bitdepth)
    if pitch_align < 1:
        raise LayoutError("pitch_align", "must be at least 1")
    plane_align = pitch_align if plane_align is None else plane_align
    if plane_align < 1:
        raise LayoutError("plane_align", "must be at least 1")
    shapes = storage_planes(fmt, width, height, bitdepth)
    for name, given in (("pitches", pitches), ("offsets", offsets)):
        if given is not None and len(given) != len(shapes):
            raise LayoutError(name, f"{fmt.value} stores {len(shapes)} planes, got {len(given)} {name}")
    planes: list[Plane] = []
    end = 0
    for i, s in enumerate(shapes):
        pitch = pitches[i] if pitches is not None else _align(s.row_bytes, pitch_align)
        offset = offsets[i] if offsets is not None else _align(end, plane_align)
        if offset < 0:
            raise LayoutError(f"offsets[{i}]", "must not be negative")
        planes.append(Plane(0, offset, pitch))
        end = max(end, offset + pitch * s.height)
    need = max(_plane_end(p, s) for p, s in zip(planes, shapes))
    total = size if size is not None else max(end, need)
    _check_planes(planes, shapes, [total])
    return BufferLayout(tuple(planes), total)


class FrameBuffer(ClosedOnExit):
    """One frame's memory as the daemon will import it: kind, geometry, layout, fds, flags.

    The buffer owns the fds in ``fds`` unless they are :class:`BorrowedFd`;
    :meth:`close` closes the owned ones and unmaps the write mapping, once.
    """

    def __init__(
        self,
        kind: str,
        width: int,
        height: int,
        pixel_format: PixelFormat | str,
        bitdepth: int,
        planes: Sequence[Plane],
        fds: Sequence[OwnedFd | BorrowedFd],
        *,
        size: int,
        modifier: int = 0,
        flags: int = 0,
        device: int | None = None,
        handle: bytes | None = None,
        mapping: mmap.mmap | None = None,
    ):
        if kind not in BUFFER_KINDS:
            raise LayoutError("kind", f"{kind!r} is not one of {', '.join(BUFFER_KINDS)}")
        fmt, bitdepth = _check_geometry(pixel_format, width, height, bitdepth)
        self.kind = kind
        self.width = width
        self.height = height
        self.pixel_format = fmt
        self.bitdepth = bitdepth
        self.planes = tuple(planes)
        self.fds: list[OwnedFd | BorrowedFd] = list(fds)
        self.size = size
        self.modifier = modifier
        self.flags = BufferFlags(flags)
        self.device = device
        self.handle = handle
        self._mapping = mapping
        self.shapes = storage_planes(fmt, width, height, bitdepth)

    # -- what the protocol sees ---------------------------------------------

    @property
    def closed(self) -> bool:
        return all(fd.closed for fd in self.fds) and self._mapping is None

    def register_message(self, seq: int) -> RegisterBuffer:
        """The ``register_buffer`` request for this buffer (its fds attached by number)."""
        if any(fd.closed for fd in self.fds):
            raise LayoutError("fds", "the buffer is closed")
        return RegisterBuffer(
            seq=seq, kind=self.kind, width=self.width, height=self.height,
            pixel_format=self.pixel_format.value, bitdepth=self.bitdepth, size=self.size,
            modifier=self.modifier, planes=self.planes, flags=int(self.flags), device=self.device,
            handle=self.handle, fds=tuple(fd.fileno() for fd in self.fds),
        )

    # -- filling it -----------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self._mapping is not None

    @property
    def packed(self) -> bool:
        """The planes lie one after another from byte 0 of the one fd, rows unpadded: the
        layout of a y4m frame, so a file's frame can be read straight into :meth:`frame_view`."""
        off = 0
        for p, s in zip(self.planes, self.shapes):
            if p.fd != 0 or p.offset != off or p.pitch != s.row_bytes:
                return False
            off += s.row_bytes * s.height
        return self._mapping is not None and off <= len(self._mapping)

    def frame_view(self) -> memoryview:
        """The packed frame's bytes, writable, for a reader's ``readinto`` (no copy).

        Same rule as :meth:`write_frame`: write only once the buffer is released.  Release
        the view (``with buf.frame_view() as v:``) before :meth:`close`: a mapping with a
        view exported cannot be unmapped."""
        if not self.packed:
            raise LayoutError("planes", f"{self!r} is not a packed, mapped frame")
        end = sum(s.row_bytes * s.height for s in self.shapes)
        with memoryview(self._mapping) as whole:  # type: ignore[arg-type]
            return whole[:end]

    def _plane_views(self, arr: np.ndarray) -> list[np.ndarray]:
        views = []
        for p, s in zip(self.planes, self.shapes):
            views.append(np.lib.stride_tricks.as_strided(
                arr[p.offset:], shape=(s.height, s.row_bytes), strides=(p.pitch, 1)))
        return views

    def write_frame(self, planes: Sequence[np.ndarray]) -> None:
        """Refill the buffer in place with ``planes`` as stored (see :mod:`vmafx.io.video`).

        Each plane is ``height x (width * components)`` samples, ``uint8`` at 8
        bits and ``uint16`` above.  Call this only once every frame that
        references the buffer has been released (``await handle.wait_released()``):
        the daemon may still be reading it until then.
        """
        if self._mapping is None:
            raise LayoutError("kind", f"a {self.kind} buffer is not mapped for writing here")
        if len(planes) != len(self.shapes):
            raise LayoutError("planes", f"{self.pixel_format.value} stores {len(self.shapes)} planes, got {len(planes)}")
        dtype = _dtype(self.bitdepth)
        rows = []
        for i, (a, s) in enumerate(zip(planes, self.shapes)):
            a = np.asarray(a)
            want = (s.height, s.width * s.components)
            if a.shape != want:
                raise LayoutError(f"planes[{i}]", f"shape {a.shape}, expected {want}")
            if a.dtype.itemsize != dtype.itemsize or a.dtype.kind != "u":
                raise LayoutError(f"planes[{i}]", f"dtype {a.dtype}, expected {dtype}")
            rows.append(np.ascontiguousarray(a, dtype=dtype).view(np.uint8))
        # The numpy view onto the mapping must be gone before anyone closes the mapping
        # (mmap refuses to close while buffers are exported), hence the local scope.
        arr = np.frombuffer(self._mapping, dtype=np.uint8)
        try:
            for view, src in zip(self._plane_views(arr), rows):
                view[...] = src
        finally:
            del arr

    def read_planes(self) -> list[np.ndarray]:
        """A copy of the stored planes (for checks and tests)."""
        if self._mapping is None:
            raise LayoutError("kind", f"a {self.kind} buffer is not mapped here")
        dtype = _dtype(self.bitdepth)
        arr = np.frombuffer(self._mapping, dtype=np.uint8)
        try:
            return [v.copy().view(dtype) for v in self._plane_views(arr)]
        finally:
            del arr

    # -- ownership --------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close the owned fds (borrowed ones are only forgotten).  Safe twice.

        The daemon holds its own duplicates: closing here does not pull the
        memory from under a registered buffer.
        """
        m, self._mapping = self._mapping, None
        if m is not None:
            m.close()
        for fd in self.fds:
            fd.close()

    def __repr__(self) -> str:
        return (f"FrameBuffer({self.kind} {self.width}x{self.height} {self.pixel_format.value} "
                f"{self.bitdepth}-bit, {self.size} bytes, planes={[(p.fd, p.offset, p.pitch) for p in self.planes]})")


# -- memfd buffers --------------------------------------------------------------

#: memfd_create(2) flag (Linux 6.3+; Python 3.11 lacks the constant): the file can never be
#: made executable (it gets F_SEAL_EXEC).  A frame buffer has no business being executable,
#: and kernels with vm.memfd_noexec=2 refuse memfds that do not say so.
MFD_NOEXEC_SEAL = 0x8


def _memfd_create(name: str) -> int:
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        return os.memfd_create(name, flags | MFD_NOEXEC_SEAL)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        return os.memfd_create(name, flags)  # a kernel before 6.3: no such flag


def memfd_buffer(
    width: int,
    height: int,
    pixel_format: PixelFormat | str = PixelFormat.YUV420P,
    bitdepth: int | None = None,
    *,
    flags: int = 0,
    name: str = "vmafx-frame",
    **layout_options: Any,
) -> FrameBuffer:
    """A reusable, sealed memfd buffer for one frame, zero-filled and mapped for :meth:`~FrameBuffer.write_frame`.

    ``layout_options`` are :func:`plane_layout`'s (``pitch_align``, ``plane_align``, ``pitches``,
    ``offsets``, ``size``); by default the planes are packed as in a y4m frame."""
    layout = plane_layout(pixel_format, width, height, bitdepth, **layout_options)
    owned = OwnedFd(_memfd_create(name))
    mapping = None
    try:
        fd = owned.fileno()
        os.ftruncate(fd, layout.size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        mapping = mmap.mmap(fd, layout.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        return FrameBuffer("memfd", width, height, pixel_format, bitdepth, layout.planes, [owned],
                           size=layout.size, flags=flags, mapping=mapping)
    except BaseException:
        if mapping is not None:
            mapping.close()
        owned.close()
        raise


def _geometry_of(planes: Sequence[np.ndarray], fmt: PixelFormat) -> tuple[int, int]:
    if not planes:
        raise LayoutError("planes", "no planes given")
    y = np.asarray(planes[0])
    if y.ndim != 2:
        raise LayoutError("planes[0]", f"expected a 2-D plane, got shape {y.shape}")
    return y.shape[1], y.shape[0]


def memfd_buffer_from_planes(
    planes: Sequence[np.ndarray],
    pixel_format: PixelFormat | str,
    bitdepth: int | None = None,
    **layout,
) -> FrameBuffer:
    """A sealed memfd holding ``planes`` (as stored); ``layout`` as for :func:`memfd_buffer`."""
    fmt, bitdepth = _check_geometry(pixel_format, 1, 1, bitdepth)
    width, height = _geometry_of(planes, fmt)
    buf = memfd_buffer(width, height, fmt, bitdepth, **layout)
    try:
        buf.write_frame(planes)
    except BaseException:
        buf.close()
        raise
    return buf


def to_semi_planar(planes: Sequence[np.ndarray], bitdepth: int) -> tuple[list[np.ndarray], PixelFormat]:
    """Planar 4:2:0 ``[Y, Cb, Cr]`` as NV12 (8-bit) or P010 (10-bit): ``[Y, CbCr interleaved]``.

    P010 keeps its 10 significant bits in the *high* bits of each 16-bit sample.
    """
    if len(planes) != 3:
        raise LayoutError("planes", "semi-planar conversion needs three planes (Y, Cb, Cr)")
    y, u, v = (np.asarray(p) for p in planes)
    if u.shape != v.shape:
        raise LayoutError("planes[2]", f"Cr shape {v.shape} differs from Cb's {u.shape}")
    uv = np.empty((u.shape[0], u.shape[1] * 2), dtype=u.dtype)
    uv[:, 0::2] = u
    uv[:, 1::2] = v
    if bitdepth == 8:
        return [y, uv], PixelFormat.NV12
    if bitdepth == 10:
        return [(y.astype("<u2") << 6), (uv.astype("<u2") << 6)], PixelFormat.P010
    raise LayoutError("bitdepth", f"NV12/P010 carry 8 or 10 bits, not {bitdepth}")


def from_semi_planar(planes: Sequence[np.ndarray], pixel_format: PixelFormat | str) -> list[np.ndarray]:
    """NV12/P010 ``[Y, CbCr]`` back to planar ``[Y, Cb, Cr]`` (P010 shifted down to 10-bit values)."""
    fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
    if not fmt.semi_planar:
        raise LayoutError("pixel_format", f"{fmt.value} is not semi-planar")
    y, uv = (np.asarray(p) for p in planes)
    out = [y, uv[:, 0::2], uv[:, 1::2]]
    if fmt is PixelFormat.P010:
        out = [p >> 6 for p in out]
    return [np.ascontiguousarray(p) for p in out]


def from_y4m_frame(
    frame: Sequence[np.ndarray],
    info,
    *,
    pixel_format: PixelFormat | str | None = None,
    buffer: FrameBuffer | None = None,
    **layout,
) -> FrameBuffer:
    """A frame read by :func:`vmafx.io.video.open_video` (``info`` is the reader's ``VideoInfo``) in a memfd.

    ``pixel_format='nv12'``/``'p010'`` converts a 4:2:0 frame to the semi-planar
    layout hardware decoders produce.  With ``buffer`` the frame is written into
    that (released!) buffer instead of a new one, which is returned.
    """
    fmt = info.pixel_format
    planes = list(frame)
    target = fmt if pixel_format is None else (
        pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format))
    bitdepth = info.bitdepth
    if target.semi_planar and not fmt.semi_planar:
        if fmt is not PixelFormat.YUV420P:
            raise LayoutError("pixel_format", f"{target.value} holds 4:2:0, the frame is {fmt.value}")
        if bitdepth != target.fixed_bitdepth():
            raise LayoutError("pixel_format", f"{target.value} is {target.fixed_bitdepth()}-bit, the frame {bitdepth}-bit")
        planes, target = to_semi_planar(planes, bitdepth)
    elif target is not fmt:
        raise LayoutError("pixel_format", f"cannot convert {fmt.value} to {target.value}")
    if buffer is not None:
        if (buffer.width, buffer.height, buffer.pixel_format) != (info.width, info.height, target):
            raise LayoutError("buffer", f"{buffer!r} does not hold a {info.width}x{info.height} {target.value} frame")
        buffer.write_frame(planes)
        return buffer
    return memfd_buffer_from_planes(planes, target, target.fixed_bitdepth() or bitdepth, **layout)


# -- dma-bufs --------------------------------------------------------------------

def _real_size(fd: int, what: str) -> int:
    # R3: a dma-buf's size is what lseek(SEEK_END) says, not what anyone declares.
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
    except OSError as e:
        raise LayoutError(what, f"cannot find the buffer's size ({errno.errorcode.get(e.errno, e.errno)}); "
                                "a pipe or socket is no buffer") from None
    finally:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass
    return size


def wrap_dmabuf(
    fd: int | Sequence[int],
    width: int,
    height: int,
    pixel_format: PixelFormat | str,
    bitdepth: int | None = None,
    *,
    planes: Sequence[tuple[int, int] | tuple[int, int, int]],
    modifier: int = 0,
    size: int | None = None,
    flags: int = 0,
    take_ownership: bool = False,
) -> FrameBuffer:
    """Describe an exported dma-buf (one fd, or one per plane) as a frame buffer.

    ``planes`` gives each stored plane as ``(offset, pitch)`` in the single fd,
    or ``(fd_index, offset, pitch)`` when several fds are given.  ``size``
    defaults to the buffer's own size (``lseek(SEEK_END)``, R3) and may not
    exceed it.  ``modifier`` is the DRM format modifier; anything but 0
    (linear) needs ``ALLOW_COPY`` for the daemon to read it.  The fds stay the
    caller's unless ``take_ownership``; either way the daemon gets duplicates.
    """
    fmt, bitdepth = _check_geometry(pixel_format, width, height, bitdepth)
    raw = [fd] if isinstance(fd, int) else list(fd)
    if not raw:
        raise LayoutError("fd", "no fd given")
    sizes = [_real_size(f, f"fd[{i}]" if len(raw) > 1 else "fd") for i, f in enumerate(raw)]
    layout: list[Plane] = []
    for i, p in enumerate(planes):
        if len(p) == 2:
            layout.append(Plane(0, int(p[0]), int(p[1])))
        elif len(p) == 3:
            layout.append(Plane(int(p[0]), int(p[1]), int(p[2])))
        else:
            raise LayoutError(f"planes[{i}]", "expected (offset, pitch) or (fd_index, offset, pitch)")
        if layout[-1].offset < 0 or layout[-1].pitch <= 0:
            raise LayoutError(f"planes[{i}]", "offset must be >= 0 and pitch > 0")
    if size is None:
        size = sizes[0] if len(sizes) == 1 else max(sizes)
    elif size > max(sizes):
        raise LayoutError("size", f"declared {size} bytes, but the buffer has only {max(sizes)}")
    _check_planes(layout, storage_planes(fmt, width, height, bitdepth), sizes)
    if modifier < 0 or modifier >= 1 << 64:
        raise LayoutError("modifier", "must be a 64-bit DRM format modifier")
    holders = [OwnedFd(f) if take_ownership else BorrowedFd(f) for f in raw]
    return FrameBuffer("dmabuf", width, height, fmt, bitdepth, layout, holders,
                       size=size, modifier=modifier, flags=flags)


# -- fences ----------------------------------------------------------------------

class Fence(ClosedOnExit):
    """An acquire fence sent with a ``submit``: the daemon waits for it (bounded) before reading.

    ``kind`` is the wire kind; fd fences have :meth:`fileno`, GPU IPC event
    fences a ``handle`` instead.  Sending a fence sends a duplicate of its fd
    (SCM_RIGHTS); the fence object stays the caller's, to signal and close.
    """

    kind: str = ""
    handle: bytes | None = None

    def __init__(self, fd: OwnedFd | BorrowedFd):
        self._fd = fd

    @property
    def closed(self) -> bool:
        return self._fd.closed

    def fileno(self) -> int:
        return self._fd.fileno()

    def signalled(self, timeout: float = 0.0) -> bool:
        """Whether the fence polls readable within ``timeout`` seconds (does not consume it)."""
        p = select.poll()
        p.register(self.fileno(), select.POLLIN)
        return bool(p.poll(max(0, int(timeout * 1000))))

    def close(self) -> None:
        self._fd.close()


class EventFdFence(Fence):
    """An eventfd that the producer writes once its write of the buffer is done.

    It stands in for a ``sync_file`` where none can be made (PLATFORM.md): both
    poll readable once signalled, which is all the daemon's host-side wait
    looks at (R2).  Single-use: create one per frame and role.
    """

    kind = "eventfd"

    def __init__(self) -> None:
        super().__init__(OwnedFd(os.eventfd(0, os.EFD_CLOEXEC)))

    def signal(self) -> None:
        os.eventfd_write(self.fileno(), 1)


class SyncFileFence(Fence):
    """A ``sync_file`` fd (a kernel dma-fence exported by a GPU driver or a compositor).

    Owned by default (the caller hands it over); ``take_ownership=False`` borrows it.
    """

    kind = "sync_file"

    def __init__(self, fd: int, *, take_ownership: bool = True):
        super().__init__(OwnedFd(fd) if take_ownership else BorrowedFd(fd))

