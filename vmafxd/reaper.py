"""The pending-release table and the task that drains it.

Why a table at all
------------------
A producer may write a buffer again once the daemon says ``released``.  The
daemon may say so only when the last reader of the frame has finished --
on a GPU lane that is a point on the device's library stream, known only
through an *event* recorded there after the last kernel or copy that reads
the frame; on the CPU lane it is the moment the worker thread returns from
extracting the frame.  Neither is a point the request handler can wait for,
so every frame puts one :class:`PendingRelease` into :class:`PendingReleases`
and the :class:`ReleaseReaper` task completes entries as their events
complete: it sends the ``released`` messages and drops the frame's
references on its imports.

Imports are freed here too, never in the scoring path (R4: freeing a
mapping synchronised the whole device for 200 ms in the research note).
When an import's last reference goes (its buffer was unregistered, or its
client went away, and no pending frame still reads it) it is queued with
:meth:`ReleaseReaper.free_later`; the reaper closes it in a worker thread so
even a slow device free never stalls the trio loop.

R5: an event that was never recorded stays pending
--------------------------------------------------
``hipEventQuery`` -- and ``cuEventQuery``, measured on the H200 -- report
success for an event that was never recorded.  A lane that hands out its
release event before the batch reading the frame is launched would see the
frame "released" at once.  So :meth:`PendingReleases.take_completed` does not
even *ask* an event that is not ``recorded``.

The event protocol
------------------
:class:`~vmafxd.core.release.ReleaseEvent` is all the table knows, so GPU
lanes put their device events in unchanged; the CPU lane's
:class:`~vmafxd.core.release.HostReleaseEvent` announces its completion
(``signals_completion``) through :meth:`ReleaseReaper.wake_threadsafe`,
device events are polled every ``poll_interval`` seconds while any is
pending.  The contract lives in :mod:`vmafxd.core.release`, which the lanes
and the daemon both stand on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import trio

from .core.release import ReleaseEvent, release_in_order

__all__ = ["PendingRelease", "PendingReleases", "ReleaseReaper", "RunReleased", "complete_pass"]

log = logging.getLogger("vmafxd.reaper")


@dataclass(eq=False, slots=True)
class PendingRelease:
    """One frame's release: its event and what to do once the event completes."""

    event: ReleaseEvent
    #: runs once, in the trio thread, after the event completed (sends ``released``, drops references);
    #: None for an entry of a ``batch``
    on_complete: Callable[[], None] | None
    #: what it is, for log lines: any object (a frame labels itself: formatted only when logged)
    label: Any = ""
    #: instead of ``on_complete``: the reaper calls ``batch(labels)`` once per pass with the labels
    #: of every entry of that ``batch`` that completed in the pass, in the order they were added (a
    #: session's ledger takes its completed frames at once: their ``released`` in one write)
    batch: Callable[[list[Any]], None] | None = None


@dataclass(eq=False, slots=True)
class _Run:
    """Frames handed over together (:meth:`PendingReleases.add_many`): released in their order."""

    events: list[ReleaseEvent]
    labels: list[Any]
    batch: Callable[[list[Any]], None]
    #: the first frame not released yet
    start: int = 0


@dataclass(eq=False, slots=True)
class RunReleased:
    """What a pass took of a run: ``batch(labels)`` is due for these labels (:func:`complete_pass`)."""

    batch: Callable[[list[Any]], None]
    labels: list[Any]


