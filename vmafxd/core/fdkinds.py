"""What a received file descriptor really is.

A client says "this fd is a sealed memfd" or "this fd is a sync_file"; the
daemon believes none of it.  :func:`inspect_fd` looks at the fd itself --
``fstat`` for the file type, ``readlink(/proc/self/fd/N)`` for the name the
kernel gives the open file, ``/proc/self/fdinfo/N`` for what a dma-buf's
exporter is called -- and :func:`classify` turns that into an :class:`FdKind`.
``classify`` is pure, so the tests feed it what a real dma-buf or sync_file
looks like on machines where neither can be created (PLATFORM.md: no
udmabuf, no DRM, no sw_sync here).

What the kernel names things (``d_path`` of the open file):

* memfd: ``/memfd:NAME (deleted)``, a regular shmem file whose seals
  ``F_GET_SEALS`` reads (``EINVAL`` on any other regular file);
* dma-buf: ``/dmabuf:NAME`` (its own pseudo filesystem since Linux 5.x) or
  ``anon_inode:dmabuf`` (older kernels); its fdinfo has ``exp_name:``;
* sync_file: ``anon_inode:sync_file``;
* eventfd: ``anon_inode:[eventfd]``;
* pipes and sockets: ``pipe:[INO]`` / ``socket:[INO]``.

This module is one of the places where ``OSError`` is translated: an fd
that cannot even be inspected is the client's problem, a
:class:`~vmafx.field_error.FieldError` naming the field it came in (the
daemon answers it ``E_INVAL``).
"""

from __future__ import annotations

import enum
import fcntl
import os
import stat
from dataclasses import dataclass

from vmafx.field_error import FieldError

__all__ = [
    "FdKind", "FdInfo", "inspect_fd", "classify", "memfd_seals",
    "F_GET_SEALS", "F_ADD_SEALS", "F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_WRITE",
    "F_SEAL_FUTURE_WRITE", "seal_names",
]

# fcntl(2) sealing; Python 3.11 has some of these and lacks F_SEAL_FUTURE_WRITE.
F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
F_SEAL_SEAL = 0x1
F_SEAL_SHRINK = 0x2
F_SEAL_GROW = 0x4
F_SEAL_WRITE = 0x8
F_SEAL_FUTURE_WRITE = 0x10

_SEAL_NAMES = {
    F_SEAL_SEAL: "F_SEAL_SEAL", F_SEAL_SHRINK: "F_SEAL_SHRINK", F_SEAL_GROW: "F_SEAL_GROW",
    F_SEAL_WRITE: "F_SEAL_WRITE", F_SEAL_FUTURE_WRITE: "F_SEAL_FUTURE_WRITE",
}


def seal_names(seals: int) -> str:
    names = [n for bit, n in _SEAL_NAMES.items() if seals & bit]
    return "|".join(names) if names else "no seals"


class FdKind(enum.Enum):
    MEMFD = "a memfd"
    DMABUF = "a dma-buf"
    SYNC_FILE = "a sync_file"
    EVENTFD = "an eventfd"
    REGULAR_FILE = "a regular file"
    PIPE = "a pipe"
    SOCKET = "a socket"
    DIRECTORY = "a directory"
    CHAR_DEVICE = "a character device"
    BLOCK_DEVICE = "a block device"
    ANON_INODE = "an anonymous-inode fd"
    OTHER = "an fd of unknown type"


@dataclass(frozen=True)
class FdInfo:
    kind: FdKind
    #: what readlink(/proc/self/fd/N) says
    target: str
    #: st_size from fstat (a dma-buf's real size comes from lseek instead: R3)
    st_size: int
    #: the dma-buf exporter's name from fdinfo (``exp_name``), else None
    exporter: str | None = None

    def describe(self) -> str:
        """The fd in words, for error messages."""
        if self.kind is FdKind.CHAR_DEVICE:
            return f"a character device ({self.target})"
        if self.kind is FdKind.ANON_INODE:
            return f"an anonymous-inode fd ({self.target})"
        if self.kind is FdKind.DMABUF and self.exporter:
            return f"a dma-buf (exporter {self.exporter})"
        return self.kind.value


def _fdinfo_field(fdinfo: str, key: str) -> str | None:
    for line in fdinfo.splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() == key:
            return v.strip()
    return None


def classify(mode: int, target: str, fdinfo: str = "", *, sealable: bool = False) -> FdKind:
    """The kind of an fd from its ``st_mode``, readlink text and fdinfo.

    ``sealable`` says whether ``F_GET_SEALS`` worked on it (true only for
    shmem/hugetlbfs files, i.e. memfds).  Names are checked before the mode:
    anonymous inodes have carried no file type bits on some kernels and
    ``S_IFREG`` on others.
    """
    if target.startswith("/dmabuf:") or target == "anon_inode:dmabuf" or _fdinfo_field(fdinfo, "exp_name"):
        return FdKind.DMABUF
    if target == "anon_inode:sync_file":
        return FdKind.SYNC_FILE
    if target == "anon_inode:[eventfd]":
        return FdKind.EVENTFD
    if target.startswith("anon_inode:"):
        return FdKind.ANON_INODE
    fmt = stat.S_IFMT(mode)
    if fmt == stat.S_IFREG:
        if target.startswith("/memfd:") and sealable:
            return FdKind.MEMFD
        return FdKind.REGULAR_FILE
    return {
        stat.S_IFIFO: FdKind.PIPE,
        stat.S_IFSOCK: FdKind.SOCKET,
        stat.S_IFDIR: FdKind.DIRECTORY,
        stat.S_IFCHR: FdKind.CHAR_DEVICE,
        stat.S_IFBLK: FdKind.BLOCK_DEVICE,
    }.get(fmt, FdKind.OTHER)


def memfd_seals(fd: int) -> int | None:
    """The seals of a shmem file, or None when the fd cannot carry seals."""
    try:
        return fcntl.fcntl(fd, F_GET_SEALS)
    except OSError:
        return None


def inspect_fd(fd: int, field: str) -> FdInfo:
    """Look at a received fd.  Raises :class:`FieldError` naming ``field`` if it cannot be inspected."""
    try:
        st = os.fstat(fd)
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as e:
        raise FieldError(field, f"cannot inspect the fd: {e.strerror}") from None
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="utf-8", errors="replace") as f:
            fdinfo = f.read(4096)
    except OSError:
        fdinfo = ""
    sealable = stat.S_ISREG(st.st_mode) and memfd_seals(fd) is not None
    kind = classify(st.st_mode, target, fdinfo, sealable=sealable)
    exporter = _fdinfo_field(fdinfo, "exp_name") if kind is FdKind.DMABUF else None
    return FdInfo(kind, target, st.st_size, exporter)
