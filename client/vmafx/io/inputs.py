"""Opening what a user hands ``vmafxctl score``: y4m, raw .yuv, ``-``, named pipes, and any
container/codec FFmpeg reads (through PyAV).

Every input is an :class:`Input`: ``info`` (a :class:`VideoInfo`), ``read_frame()`` giving
the next frame's stored planes (ceil-size chroma, as y4m and FFmpeg lay them out) or None,
frames streamed one at a time.  The kind is decided by content, not by the name alone:

* a stream starting ``YUV4MPEG2`` is y4m (a file, ``-`` or a FIFO, read as it arrives);
  named ``.yuv``/``.raw`` and given raw geometry (-w/-h/-p/-b), it is refused as mislabelled;
* with raw geometry, a ``.yuv``/``.raw`` file (or ``-``/FIFO not starting ``YUV4MPEG2``) is
  headerless planar; its size must be a whole number of frames.  At odd sizes libvmaf's
  own tool reads floor-size chroma (``yuv_input.c``) while FFmpeg writes ceil-size chroma:
  the layout whose frame size divides the file is used (floor when both do);
* anything else is opened with PyAV and decoded; planar YUV 8/10-bit 4:2:0/4:2:2/4:4:4 and
  grey pass straight through, other pixel formats are converted by FFmpeg's scaler.

Errors are :class:`InputError` with a one-line message naming the file.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import BinaryIO

import numpy as np

from ..formats import Y4M_MAGIC, PixelFormat, parse_pixel_format, storage_planes
from .input import Input, InputError
from .video import VideoInfo, VideoReader, Y4MError, _open_binary, _parse_y4m_header, _read_exact, _strip_compression

__all__ = ["Input", "InputError", "open_input", "open_file_input", "RAW_EXTENSIONS", "Y4M_MAGIC"]

RAW_EXTENSIONS = (".yuv", ".raw")


def _is_stream(path: str) -> bool:
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def _peek(f: BinaryIO, n: int) -> bytes:
    peek = getattr(f, "peek", None)
    if peek is not None:
        return peek(n)[:n]
    return b""


class _Prefixed:
    """A pipe whose first bytes were read to tell its kind, read again from the start.

    (``peek`` on a pipe returns what one read() brought, which may be less than the magic.)
    """

    def __init__(self, prefix: bytes, f: BinaryIO):
        self._prefix, self._f = prefix, f

    def read(self, n: int = -1) -> bytes:
        if not self._prefix:
            return self._f.read(n)
        head, self._prefix = (self._prefix, b"") if n < 0 or n >= len(self._prefix) else \
            (self._prefix[:n], self._prefix[n:])
        if n < 0:
            return head + self._f.read()
        return head + (self._f.read(n - len(head)) if n > len(head) else b"")

    def readline(self, limit: int = -1) -> bytes:
        if not self._prefix:
            return self._f.readline(limit)
        nl = self._prefix.find(b"\n")
        if nl >= 0:
            return self.read(nl + 1 if limit < 0 else min(nl + 1, limit))
        head = self.read(len(self._prefix))
        return head + self._f.readline(-1 if limit < 0 else max(0, limit - len(head)))

    def close(self) -> None:
        self._f.close()


def _from_reader(r: VideoReader, name: str, total: int | None = None) -> Input:
    def nxt():
        try:
            return r.read_frame()
        except Y4MError as e:
            raise InputError(str(e)) from None

    def nxt_into(dst):
        try:
            return r.read_frame_into(dst)
        except Y4MError as e:
            raise InputError(str(e)) from None
    return Input(name, r.info, nxt, r.close, total=total, next_into=nxt_into, frames_at=r.frames_at)


def _y4m_input(f: BinaryIO, name: str, size: int | None) -> Input:
    """A y4m stream from its header on (``f`` closed on an error); ``size``: the file's bytes,
    when it is a regular uncompressed file (its frames are counted from it)."""
    header = f.readline(1 << 16)
    try:
        info = _parse_y4m_header(header, name)
    except (Y4MError, ValueError) as e:
        f.close()
        raise InputError(str(e)) from None
    total = None if size is None else (size - len(header)) // (info.frame_size + len(b"FRAME\n"))
    return _from_reader(VideoReader(f, info, True, name), name, total)


def _raw_geometry(name, width, height, pixel_format, bitdepth) -> VideoInfo:
    missing = [f for f, v in (("-w/--width", width), ("-h/--height", height),
                               ("-p/--pixel_format", pixel_format)) if v is None]
    if missing:
        raise InputError(f"{name}: raw .yuv input needs {', '.join(missing)} (and -b/--bitdepth)")
    try:
        fmt = pixel_format if isinstance(pixel_format, PixelFormat) else parse_pixel_format(str(pixel_format))
    except ValueError:
        raise InputError(f"-p/--pixel_format: expected 420, 422 or 444, got {pixel_format!r}") from None
    depth = bitdepth or fmt.fixed_bitdepth() or 8
    if width <= 0 or height <= 0:
        raise InputError(f"-w/-h: width and height must be positive, got {width}x{height}")
    return VideoInfo(width, height, fmt, depth)


def _floor_shapes(info: VideoInfo):
    """libvmaf's raw layout: chroma planes of (w >> sx) x (h >> sy)."""
    shapes = storage_planes(info.pixel_format, info.width, info.height, info.bitdepth)
    sub = info.pixel_format.subsampling.value
    if not sub:
        return [(s.height, s.width) for s in shapes]
    sx, sy = sub
    return [(shapes[0].height, shapes[0].width)] + [(info.height >> sy, info.width >> sx)] * (len(shapes) - 1)