class PendingReleases:
    """The table of frames whose release events have not completed yet.

    A frame added on its own is an entry, asked on every pass.  Frames added together
    (:meth:`add_many`: a submit's frames) are a run, taken in their order up to the first frame
    not complete (:func:`~vmafxd.core.release.release_in_order`; a batch's frames in one step
    where the lane's events can): a lane reads a session's frames in order, so a pass costs a
    few steps a run, not a query a frame in flight.  A frame a lane completed out of order (one
    it refused, say) is released with the frames before it.
    """

    def __init__(self) -> None:
        self._entries: dict[int, PendingRelease] = {}
        self._runs: list[_Run] = []
        #: frames pending in runs
        self._in_runs = 0
        self._wake: Callable[[], None] = lambda: None
        #: entries whose events do not announce their completion (kept as a count: the
        #: reaper asks after every pass, and a scan of the table each time costs O(frames))
        self._polled = 0

    def bind(self, wake: Callable[[], None]) -> None:
        """The reaper's wake-up (trio thread), called when an entry is added that it must see (see add)."""
        self._wake = wake

    def add(self, event: ReleaseEvent, on_complete: Callable[[], None], label: Any = "", *,
            batch: Callable[[list[Any]], None] | None = None) -> PendingRelease:
        entry = PendingRelease(event, on_complete, label, batch)
        self._entries[id(entry)] = entry
        if event.signals_completion:
            # It wakes the reaper when it completes (after this entry is in the table); only
            # one that has completed already needs a pass now.  A pass per frame handed over
            # scanned the whole table once per submitted batch for nothing.  R5: an event
            # not recorded is not asked.
            if event.recorded and event.query():
                self._wake()
        else:
            # A polled event: the reaper must start polling if it was not (it parks
            # without a timeout while nothing is polled); if it already polls, it finds
            # this one on its next pass (the lane's own wake_threadsafe, or the poll
            # interval) -- a pass per added frame would scan the table once per frame.
            self._polled += 1
            if self._polled == 1:
                self._wake()
        return entry

    def add_many(self, events: list[ReleaseEvent], labels: list[Any], batch: Callable[[list[Any]], None]) -> None:
        """A run of ``batch``'s frames, each an event and its label (a group handed over at once,
        released in this order): what :meth:`add` does for each, one wake-up of the reaper at most."""
        if not events:
            return
        self._runs.append(_Run(list(events), list(labels), batch))
        self._in_runs += len(events)
        wake = False
        polled = 0
        for event in events:
            if not event.signals_completion:
                polled += 1
            elif event.recorded and event.query():  # R5: an event not recorded is not asked
                wake = True
        if polled:
            wake = wake or self._polled == 0  # the reaper starts polling (see add)
            self._polled += polled
        if wake:
            self._wake()

    def __len__(self) -> int:
        return len(self._entries) + self._in_runs

    def needs_polling(self) -> bool:
        """True when some pending event will not announce its completion."""
        return self._polled > 0

    def take_completed(self) -> list[PendingRelease | RunReleased]:
        """Remove and return the entries whose events completed, and what each run released (a
        :class:`RunReleased`); each event is destroyed once."""
        done: list[PendingRelease | RunReleased] = []
        if self._runs:
            self._take_runs(done)
        for key, entry in list(self._entries.items()):
            ev = entry.event
            # R5: a never-recorded event is not queried -- HIP and CUDA both
            # answer "complete" for it.
            if not ev.recorded:
                continue
            try:
                complete = ev.query()
            except Exception:
                log.exception("release event %s: query failed; keeping it pending", entry.label)
                continue
            if complete:
                del self._entries[key]
                if not ev.signals_completion:
                    self._polled -= 1
                try:
                    ev.destroy()
                except Exception:
                    log.exception("release event %s: destroy failed", entry.label)
                done.append(entry)
        return done

    def _take_runs(self, done: list) -> None:
        left = []
        for run in self._runs:
            k = run.start
            n = release_in_order(run.events, k, log)
            if n > k:
                released = run.events[k:n]
                self._polled -= sum(1 for ev in released if not ev.signals_completion)
                self._in_runs -= n - k
                done.append(RunReleased(run.batch, run.labels[k:n]))
            if n < len(run.events):
                run.start = n
                left.append(run)
        self._runs = left


@dataclass(eq=False)
class _Free:
    closeable: Any
    then: Callable[[], None] | None = field(default=None)


