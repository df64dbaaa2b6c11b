"""The release event: what a lane hands back for every frame, and what the daemon waits on.

A producer may write a buffer again once the daemon says ``released``, and
the daemon may say so only once the last reader of the frame has finished:
on a GPU lane a point on the device's library stream, known through an event
recorded after the last kernel or copy that reads the frame; on the CPU lane
the moment the worker returns from extracting it.  Every submitted frame
therefore yields one :class:`ReleaseEvent`, which the daemon puts into its
pending-release table (``vmafxd.reaper.PendingReleases``); the reaper task
completes entries as their events complete.

The contract a lane fulfils:

* ``recorded`` -- set once the lane has enqueued the record after the last
  reader.  R5: ``hipEventQuery`` and ``cuEventQuery`` (measured on the H200)
  report success for an event never recorded, so the table does not even
  *ask* an unrecorded event;
* ``query()`` -- non-blocking: has it completed?
* ``destroy()`` -- called exactly once, after completion;
* ``signals_completion`` -- True when whoever completes the event calls the
  reaper's thread-safe wake-up (``LaneServices.wake_reaper``), as
  :class:`HostReleaseEvent` does; events without it are polled every couple
  of milliseconds while any is pending.

Every event handed out must eventually be recorded and complete, also for
frames a lane drops unread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

__all__ = ["ReleaseEvent", "HostReleaseEvent", "release_in_order"]


@runtime_checkable
class ReleaseEvent(Protocol):
    """A point after the last reader of a frame (a device event, or a host flag)."""

    #: True when whoever completes the event calls ReleaseReaper.wake_threadsafe()
    signals_completion: bool

    @property
    def recorded(self) -> bool: ...

    def query(self) -> bool: ...

    def destroy(self) -> None: ...


class HostReleaseEvent:
    """The CPU lane's release event: a flag the worker thread sets.

    ``record()`` when the worker starts reading the frame, ``complete()`` when
    it has finished reading it.  Both may be called from any thread;
    ``complete`` then calls ``notify`` (the reaper's thread-safe wake-up), so
    the reaper does not need to poll host events.
    """

    __slots__ = ("_recorded", "_done", "_notify")
    signals_completion = True

    def __init__(self, notify: Callable[[], None] | None = None):
        self._recorded = False
        self._done = threading.Event()
        self._notify = notify

    @classmethod
    def completed(cls) -> "HostReleaseEvent":
        """An event that is already recorded and complete (a frame nobody will read)."""
        ev = cls()
        ev._recorded = True
        ev._done.set()
        return ev

    @property
    def recorded(self) -> bool:
        return self._recorded

    def record(self) -> None:
        self._recorded = True

    def complete(self) -> None:
        # Recorded first: a completed event must never look unrecorded (R5).
        self._recorded = True
        self._done.set()
        if self._notify is not None:
            self._notify()

    def query(self) -> bool:
        return self._done.is_set()

    def destroy(self) -> None:
        self._notify = None


def release_in_order(events: Sequence[Any], start: int, log: logging.Logger | None = None) -> int:
    """Destroy ``events[start:]`` in order up to the first one not recorded and complete (R5: one
    not recorded is not asked); returns that one's position (``len(events)`` when all were).

    For a run of frames handed over together (one submit): a lane reads a session's frames in
    their order, so once one is not complete, neither are those after it, and asking each of them
    would find nothing.  A lane's event type may do it for a batch's frames at once
    (``destroy_completed(events, start)``, the same contract, safe to call again after it
    raised: one query and one step a batch); any other event is asked and destroyed one by one.

    With ``log``, what raises is logged instead: a query that raises stops the run there (asked
    again next time), a destroy that raises still counts its event as released (it completed);
    where the lane's step raised, the run is taken again from ``start`` next time."""
    fast = getattr(type(events[start]), "destroy_completed", None) if start < len(events) else None
    if fast is not None:
        try:
            return fast(events, start)
        except Exception:
            if log is None:
                raise
            log.exception("release events %d.. of a run: taking them failed; asked again on the next pass", start)
            return start
    i = start
    for ev in events[start:]:
        try:
            if not (ev.recorded and ev.query()):
                break
        except Exception:
            if log is None:
                raise
            log.exception("release event %d of a run: query failed; keeping it pending", i)
            break
        try:
            ev.destroy()
        except Exception:
            if log is None:
                raise
            log.exception("release event %d of a run: destroy failed", i)
        i += 1
    return i
