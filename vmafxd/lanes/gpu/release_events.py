"""A frame's release event on the GPU lane (R5): one device event a batch, shared by its frames.

``submit`` hands back a :class:`BatchReleaseHandle` that is not recorded yet.  When the
frame's batch is enqueued, the batch's ``copied`` event -- recorded right after the gather,
the last read of the producers' buffers -- is bound to every frame of the batch through one
:class:`SharedEvent`, which goes with its last share.  A frame never read (refused, dropped,
aborted) completes on the host.  The reaper asks and destroys them
(:meth:`BatchReleaseHandle.destroy_completed`: a batch's handles side by side, in one step).
"""

from __future__ import annotations

import threading
from typing import Sequence

__all__ = ["SharedEvent", "BatchReleaseHandle"]


class SharedEvent:
    """One device event shared by the frames of a batch; destroyed with its last share."""

    def __init__(self, device, event):
        self.device = device
        self.event = event
        self.shares = 0
        self._lock = threading.Lock()
        self.done = False

    def query(self) -> bool:
        if self.done:
            return True
        self.device.make_current()
        if self.event.query():
            self.done = True
        return self.done

    def add_shares(self, n: int = 1) -> None:
        """Take ``n`` shares in one step (a batch's frames, or the worker's own)."""
        with self._lock:
            self.shares += n

    def drop_shares(self, n: int = 1) -> None:
        """Drop ``n`` shares (n >= 1) in one step: the event goes with the last share."""
        with self._lock:
            self.shares -= n
            last = self.shares == 0
        if last:
            self.device.make_current()
            self.event.close()


class BatchReleaseHandle:
    """A frame's release event: unrecorded until its batch's gather is enqueued (R5).

    Bound to the batch's shared ``copied`` event then; or completed on the
    host for a frame that is never read (refused, dropped, aborted).
    """

    signals_completion = False  # device events are polled by the reaper

    __slots__ = ("_shared", "_host_done", "recorded", "_destroyed")

    def __init__(self):
        self._shared: SharedEvent | None = None
        self._host_done = False
        #: a plain attribute, not a property: the reaper reads it for every pending frame on every pass
        self.recorded = False
        self._destroyed = False

    def bind(self, shared: SharedEvent) -> None:
        BatchReleaseHandle.bind_all((self,), shared)

    @staticmethod
    def bind_all(handles: Sequence["BatchReleaseHandle"], shared: SharedEvent) -> None:
        """Bind each of ``handles`` to ``shared``: their shares taken in one step first, then each
        handle's event set before it reads as recorded."""
        shared.add_shares(len(handles))
        for h in handles:
            h._shared = shared
            h.recorded = True

    def complete_on_host(self) -> None:
        self._host_done = True
        self.recorded = True

    def query(self) -> bool:
        if self._host_done or self._destroyed:  # (destroyed only once complete: asked again, still so)
            return True
        return self._shared is not None and self._shared.query()

    def destroy(self) -> None:
        if not self._destroyed:
            self._destroyed = True
            if self._shared is not None:
                self._shared.drop_shares()
                self._shared = None

    @staticmethod
    def destroy_completed(handles: Sequence["BatchReleaseHandle"], start: int = 0) -> int:
        """Destroy ``handles[start:]`` in order up to the first one that is not recorded and complete
        (never asking one that is not recorded, R5); returns that one's position (``len(handles)``
        when all were).  What ``recorded and query()`` then ``destroy()`` on each in turn does, with
        the handles of one batch's event, side by side, asked once and their shares dropped in one step."""
        n, i = len(handles), start
        while i < n:
            h = handles[i]
            if not h.recorded:
                break
            shared = h._shared
            if shared is None or h._host_done or h._destroyed:
                if not h.query():
                    break
                h.destroy()
                i += 1
                continue
            if not shared.query():
                break
            j = i + 1
            while j < n:
                g = handles[j]
                if g._shared is not shared or not g.recorded or g._host_done or g._destroyed:
                    break
                j += 1
            for k in range(i, j):
                g = handles[k]
                g._destroyed = True
                g._shared = None
            shared.drop_shares(j - i)
            i = j
        return i