def _raw_input(f: BinaryIO, name: str, info: VideoInfo, size: int | None) -> Input:
    ceil_size = info.frame_size
    bps = 1 if info.bitdepth == 8 else 2
    floor = _floor_shapes(info)
    floor_size = sum(h * w for h, w in floor) * bps
    layout = "ceil"
    total = None
    if size is not None:
        if size == 0:
            f.close()
            raise InputError(f"{name}: the file is empty")
        fits_floor = size % floor_size == 0
        fits_ceil = size % ceil_size == 0
        if fits_floor and (floor_size != ceil_size):
            layout = "floor"
        elif not fits_ceil:
            f.close()
            raise InputError(
                f"{name}: {size} bytes is not a whole number of {info.width}x{info.height} "
                f"{info.pixel_format.value} {info.bitdepth}-bit frames ({ceil_size} bytes each): "
                f"wrong -w/-h/-p/-b, or a truncated file")
        total = size // (floor_size if layout == "floor" else ceil_size)
    if layout == "ceil":
        return _from_reader(VideoReader(f, info, False, name), name, total)
    dtype = np.dtype(np.uint8) if bps == 1 else np.dtype("<u2")
    shapes = storage_planes(info.pixel_format, info.width, info.height, info.bitdepth)
    index = [0]

    def nxt():
        data = f.read(floor_size)
        if not data:
            return None
        if len(data) != floor_size:
            raise InputError(f"{name}: frame {index[0]} is truncated ({len(data)} of {floor_size} bytes)")
        planes, off = [], 0
        for (h, w), s in zip(floor, shapes):
            arr = np.frombuffer(data, dtype, h * w, off).reshape(h, w)
            off += h * w * bps
            if (h, w) != (s.height, s.width):
                # the ignored last chroma row/column of the ceil layout (scoring uses floor size)
                arr = np.pad(arr, ((0, s.height - h), (0, s.width - w)), mode="edge")
            planes.append(arr)
        index[0] += 1
        return planes
    return Input(name, info, nxt, f.close, total=total)


