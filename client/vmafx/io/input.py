"""What every opened input is (:class:`Input`) and how it fails (:class:`InputError`).

Its own module so that the openers (:mod:`vmafx.io.inputs` for y4m/raw, :mod:`vmafx.io.av_input`
for anything FFmpeg decodes) stand on it without importing each other.
"""

from __future__ import annotations

from .video import VideoInfo

__all__ = ["Input", "InputError"]


class InputError(ValueError):
    """An input cannot be read as video; the message names the file and what was expected."""


class Input:
    """One opened input: ``info``, ``read_frame()``, ``pushback()``, ``close()``."""

    def __init__(self, name: str, info: VideoInfo, next_frame, closer, *, total: int | None = None):
        self.name = name
        self.info = info
        self._next = next_frame
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

    def pushback(self, frame) -> None:
        self._back.append(frame)

    def close(self) -> None:
        self._close()

    def __enter__(self) -> "Input":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
