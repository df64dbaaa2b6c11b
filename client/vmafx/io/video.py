"""Readers for YUV4MPEG2 (``.y4m``) and headerless planar ``.yuv`` files.

Both yield frames as lists of numpy planes *as stored* (ceil-size chroma;
semi-planar formats as two planes).  ``.xz`` and ``.gz`` compressed files are
read transparently, so the reference clips need no unpacking.

y4m colour tags understood: ``420``, ``420jpeg``, ``420paldv``, ``420mpeg2``,
``422``, ``444``, ``mono`` and the high-bit-depth forms ``420p10``,
``422p10``, ``444p10``, ``mono10`` (and ``p12``/``p16``).  Unlike libvmaf's
own CLI at 3.2, 8-bit 4:2:2 and odd sizes are read correctly (ceil-size chroma
in the file, as y4m defines it).
"""

from __future__ import annotations

import gzip
import io
import lzma
import mmap
import os
import stat
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np

from ..formats import Y4M_MAGIC, PixelFormat, parse_pixel_format, storage_planes

__all__ = ["VideoInfo", "VideoReader", "FramesAt", "open_video", "Y4MError", "unpack_planes"]


def unpack_planes(data, shapes, dtype) -> list:
    """The stored planes packed one after another in ``data`` (:func:`vmafx.io.input.pack_planes`'s layout), as
    arrays viewing it; ``shapes``: the planes' :class:`~vmafx.formats.PlaneShape` s."""
    planes, off = [], 0
    for s in shapes:
        count = s.width * s.components * s.height
        planes.append(np.frombuffer(data, dtype, count, off).reshape(s.height, s.width * s.components))
        off += s.size
    return planes


class Y4MError(ValueError):
    """A y4m stream is malformed; the message names the offending part."""


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    pixel_format: PixelFormat
    bitdepth: int
    fps: tuple[int, int] | None = None

    @property
    def frame_size(self) -> int:
        return sum(p.size for p in storage_planes(self.pixel_format, self.width, self.height, self.bitdepth))


_Y4M_COLOUR = {
    "420": (PixelFormat.YUV420P, 8),
    "420jpeg": (PixelFormat.YUV420P, 8),
    "420paldv": (PixelFormat.YUV420P, 8),
    "420mpeg2": (PixelFormat.YUV420P, 8),
    "422": (PixelFormat.YUV422P, 8),
    "444": (PixelFormat.YUV444P, 8),
    "mono": (PixelFormat.YUV400P, 8),
}
for _depth in (9, 10, 12, 14, 16):
    _Y4M_COLOUR[f"420p{_depth}"] = (PixelFormat.YUV420P, _depth)
    _Y4M_COLOUR[f"422p{_depth}"] = (PixelFormat.YUV422P, _depth)
    _Y4M_COLOUR[f"444p{_depth}"] = (PixelFormat.YUV444P, _depth)
    _Y4M_COLOUR[f"mono{_depth}"] = (PixelFormat.YUV400P, _depth)


def _open_binary(path: str | os.PathLike) -> BinaryIO:
    p = os.fspath(path)
    if p.endswith(".xz"):
        return lzma.open(p, "rb")
    if p.endswith(".gz"):
        return gzip.open(p, "rb")
    return open(p, "rb", buffering=1 << 20)


def _strip_compression(path: str) -> str:
    for ext in (".xz", ".gz"):
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def _read_exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    while len(data) < n:
        more = f.read(n - len(data))
        if not more:
            break
        data += more
    return data


_FRAME_LINE = b"FRAME\n"


def _regular_fd(f) -> int | None:
    """The fd under a buffered reader of a regular file (not a pipe, not a decompressor)."""
    if not isinstance(f, io.BufferedReader) or not isinstance(f.raw, io.FileIO):
        return None
    try:
        fd = f.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):
        return None


def _readinto_exact(f: BinaryIO, dst: memoryview) -> int:
    """Fill ``dst`` from ``f`` (a pipe may give less per call); the bytes read (fewer at EOF)."""
    readinto = getattr(f, "readinto", None)
    n, size = 0, len(dst)
    while n < size:
        if readinto is not None:
            got = readinto(dst[n:])
        else:  # a reader with read() only (the prefixed pipe)
            data = f.read(size - n)
            got = len(data)
            dst[n:n + got] = data
        if not got:
            break
        n += got
    return n


