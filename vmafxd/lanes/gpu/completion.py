"""Completion wake-ups for a GPU worker: a thread that waits on the device so the worker need not poll.

The worker thread (R1: the only one that enqueues on its device's library
stream, and the only one that touches the scorers) blocks on its job queue.
Beside it a :class:`CompletionWatcher` thread waits, in the driver, on the
points of that stream the worker handed it, oldest first, and acts on each as
it completes:

* a batch's ``copied`` point (the batch's release point, after its gather):
  the watcher holds a share of the batch's shared event
  (:class:`~vmafxd.lanes.gpu.release_events.SharedEvent`), marks it done, drops its
  share and wakes the reaper -- so the producer's buffers are released as
  soon as the gather has read them, while the features still run;
* a batch's end: an event of the watcher's own that the worker records on
  the stream right after the batch (after its ``done`` event): the watcher
  posts a wake-up into the worker's queue, and the worker, woken, queries its
  batches and completes the finished ones itself -- unless the worker has
  already done with that batch (it found it complete on a wake-up of its own:
  :class:`EndMark`), when a wake-up would find nothing.

Points that complete together (a burst: the stream ran ahead while the
watcher waited for the interpreter) are taken together, with one wake-up of
the reaper and one of the worker for all of them.

Order.  One stream runs its points in the order they were recorded, and the
worker hands them over in that order, so while the watcher waits on the
oldest, none after it can have completed: waiting on the oldest loses no
time.  A point the worker already saw complete (it waited for a slot)
simply completes at once here.

Lifetimes.  An event the watcher waits on cannot be destroyed under it: a
``copied`` event lives while any share does, and the watcher holds one; its
own end events are made when it starts (:attr:`CompletionWatcher.PREPARED`
of them, more only while more batches than that are in flight at once),
recycled once seen complete, and destroyed by the worker only after the
thread has ended (:meth:`close`) -- so a device's count of live handles does
not move with the traffic, as its stream's and modules' do not.

The GIL.  ``Event.synchronize`` is the driver's event synchronize, which
cuda-bindings and hip-python call with the GIL released (both generate their
wrappers ``with nogil``), and the emulator's is a ``time.sleep``; so the
thread costs the interpreter nothing while it waits, one GIL acquisition per
completed point.

Sleep or spin.  The end events are created with the driver's blocking
synchronization (the thread sleeps in the kernel until the device
interrupts, a few tens of microseconds later) unless
``VMAFXD_GPU_BLOCKING_SYNC=0``, when the driver spins on them (the context's
default scheduling on a host with more cores than contexts): the completion
is then seen within microseconds, at the price of one core per device kept
busy while batches are in flight.  On the H200 (docs/performance.md, seventh
session) sleeping gave the higher rates at small frames and less daemon CPU,
spinning 0.1-0.2 ms less latency at 4 frames in flight; a service shares its
host with the producers, so it sleeps by default.  ``copied`` events are the
engine's own (no flag): the wait on them spins for as long as a batch's
gather runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import Any, Callable

__all__ = ["CompletionWatcher", "EndMark", "blocking_sync"]

log = logging.getLogger("vmafxd.lanes.gpu")


def blocking_sync() -> bool:
    """Whether the watcher's end events sleep (the default) rather than spin
    (``VMAFXD_GPU_BLOCKING_SYNC=0``; see above)."""
    return os.environ.get("VMAFXD_GPU_BLOCKING_SYNC", "1") != "0"


class EndMark:
    """A batch's end as the watcher holds it; the worker clears ``needed`` once it is done with
    the batch (a plain attribute: one thread writes it, the other reads it under the GIL; a
    read that comes too early only costs a wake-up that finds nothing)."""

    __slots__ = ("event", "needed")

    def __init__(self, event):
        self.event = event
        self.needed = True


class CompletionWatcher:
    """One thread per device worker that waits on the worker's stream points (see the module)."""

    #: end events made at the start: a device's batches in flight are bounded by its sessions'
    #: statistics slots (three each), so this many cover ten busy sessions before one more is made
    PREPARED = 32

    def __init__(self, name: str, device: Any, wake_worker: Callable[[], None], wake_reaper: Callable[[], None]):
        self.name = name
        self.device = device
        self._wake_worker = wake_worker
        self._wake_reaper = wake_reaper
        self._blocking = blocking_sync()
        #: points not yet seen complete, in stream order: ("copied", shared event) or ("end", EndMark)
        self._points: deque = deque()
        #: end events that completed, for the worker to record again (worker thread takes, watcher gives)
        self._spare: list = []
        #: every end event made (destroyed by close(), once the thread has ended)
        self._events: list = []
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failed_once = False

    # -- worker thread ---------------------------------------------------------------------
    def start(self) -> None:
        """Make the prepared end events (the worker's thread, its device current) and start."""
        for _ in range(self.PREPARED):
            self._events.append(self.device.create_event(blocking=self._blocking))
        self._spare = list(self._events)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def watch_copied(self, shared) -> None:
        """A batch's gather point: ``shared`` carries a share the watcher drops once it completed."""
        with self._changed:
            self._points.append(("copied", shared))
            self._changed.notify()

    def mark_end(self, stream) -> EndMark:
        """Record an end event on ``stream`` now (after the batch just enqueued) and watch it."""
        with self._changed:
            event = self._spare.pop() if self._spare else None
        if event is None:
            event = self.device.create_event(blocking=self._blocking)
            self._events.append(event)
        event.record(stream)
        # R9: the record submitted, not just queued (HIP left the last work unsubmitted without a query)
        stream.submit()
        mark = EndMark(event)
        with self._changed:
            self._points.append(("end", mark))
            self._changed.notify()
        return mark

    def stop(self) -> None:
        """Let the thread finish the points it holds (the caller has drained the stream, so each
        completes at once) and end; returns once it has.  Idempotent."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """After :meth:`stop`: destroy the end events (the worker's thread, its device current)."""
        events, self._events, self._spare = self._events, [], []
        for event in events:
            try:
                event.close()
            except Exception as e:  # a failing driver at shutdown: the handle goes with the process
                log.warning("%s: destroying an end event failed: %s", self.name, e)

    # -- the watcher's thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.device.make_current()
        except Exception as e:  # events are waited on by handle; the current context is a courtesy
            log.warning("%s: cannot make the device current: %s", self.name, e)
        while True:
            with self._changed:
                while not self._points and not self._stopping:
                    self._changed.wait()
                if not self._points:
                    return  # stopping, and nothing left to see
                kind, what = self._points[0]
            completed = self._wait(what.event)
            reaper = worker = False
            while True:  # this point, and the ones after it that have completed as well
                with self._changed:
                    self._points.popleft()
                    if kind == "end":
                        self._spare.append(what.event)
                if kind == "copied":
                    if completed:
                        what.done = True  # its batch's handles answer without asking the driver again
                    what.drop_shares()
                    reaper = True
                else:
                    worker = worker or what.needed
                with self._changed:
                    if not self._points:
                        break
                    kind, what = self._points[0]
                if not self._query(what.event):
                    break
                completed = True
            if reaper:
                self._wake_reaper()
            if worker:
                self._wake_worker()

    def _query(self, event) -> bool:
        try:
            return event.query()
        except Exception:  # _wait meets it, and says so
            return False

    def _wait(self, event) -> bool:
        """Until ``event`` completes (GIL released in the driver); False when the wait failed.  A
        failed wait is passed on as a completion: the worker's (and the reaper's) own queries
        meet the error where it is handled, and nothing waits on the watcher forever."""
        try:
            event.synchronize()
            return True
        except Exception as e:
            if not self._failed_once:
                self._failed_once = True
                log.warning("%s: waiting on the device failed (%s); the worker's queries report it", self.name, e)
            return False
