"""The batch's progress on stderr: jobs done/total, failures, jobs/s and ETA.

On a terminal it is one line redrawn in place (at most ten times a second);
elsewhere (a log file, CI, a Ray job's output) a plain line every
``interval`` seconds and one at the end, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "format_eta"]


def format_eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "--:--"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    def __init__(self, total: int, *, skipped: int = 0, enabled: bool = True, stream: TextIO | None = None,
                 interval: float = 10.0):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.total = total  # jobs this run scores (resumed ones excluded)
        self.skipped = skipped
        self.done = 0
        self.failed = 0
        self.interval = interval
        self._t0 = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def rate(self) -> float:
        elapsed = time.monotonic() - self._t0
        return self.done / elapsed if elapsed > 0 else 0.0

    def text(self) -> str:
        rate = self.rate()
        eta = (self.total - self.done) / rate if rate > 0 else None
        width = 24
        filled = width * self.done // self.total if self.total else width
        bar = f"[{'#' * filled}{'.' * (width - filled)}] " if self.tty else ""
        extra = f", {self.failed} failed" if self.failed else ""
        extra += f", {self.skipped} already done" if self.skipped else ""
        return f"{bar}{self.done}/{self.total} jobs{extra}, {rate:.2f} jobs/s, ETA {format_eta(eta)}"

    def update(self, ok: bool) -> None:
        self.done += 1
        if not ok:
            self.failed += 1
        self._draw(final=False)

    def _draw(self, final: bool) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if final or now - self._last >= 0.1 or self.done == self.total:
                self.stream.write("\r" + self.text() + "\033[K")
                self.stream.flush()
                self._last = now
                self._drawn = True
        elif final or now - self._last >= self.interval:
            self.stream.write("vmafxctl batch: " + self.text() + "\n")
            self.stream.flush()
            self._last = now

    def start(self) -> None:
        self._last = time.monotonic() if not self.tty else 0.0
        self._draw(final=False)

    def finish(self) -> None:
        self._draw(final=True)
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