class FramesAt:
    """The frames of a regular uncompressed file from where its reader stands, read by position.

    Once a y4m file's first frame is reached every plain frame is ``FRAME\\n`` and then
    ``size`` bytes (a raw file: the bytes alone), so frame ``i`` after the reader's position
    starts at ``base + i * stride``, and several threads can each ``preadv`` a different
    frame of it at once: the read syscall holds no GIL, so reading scales past one thread.
    :meth:`read` says only whether frame ``i`` is such a plain, whole frame; anything
    else (the end, a truncated frame, a ``FRAME`` line with parameters, after which the
    offsets no longer hold) is left to the reader's sequential :meth:`VideoReader.read_frame_into`,
    which ends or fails exactly as it always has.  :meth:`advance` then moves the reader
    past the frames taken."""

    def __init__(self, reader: "VideoReader", fd: int, base: int, head: int, size: int, *, mapped: bool = False):
        self._reader, self._fd, self.base, self.head, self.size = reader, fd, base, head, size
        self.stride = head + size
        self._size_seen: int | None = None  # the file's size, for reads of part of a frame
        #: with ``mapped``: the file mapped as it is now, frames copied out of it with numpy
        #: (whose copy of a large block drops the GIL and streams past the caches); read() and
        #: not mapped past the mapping's end.  Opt-in ($VMAFX_READ_MMAP): a file truncated while
        #: mapped kills the process with SIGBUS where ``preadv`` only returns short.
        self._map = self._bytes = None
        if mapped:
            try:
                self._map = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            except (OSError, ValueError):  # an empty file, or one that cannot be mapped: preadv
                self._map = None
            else:
                self._bytes = np.frombuffer(self._map, np.uint8)

    def read(self, i: int, dst: memoryview, nbytes: int | None = None) -> bool:
        """Frame ``i`` (counted from the reader's position) into ``dst``; True when it is a
        plain whole frame.  ``nbytes``: only the frame's first ``nbytes`` are read (its luma
        plane, when nothing reads chroma), the frame still checked whole: the file must hold
        all of it.  Any thread; an ``OSError`` of the read is the caller's to report."""
        size, pos = self.size, self.base + i * self.stride
        take = size if nbytes is None else min(nbytes, size)
        src = self._bytes
        if src is not None and pos + self.stride <= src.size:
            if self.head and src[pos:pos + self.head].tobytes() != _FRAME_LINE:
                return False
            np.copyto(np.frombuffer(dst, np.uint8, take), src[pos + self.head:pos + self.head + take])
            return True
        if take < size and not self._holds(pos + self.stride):
            return False  # not whole in the file: the sequential reader says how it ends
        if not self.head:
            return os.preadv(self._fd, [dst[:take]], pos) == take
        head = bytearray(self.head)
        return os.preadv(self._fd, [head, dst[:take]], pos) == self.head + take and head == _FRAME_LINE

    def _holds(self, end: int) -> bool:
        """The file is at least ``end`` bytes long (its size looked up again past what was seen)."""
        if self._size_seen is None or end > self._size_seen:
            self._size_seen = os.fstat(self._fd).st_size
        return end <= self._size_seen

    def close(self) -> None:
        """The mapping, if any, let go (every read is over)."""
        m, self._map, self._bytes = self._map, None, None
        if m is not None:
            try:
                m.close()
            except BufferError:  # a view of it still held somewhere: unmapped when that goes
                pass

    def advance(self, n: int) -> None:
        """The reader is past ``n`` frames read by :meth:`read` (0..n-1, all plain)."""
        r = self._reader
        r._pos = self.base + n * self.stride
        r.frames_read += n