def open_input(path: str, *, width=None, height=None, pixel_format=None, bitdepth=None) -> Input:
    """Open one input; raw geometry applies only to headerless input (see the module doc)."""
    raw_given = any(v is not None for v in (width, height, pixel_format, bitdepth))
    name = "stdin" if path == "-" else path
    if path == "-":
        f = sys.stdin.buffer
        stream = True
    else:
        stream = _is_stream(path)
        if not stream and not os.path.exists(path):
            raise InputError(f"{path}: no such file")
        if not stream and os.path.isdir(path):
            raise InputError(f"{path}: is a directory, not a video file")
        try:
            f = _open_binary(path) if not stream else open(path, "rb", buffering=1 << 20)
        except OSError as e:
            raise InputError(f"{path}: cannot open ({e.strerror})") from None
    base = _strip_compression(path).lower()
    try:
        if stream:
            head = _read_exact(f, len(Y4M_MAGIC))
            f = _Prefixed(head, f)  # type: ignore[assignment]
        else:
            head = _peek(f, len(Y4M_MAGIC)) if hasattr(f, "peek") else b""
    except (OSError, EOFError) as e:
        f.close()
        raise InputError(f"{name}: cannot read ({e})") from None
    if head.startswith(Y4M_MAGIC):
        if raw_given and base.endswith(RAW_EXTENSIONS):  # -w/-h/-p/-b apply to the raw input only
            f.close()
            raise InputError(f"{name}: is a YUV4MPEG2 (y4m) stream, not raw video: leave out -w/-h/-p/-b "
                             f"(or name it .y4m)")
        # an uncompressed file: its frames counted from its size
        out = _y4m_input(f, name, os.path.getsize(path) if not stream and base == path.lower() else None)
        out.stream = stream
        return out
    if stream or base.endswith(RAW_EXTENSIONS) or (raw_given and not _looks_like_container(base)):
        if base.endswith(".y4m"):
            f.close()
            raise InputError(f"{name}: named .y4m but does not start with YUV4MPEG2")
        info = _raw_geometry(name, width, height, pixel_format, bitdepth)
        size = None if stream or base != path.lower() else os.path.getsize(path)
        out = _raw_input(f, name, info, size)
        out.stream = stream
        return out
    if base.endswith(".y4m"):
        f.close()
        raise InputError(f"{name}: named .y4m but does not start with YUV4MPEG2")
    f.close()
    from .av_input import open_av

    return open_av(path)


def open_file_input(fd: int, name: str, *, width=None, height=None, pixel_format=None, bitdepth=None) -> Input:
    """A regular uncompressed file given as an open ``fd`` (the input owns it from here: it is
    closed with the input, or now on an error): raw video of the geometry given, else y4m.
    Read from its first byte, whatever the fd's offset was.  What the daemon opens a file
    a client sent it with (``score_files``): it never opens a client's path."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name}: not a regular file (a pipe, socket or device cannot be read by position)")
        f = os.fdopen(fd, "rb", buffering=1 << 20)
    except OSError as e:
        os.close(fd)
        raise InputError(f"{name}: cannot read ({e.strerror})") from None
    except InputError:
        os.close(fd)
        raise
    try:
        f.seek(0)
        if any(v is not None for v in (width, height, pixel_format, bitdepth)):
            return _raw_input(f, name, _raw_geometry(name, width, height, pixel_format, bitdepth), st.st_size)
        if _peek(f, len(Y4M_MAGIC)) != Y4M_MAGIC:
            raise InputError(f"{name}: not a YUV4MPEG2 (y4m) file, and no raw geometry (width, height, "
                             f"pixel_format) was given")
        return _y4m_input(f, name, st.st_size)
    except InputError:
        f.close()
        raise
    except OSError as e:
        f.close()
        raise InputError(f"{name}: cannot read ({e.strerror})") from None


_CONTAINERS = (".mp4", ".mkv", ".mov", ".webm", ".ivf", ".avi", ".ts", ".m2ts", ".mts", ".mxf", ".264",
               ".h264", ".265", ".h265", ".hevc", ".av1", ".obu", ".webp", ".flv", ".nut", ".m4v", ".mpg")


def _looks_like_container(base: str) -> bool:
    return base.endswith(_CONTAINERS)
