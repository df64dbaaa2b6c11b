"""Importing buffers on the CPU lane: read-only host mappings of memfds and dma-bufs.

The CPU lane reads frames in place: one read-only ``MAP_SHARED`` mapping per
fd (several planes in one fd share it), and the planes are strided numpy
views onto it.  Nothing is copied on import or on read, except when a 16-bit
plane starts at an odd byte or has an odd pitch (numpy cannot view that as
``uint16`` in place): such a read is a *host copy*, counted in ``status``'
``host_copies``, and the buffer is registered with ``zero_copy: false``.
Converting P010 (a shift of every sample) or NV12 (de-interleaving is a
view) is a conversion the scoring needs anyway, not an import copy, and is
not counted; neither are the copies features make for their own state.

memfd
    Must be a memfd (``/memfd:`` and sealable, see :mod:`vmafxd.core.fdkinds`) with
    ``F_SEAL_SHRINK``: without it the producer could shrink the file under the
    daemon's mapping and the next read would raise ``SIGBUS`` in the daemon.
    ``F_SEAL_GROW`` is not required -- growing the file leaves the mapped range
    valid -- and neither is ``F_SEAL_WRITE``: the producer writes the buffer
    between frames, which is what ``released`` governs.  A memfd has no
    implicit fences.
dma-buf
    The size is the buffer's own (``lseek(fd, 0, SEEK_END)`` on a ``dup()`` the
    daemon owns, R3); a larger declared ``size`` is refused naming ``size``.
    Mapped read-only; reads are bracketed with ``DMA_BUF_IOCTL_SYNC``
    (``START|READ`` ... ``END|READ``) so that the exporter can make the CPU's
    view coherent.  An exporter that refuses CPU mmap (NVIDIA's, ``errno`` 524)
    is refused as not supported, naming the plane's fd.  Its fd is kept for the sync ioctl
    and for polling its implicit write fences (R8).

No real dma-buf can be made on the development machine (PLATFORM.md); the
dma-buf branch is exercised through :func:`vmafxd.core.fdkinds.classify` and the
ioctl encoding, not end to end.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import mmap
import os
import struct
import threading
from typing import Iterator, Mapping

import numpy as np

from vmafx.transport import OwnedFd

from ..core.layout import BufferLayout, PlaneSpec
from ..core.fdkinds import F_SEAL_SHRINK, FdKind, inspect_fd, memfd_seals, seal_names
from ..core.picture import Picture, picture_from_stored
from .device import LaneImport
from .errors import InvalidInput, OutOfMemory, Unsupported

__all__ = ["HostMapping", "CpuImport", "import_host_buffer", "DMA_BUF_IOCTL_SYNC", "dma_buf_sync"]

log = logging.getLogger("vmafxd.lanes.cpu")

# <linux/dma-buf.h>: struct dma_buf_sync { __u64 flags; };
# DMA_BUF_IOCTL_SYNC = _IOW(DMA_BUF_BASE 'b', 0, struct dma_buf_sync)
DMA_BUF_SYNC_READ = 1 << 0
DMA_BUF_SYNC_START = 0 << 2
DMA_BUF_SYNC_END = 1 << 2
_IOC_WRITE = 1
DMA_BUF_IOCTL_SYNC = (_IOC_WRITE << 30) | (8 << 16) | (ord("b") << 8) | 0
#: errno 524 (ENOTSUPP, kernel-internal): what NVIDIA's dma-buf exporter returns for mmap
ENOTSUPP = 524


def dma_buf_sync(fd: int, flags: int) -> None:
    fcntl.ioctl(fd, DMA_BUF_IOCTL_SYNC, struct.pack("=Q", flags))


class HostMapping:
    """One read-only shared mapping of one fd, and (for a dma-buf) the fd it came from."""

    def __init__(self, mm: mmap.mmap, kind: FdKind, dmabuf_fd: OwnedFd | None):
        self._mmap: mmap.mmap | None = mm
        #: the whole mapping as uint8; planes are strided views of it
        self.array: np.ndarray | None = np.frombuffer(mm, dtype=np.uint8)
        self.kind = kind
        #: the daemon's own dup of a dma-buf (R3); None for memfds
        self.dmabuf_fd = dmabuf_fd

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Bracket a CPU read (``DMA_BUF_IOCTL_SYNC``; nothing for a memfd)."""
        fd = self.dmabuf_fd
        if fd is None:
            yield
            return
        dma_buf_sync(fd.fileno(), DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ)
        try:
            yield
        finally:
            dma_buf_sync(fd.fileno(), DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ)

    def close(self) -> bool:
        """Unmap and close.  False if something still held a view (then the mapping lives on until it is dropped)."""
        self.array = None
        ok = True
        mm, self._mmap = self._mmap, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                # A view of an input plane outlived the frame that read it:
                # the release was a lie.  The mapping is freed when the view
                # dies; say so loudly, tests count it.
                log.error("a view of an imported buffer outlived its frame; the mapping is freed late")
                ok = False
        if self.dmabuf_fd is not None:
            self.dmabuf_fd.close()
        return ok


