"""What every opened input is (:class:`Input`) and how it fails (:class:`InputError`).

Its own module so that the openers (:mod:`vmafx.io.inputs` for y4m/raw, :mod:`vmafx.io.av_input`
for anything FFmpeg decodes) stand on it without importing each other.
"""

from __future__ import annotations

from .video import VideoInfo, unpack_planes

__all__ = ["Input", "InputError", "InputFramesAt", "pack_planes", "unpack_planes", "read_pair", "PARALLEL_READ_BYTES"]


def pack_planes(planes, dst: memoryview) -> int:
    """Write stored planes one after another, rows unpadded, into ``dst``; the bytes written."""
    import numpy as np

    out = np.frombuffer(dst, dtype=np.uint8)
    off = 0
    for p in planes:
        raw = np.ascontiguousarray(p).view(np.uint8).reshape(-1)
        out[off:off + raw.size] = raw
        off += raw.size
    return off


#: from this many bytes a frame, the distorted frame is read on a second thread while the
#: reference is read: one thread's copy out of the page cache caps the file path at large sizes;
#: below it a thread hop per frame costs more than the second reader gains
PARALLEL_READ_BYTES = 1 << 20


def read_pair(read_ref, read_dist, helper=None) -> tuple[bool, bool]:
    """(reference read, distorted read): both callables run, the distorted one in ``helper``
    (a ThreadPoolExecutor) meanwhile when given.  The reference's error is raised first, and
    only once the distorted read is over (it writes into the caller's buffer)."""
    if helper is None:
        return read_ref(), read_dist()
    later = helper.submit(read_dist)
    error: BaseException | None = None
    a = b = False
    try:
        a = read_ref()
    except BaseException as e:
        error = e
    try:
        b = later.result()
    except BaseException as e:
        error = error or e
    if error is not None:
        raise error
    return a, b


class InputError(ValueError):
    """An input cannot be read as video; the message names the file and what was expected."""


class InputFramesAt:
    """An input's :class:`~vmafx.io.video.FramesAt`: ``read(i, dst)`` from any thread, a
    failed read one :class:`InputError` naming the file and the frame; ``advance(n)`` counts
    the frames taken in the input's ``frames_read`` too."""

    def __init__(self, inp: "Input", at):
        self._inp, self._at = inp, at

    def read(self, i: int, dst: memoryview, nbytes: int | None = None) -> bool:
        try:
            return self._at.read(i, dst, nbytes)
        except OSError as e:
            raise InputError(f"{self._inp.name}: frame {self._inp.frames_read + i} cannot be read "
                             f"({e.strerror or e})") from None

    def advance(self, n: int) -> None:
        if n:
            self._at.advance(n)
            self._inp.frames_read += n

    def close(self) -> None:
        self._at.close()


class Input:
    """One opened input: ``info``, ``read_frame()``, ``pushback()``, ``close()``."""

    def __init__(self, name: str, info: VideoInfo, next_frame, closer, *, total: int | None = None,
                 next_into=None, frames_at=None):
        self.name = name
        self.info = info
        self._next = next_frame
        #: reads the next frame straight into a packed buffer (y4m and raw files), or None
        self._next_into = next_into
        #: the reader's frames from its position, read by offset (regular y4m and raw files), or None
        self._frames_at = frames_at
        self._close = closer
        self._back: list = []
        #: frames in the input when knowable without reading it (regular uncompressed files)
        self.total = total
        self.frames_read = 0
        #: stdin, a pipe or a FIFO (read as it arrives)
        self.stream = False

    def read_frame(self):
        if self._back:
            return self._back.pop()
        frame = self._next()
        if frame is not None:
            self.frames_read += 1
        return frame

    @property
    def reads_into(self) -> bool:
        """The file is read straight into a buffer by :meth:`read_frame_into` (y4m, raw)."""
        return self._next_into is not None

    def read_frame_into(self, dst: memoryview) -> bool:
        """The next frame's stored planes written packed (plane after plane, no row padding:
        a y4m frame's layout) into ``dst``, ``info.frame_size`` writable bytes; False at the end.

        y4m and raw inputs read the file straight into ``dst``; the others (and a frame given
        back by :meth:`pushback`) are copied in from :meth:`read_frame`'s planes."""
        if not self._back and self._next_into is not None:
            if not self._next_into(dst):
                return False
            self.frames_read += 1
            return True
        frame = self.read_frame()
        if frame is None:
            return False
        size = sum(memoryview(p).nbytes for p in frame)
        if size != len(dst):
            raise InputError(f"{self.name}: frame {self.frames_read - 1} holds {size} bytes, "
                             f"expected {len(dst)}")
        pack_planes(frame, dst)
        return True

    def frames_at(self, *, mapped: bool = False) -> "InputFramesAt | None":
        """The next frames, readable by position from several threads at once (y4m and raw
        regular files, when no frame was given back), or None: read them one by one.
        ``mapped``: copied out of a mapping of the file rather than read with ``preadv``."""
        if self._back or self._frames_at is None:
            return None
        at = self._frames_at(mapped=mapped)
        return None if at is None else InputFramesAt(self, at)

    def pushback(self, frame) -> None:
        self._back.append(frame)

    def close(self) -> None:
        self._close()

    def __enter__(self) -> "Input":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
