"""A one-line progress meter on stderr for long runs."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr: only on a terminal, and only once a run lasts a moment.

    With a known frame count it draws a bar; otherwise it counts frames.
    """

    DELAY = 0.5  # seconds before anything is drawn: short runs stay silent

    def __init__(self, enabled: bool, total: int | None = None):
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self._t0 = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __call__(self, n: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._t0 < self.DELAY or (now - self._last < 0.1 and n != self.total):
            return
        self._last = now
        fps = n / (now - self._t0)
        if self.total:
            width = 30
            done = min(width, n * width // self.total)
            text = f"[{'#' * done}{'.' * (width - done)}] {n}/{self.total} frames, {fps:.1f} fps"
        else:
            text = f"scored {n} frames, {fps:.1f} fps"
        sys.stderr.write("\r" + text + "\033[K")
        sys.stderr.flush()
        self._drawn = True

    def done(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