class CpuImport(LaneImport):
    """A buffer mapped on the host: planes are views, read under :meth:`reading`."""

    def __init__(self, layout: BufferLayout, mappings: dict[int, HostMapping], copied_planes: int):
        self.layout = layout
        self._mappings = mappings
        #: planes that must be copied on every read (odd 16-bit layout)
        self.copied_planes = copied_planes
        self.zero_copy = copied_planes == 0
        self._lock = threading.Lock()
        self._closed = False
        self.view_leaks = 0

    def implicit_fence_fds(self) -> list[int]:
        return [m.dmabuf_fd.fileno() for m in self._mappings.values()
                if m.dmabuf_fd is not None and not m.dmabuf_fd.closed]

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for m in self._mappings.values():
                stack.enter_context(m.reading())
            yield

    def bytes_view(self) -> np.ndarray:
        """The mapped bytes of a one-fd buffer, from offset 0 (a GPU lane uploads them)."""
        if len(self._mappings) != 1:
            raise RuntimeError("a buffer whose planes live in several fds has no single byte view")
        buf = next(iter(self._mappings.values())).array
        if buf is None:
            raise RuntimeError("the buffer's mapping was freed while a frame still read it")
        return buf

    def picture(self) -> Picture:
        """The frame as planar views of the mapping (worker thread, inside :meth:`reading`)."""
        geo = self.layout.geometry
        bps = 1 if geo.bitdepth == 8 else 2
        stored = [self._plane(spec, bps) for spec in self.layout.planes]
        return picture_from_stored(stored, geo.pixel_format, geo.bitdepth)

    def _plane(self, spec: PlaneSpec, bps: int) -> np.ndarray:
        buf = self._mappings[spec.fd_index].array
        if buf is None:
            raise RuntimeError("the buffer's mapping was freed while a frame still read it")
        view = np.lib.stride_tricks.as_strided(
            buf[spec.offset:], shape=(spec.rows, spec.row_bytes), strides=(spec.pitch, 1), writeable=False,
        )
        if bps == 1:
            return view
        if spec.offset % 2 == 0 and spec.pitch % 2 == 0:
            return view.view("<u2")
        return np.ascontiguousarray(view).view("<u2")  # a counted host copy (see the module doc)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for m in self._mappings.values():
            if not m.close():
                self.view_leaks += 1


def _describe_refusal(info_desc: str, declared: str) -> str:
    return (f"{info_desc} cannot be a {declared} buffer: the cpu lane reads sealed memfds and dma-bufs "
            f"(kind memfd or dmabuf) in place")