class VideoReader:
    """Iterates over frames; each frame is a list of stored planes (numpy arrays)."""

    def __init__(self, f: BinaryIO, info: VideoInfo, y4m: bool, name: str):
        self._f = f
        self.info = info
        self._y4m = y4m
        self._name = name
        self._shapes = storage_planes(info.pixel_format, info.width, info.height, info.bitdepth)
        self._dtype = np.dtype(np.uint8) if info.bitdepth == 8 else np.dtype("<u2")
        self.frames_read = 0
        self._frame_size = info.frame_size  # (a property that sums the planes: not per frame)
        #: the fd of a regular, uncompressed file: frames are read with one preadv each
        self._fd = _regular_fd(f)
        #: the file position while reading with preadv (None: ``f``'s own position is right)
        self._pos: int | None = None

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _buffered(self) -> BinaryIO:
        """``f``, positioned where the frames read so far end (after preadv reads)."""
        if self._pos is not None:
            self._f.seek(self._pos)
            self._pos = None
        return self._f

    def frames_at(self, *, mapped: bool = False) -> FramesAt | None:
        """The frames from here on, read by position (a regular uncompressed file), or None;
        ``mapped``: copied out of a mapping of the file (:class:`FramesAt`)."""
        if self._fd is None:
            return None
        base = self._pos if self._pos is not None else self._f.tell()
        return FramesAt(self, self._fd, base, len(_FRAME_LINE) if self._y4m else 0, self._frame_size, mapped=mapped)

    def read_frame(self) -> list[np.ndarray] | None:
        """The next frame's planes, or None at the end of the stream (read as
        :meth:`read_frame_into` reads, into a buffer of the frame's own)."""
        data = bytearray(self._frame_size)
        if not self.read_frame_into(memoryview(data)):
            return None
        return unpack_planes(data, self._shapes, self._dtype)

    def read_frame_into(self, dst: memoryview) -> bool:
        """Read the next frame's stored planes, packed one after another as the file holds
        them, straight into ``dst`` (``info.frame_size`` writable bytes): no bytes object, no
        numpy copy.  False at the end of the stream; the errors are :meth:`read_frame`'s.

        A regular uncompressed file is read with one ``preadv`` per frame (its ``FRAME``
        line and its planes at once), which holds no GIL while the kernel copies: the
        buffered reader would copy what it read ahead under the GIL.  A ``FRAME`` line with
        parameters, or a short read, goes the buffered way, which says what is wrong."""
        size = self._frame_size
        if self._fd is not None:
            if self._pos is None:
                self._pos = self._f.tell()
            head = bytearray(len(_FRAME_LINE)) if self._y4m else None
            got = os.preadv(self._fd, [head, dst[:size]] if head is not None else [dst[:size]], self._pos)
            want = size + (len(head) if head is not None else 0)
            if got == 0:
                return False
            if got == want and (head is None or head == _FRAME_LINE):
                self._pos += got
                self.frames_read += 1
                return True
        self._buffered()
        if self._y4m:
            line = self._f.readline(1 << 16)
            if not line:
                return False
            if not line.startswith(b"FRAME"):
                raise Y4MError(f"{self._name}: frame {self.frames_read}: expected FRAME, got {line[:16]!r}")
        got = _readinto_exact(self._f, dst[:size])
        if not got and not self._y4m:
            return False
        if got != size:
            raise Y4MError(f"{self._name}: frame {self.frames_read} is truncated ({got} of {size} bytes)")
        self.frames_read += 1
        return True

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        while True:
            frame = self.read_frame()
            if frame is None:
                return
            yield frame


def _parse_y4m_header(line: bytes, name: str) -> VideoInfo:
    if not line.startswith(Y4M_MAGIC):
        raise Y4MError(f"{name}: not a YUV4MPEG2 stream")
    w = h = None
    colour = "420jpeg"
    fps = None
    for tok in line.decode("ascii", "replace").split()[1:]:
        key, val = tok[0], tok[1:]
        if key == "W":
            w = int(val)
        elif key == "H":
            h = int(val)
        elif key == "C":
            colour = val
        elif key == "F" and ":" in val:
            a, b = val.split(":", 1)
            fps = (int(a), int(b))
    if not w or not h or w <= 0 or h <= 0:
        raise Y4MError(f"{name}: header lacks a positive W and H")
    if colour not in _Y4M_COLOUR:
        raise Y4MError(f"{name}: unsupported colour space C{colour}")
    fmt, depth = _Y4M_COLOUR[colour]
    return VideoInfo(w, h, fmt, depth, fps)


def open_video(
    path: str | os.PathLike,
    *,
    width: int | None = None,
    height: int | None = None,
    pixel_format: str | PixelFormat | None = None,
    bitdepth: int | None = None,
) -> VideoReader:
    """Open a ``.y4m`` (geometry from its header) or raw ``.yuv`` (geometry given)."""
    p = os.fspath(path)
    base = _strip_compression(p)
    f = _open_binary(p)
    try:
        if base.endswith(".y4m"):
            header = f.readline(1 << 16)
            info = _parse_y4m_header(header, p)
            return VideoReader(f, info, True, p)
        if width is None or height is None or pixel_format is None:
            raise ValueError(f"{p}: a raw .yuv file needs --width, --height and --pixel-format")
        fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(pixel_format)
        depth = fmt.fixed_bitdepth() or bitdepth or 8
        if fmt.fixed_bitdepth() and bitdepth and bitdepth != fmt.fixed_bitdepth():
            raise ValueError(f"{fmt.value} is {fmt.fixed_bitdepth()}-bit, not {bitdepth}-bit")
        if width <= 0 or height <= 0:
            raise ValueError("width and height must be positive")
        return VideoReader(f, VideoInfo(width, height, fmt, depth), False, p)
    except BaseException:
        f.close()
        raise


def read_all(path: str | os.PathLike, **kw) -> tuple[VideoInfo, list[list[np.ndarray]]]:
    """Every frame of a file (small files and tests)."""
    with open_video(path, **kw) as r:
        return r.info, list(r)


def frames_from_bytes(data: bytes, info: VideoInfo) -> list[list[np.ndarray]]:
    """Split raw planar frames held in memory (tests)."""
    r = VideoReader(io.BytesIO(data), info, False, "<bytes>")
    return list(r)