class ReleaseReaper:
    """The task that completes pending releases and frees imports (R4, R5).

    It parks while the table is empty and nothing is to be freed, wakes when
    a host event completes (or its entry is added complete already), or the first device event's
    entry is added, and polls every ``poll_interval`` seconds while an event
    that does not announce its completion (a device event) is pending (the
    lane's worker also wakes it when a batch's copy completes).  After every pass it sets an
    event (:meth:`next_pass`): whoever waits for the reaper -- a client's
    shutdown drain, the server's final :meth:`drain` -- wakes on that, not on
    a timer of its own.
    """

    def __init__(self, table: PendingReleases, *, poll_interval: float = 0.002):
        self.table = table
        self.poll_interval = poll_interval
        self._frees: list[_Free] = []
        self._wakeup = trio.Event()
        #: set (and replaced) after every pass of the task: what waiters wake on
        self._passed = trio.Event()
        #: a batch of frees is being closed in a worker thread
        self._freeing = False
        self._token: trio.lowlevel.TrioToken | None = None
        self.completed = 0
        self.freed = 0
        table.bind(self.wake)

    # -- wake-ups ---------------------------------------------------------------

    def wake(self) -> None:
        """Trio thread only."""
        self._wakeup.set()

    def wake_threadsafe(self) -> None:
        """From any thread (a lane's worker).  A no-op once the daemon's trio run has ended."""
        token = self._token
        if token is None:
            return
        try:
            token.run_sync_soon(self.wake)
        except trio.RunFinishedError:
            pass

    def free_later(self, closeable: Any, then: Callable[[], None] | None = None) -> None:
        """Close ``closeable`` (``.close()``) off the scoring path, then call ``then`` in the trio thread."""
        self._frees.append(_Free(closeable, then))
        self.wake()

    # -- the task ---------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        task_status.started()
        try:
            while True:
                await self._wait()
                await self.reap_once()
                self._passed.set()
                self._passed = trio.Event()
        finally:
            # Cancelled at shutdown: imports already handed to us are still
            # closed (synchronously: nothing is scoring any more).
            batch, self._frees = self._frees, []
            _close_all(batch)
            self._token = None

    async def _wait(self) -> None:
        if self._wakeup.is_set():
            self._wakeup = trio.Event()
            return
        if len(self.table) and self.table.needs_polling():
            with trio.move_on_after(self.poll_interval):
                await self._wakeup.wait()
        else:
            await self._wakeup.wait()
        self._wakeup = trio.Event()

    async def reap_once(self) -> None:
        """Complete what has completed, then run the frees that became due."""
        completed = self.table.take_completed()
        self.completed += sum(len(e.labels) if isinstance(e, RunReleased) else 1 for e in completed)  # frames
        complete_pass(completed)
        if self._frees:
            batch, self._frees = self._frees, []
            # Shielded: an import handed to us must be closed even if we are
            # being cancelled, or its mapping and fds would leak.  Bounded by
            # the closes themselves (munmap/close; a device free on GPU lanes).
            self._freeing = True
            try:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(_close_all, batch)
            finally:
                self._freeing = False
            self.freed += len(batch)
            for item in batch:
                if item.then is not None:
                    try:
                        item.then()
                    except Exception:
                        log.exception("after-free callback failed")

    @property
    def idle(self) -> bool:
        """Nothing pending, nothing to free, nothing being freed."""
        return not len(self.table) and not self._frees and not self._freeing

    async def next_pass(self) -> None:
        """Wait until the running task has made its next pass (completions sent, frees run)."""
        await self._passed.wait()

    async def drain(self, timeout: float) -> bool:
        """Wait until the table is empty and nothing is left to free, or ``timeout`` passes.

        Used at shutdown, after the clients are gone, while :meth:`run` still
        runs: the caller wakes on the task's passes (an event set after each),
        never on a timer of its own.  Returns True when empty.
        """
        with trio.move_on_after(timeout):
            while not self.idle:
                if self._token is None:  # no task running (a test): reap here
                    await self.reap_once()
                    if not self.idle:
                        await trio.sleep(self.poll_interval)
                    continue
                await self.next_pass()
        return self.idle


def complete_pass(completed: list[PendingRelease | RunReleased]) -> None:
    """Run the completions of one pass: each entry's ``on_complete``, or, for entries with a
    ``batch`` and the runs' releases, one ``batch(labels)`` call per batch after the others (one
    write of a session's ``released`` for the pass)."""
    groups: dict[Callable[[list[Any]], None], list[Any]] = {}
    for entry in completed:
        if entry.batch is not None:
            labels = groups.get(entry.batch)
            if labels is None:
                labels = groups[entry.batch] = []
            if isinstance(entry, RunReleased):
                labels.extend(entry.labels)
            else:
                labels.append(entry.label)
            continue
        try:
            entry.on_complete()
        except Exception:
            log.exception("completing release %s failed", entry.label)
    for batch, labels in groups.items():
        try:
            batch(labels)
        except Exception:
            log.exception("completing the releases of %d frames (%s ...) failed", len(labels), labels[0])


def _close_all(batch: list[_Free]) -> None:
    for item in batch:
        try:
            item.closeable.close()
        except Exception:
            log.exception("freeing %r failed", item.closeable)