def import_host_buffer(layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> CpuImport:
    """Map every fd of ``layout`` read-only after checking it; refuse naming the field."""
    if layout.kind not in ("memfd", "dmabuf"):
        raise Unsupported("kind",
                          f"the cpu lane imports memfd and dmabuf buffers, not {layout.kind} (use a GPU lane)")
    if layout.modifier != 0:
        raise Unsupported("modifier",
                          f"modifier {layout.modifier:#x} is not DRM_FORMAT_MOD_LINEAR: the cpu lane reads linear "
                          f"buffers only")
    mappings: dict[int, HostMapping] = {}
    try:
        first_fd = layout.planes[0].fd_index
        for fd_index in layout.fd_indices():
            planes = [(i, p) for i, p in enumerate(layout.planes) if p.fd_index == fd_index]
            field = f"planes[{planes[0][0]}].fd"
            mappings[fd_index] = _map_one(layout, fds[fd_index], field, planes, is_first=fd_index == first_fd)
    except BaseException:
        for m in mappings.values():
            m.close()
        raise
    bps = 1 if layout.geometry.bitdepth == 8 else 2
    copied = sum(1 for p in layout.planes if bps == 2 and (p.offset % 2 or p.pitch % 2))
    return CpuImport(layout, mappings, copied)


def _map_one(layout: BufferLayout, fd: OwnedFd, field: str, planes: list[tuple[int, PlaneSpec]],
             is_first: bool) -> HostMapping:
    info = inspect_fd(fd.fileno(), field)
    declared = layout.kind
    if declared == "memfd" and info.kind is not FdKind.MEMFD:
        if info.kind is FdKind.DMABUF:
            raise InvalidInput(field, "the fd is a dma-buf: register it with kind dmabuf")
        raise InvalidInput(field, _describe_refusal(info.describe(), declared))
    if declared == "dmabuf" and info.kind is not FdKind.DMABUF:
        if info.kind is FdKind.MEMFD:
            raise InvalidInput(field, "the fd is a memfd: register it with kind memfd")
        raise InvalidInput(field, _describe_refusal(info.describe(), declared))

    dmabuf_fd: OwnedFd | None = None
    try:
        if info.kind is FdKind.MEMFD:
            seals = memfd_seals(fd.fileno()) or 0
            if not seals & F_SEAL_SHRINK:
                raise InvalidInput(field,
                                   f"memfd lacks F_SEAL_SHRINK: a client could shrink it under the daemon's mapping "
                                   f"(it has {seal_names(seals)}; create it with MFD_ALLOW_SEALING and add "
                                   f"F_SEAL_SHRINK|F_SEAL_GROW)")
            real = info.st_size
            map_fd = fd.fileno()
        else:
            # R3: the daemon's own dup, and the size the buffer itself reports.
            try:
                dmabuf_fd = fd.dup()
                real = os.lseek(dmabuf_fd.fileno(), 0, os.SEEK_END)
            except OSError as e:
                raise InvalidInput(field, f"cannot size the dma-buf: {e.strerror}") from None
            map_fd = dmabuf_fd.fileno()
        if is_first and layout.size > real:
            raise InvalidInput("size",
                               f"declared {layout.size} bytes but the buffer has {real} ({info.describe()})")
        # ``size`` describes the first plane's fd; planes in other fds must lie within those fds.
        limit = layout.size if is_first else real
        for i, p in planes:
            if p.end > limit:
                raise InvalidInput(f"planes[{i}].offset",
                                   f"the plane ends at byte {p.end}, beyond the {limit} bytes of its fd")
        length = max(p.end for _, p in planes)
        try:
            mm = mmap.mmap(map_fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except OSError as e:
            if info.kind is FdKind.DMABUF:
                why = "errno 524: the exporter does not support CPU mmap" if e.errno == ENOTSUPP else e.strerror
                raise Unsupported(field,
                                  f"{info.describe()} cannot be mapped by the cpu lane ({why}); "
                                  f"use a GPU lane or register a memfd") from None
            refusal = OutOfMemory if e.errno == errno.ENOMEM else InvalidInput
            raise refusal(field, f"cannot map the memfd: {e.strerror}") from None
        except ValueError as e:
            raise InvalidInput(field, f"cannot map the buffer: {e}") from None
        return HostMapping(mm, info.kind, dmabuf_fd)
    except BaseException:
        if dmabuf_fd is not None:
            dmabuf_fd.close()
        raise
