"""The GPU lane's worker: the thread that owns one device's context and library stream (R1).

It takes every job queued when it wakes, keeps each session's frames in order until they are
launched (the batching rule: :attr:`GpuWorker.AHEAD`), holds the batches in flight, and
completes them when its completion watcher (:mod:`.completion`) says the stream has passed
them.  The stream-ordered pool is trimmed once no session has used the device for a while.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..device import DeviceWorker, Job
from .completion import CompletionWatcher
from .engine import KernelSet
from .lane_session import FrameJob
from .release_events import SharedEvent

__all__ = ["GpuWorker"]

log = logging.getLogger("vmafxd.lanes.gpu")


class GpuWorker(DeviceWorker):
    """The thread that owns one device's context and library stream (R1)."""

    def __init__(self, lane: "GpuLane", device):
        super().__init__(device.info.ordinal, f"vmafxd-{lane.name}{device.info.ordinal}")
        self.lane = lane
        self.device = device
        self.stream = None
        self.kernels: KernelSet | None = None
        self.inflight: list[tuple["GpuLaneSession", Any]] = []
        #: the thread that waits on the stream and wakes the worker and the reaper (setup())
        self.watcher: CompletionWatcher | None = None
        #: id(batch) -> the watcher's mark of its end, while the batch is in flight
        self._end_marks: dict[int, Any] = {}
        #: frames taken from the queue and not yet launched, per session (in order)
        self._waiting: dict["GpuLaneSession", list["FrameJob"]] = {}
        self._launching = False
        #: sessions with a scorer on this device; when the last one closes, the stream-ordered
        #: pool is trimmed after POOL_TRIM_IDLE_S without a new one (see _trim_pool_when_idle)
        self.scorers = 0
        self._trim_at: float | None = None

    def setup(self) -> None:
        self.device.make_current()
        self.stream = self.device.create_stream()
        self.kernels = KernelSet(self.lane.runtime, self.device, self.lane.options)
        self.watcher = CompletionWatcher(f"{self.name}-wake", self.device, self.wake,
                                         self.lane.services.wake_reaper)
        self.watcher.start()

    def teardown(self) -> None:
        try:
            try:
                if self.stream is not None:
                    self.stream.synchronize()
            finally:
                if self.watcher is not None:
                    # the stream is drained: every point the watcher holds completes at once,
                    # and its thread ends (its last wake-ups land in a queue nobody reads now)
                    self.watcher.stop()
            for sess, batch in list(self.inflight):
                sess._complete(batch)
            self._end_marks.clear()
            if self.watcher is not None:
                self.watcher.close()
                self.watcher = None
            # the device's modules and its stream go with the worker that owns them
            if self.kernels is not None:
                self.kernels.close()
                self.kernels = None
            if self.stream is not None:
                self.stream.close()
                self.stream = None
        except Exception:
            log.exception("%s: teardown", self.name)

    def watch_copied(self, shared: SharedEvent) -> None:
        """Hand the worker's share of a batch's gather event to the watcher, which drops it and
        wakes the reaper once the gather completes (the reaper's own poll is a slower fallback),
        so that ``released`` follows the copy closely even while the features still run."""
        if self.watcher is not None:
            self.watcher.watch_copied(shared)
        else:  # no thread (a worker driven by hand): the handles' shares keep the event
            shared.drop_shares()

    def batch_enqueued(self, batch) -> None:
        """After a batch's enqueue: the watcher wakes this worker once the stream has passed it."""
        if self.watcher is None:
            return
        try:
            self._end_marks[id(batch)] = self.watcher.mark_end(self.stream)
        except Exception:  # the batch still completes: SAFETY_POLL_S finds it
            log.exception("%s: marking a batch's end for the watcher failed", self.name)

    def batch_ended(self, batch) -> None:
        """The worker is done with ``batch`` (completed, or dropped with its session): the
        watcher need not wake it for the batch's end."""
        mark = self._end_marks.pop(id(batch), None)
        if mark is not None:
            mark.needed = False

    # The worker loop is DeviceWorker's: it blocks on its queue, and the watcher's
    # wake-ups (DeviceWorker.wake) run poll() when a batch has ended.
    #
    # Batching: a session's frames are launched at once while the device has
    # fewer than AHEAD batches in flight (an idle device starts at once), or
    # while none of the session's own batches is in flight; otherwise they
    # wait, and are launched together as soon as one of its batches completes
    # or a full batch has gathered.  Launching a batch costs the same host time
    # whatever it holds, so a busy device gets fewer, fuller batches, and a
    # frame waits at most about one of its session's batches.  With one
    # session this is "fewer than AHEAD of its batches"; with many, each
    # session keeps one batch in flight while the others keep the device busy,
    # and its frames gather behind it (AHEAD counted per session launched more,
    # emptier batches: 16 producers at 1080p, docs/performance.md).
    AHEAD = 2

    #: with batches in flight the worker still wakes this often by itself: a net under a wake-up
    #: that never comes (a driver error while marking a batch's end); the watcher's wake-ups are
    #: what completes batches
    SAFETY_POLL_S = 0.05

    def poll_timeout(self) -> float | None:
        timeout = self.SAFETY_POLL_S if (self.inflight or self._waiting) else None
        if self._trim_at is not None:
            left = max(0.0, self._trim_at - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        return timeout

    #: how long a device stays without sessions before its pool is trimmed: a client that
    #: closes a session and opens the next at once keeps the pool's memory
    POOL_TRIM_IDLE_S = 0.5

    def scorer_opened(self) -> None:
        self.scorers += 1
        self._trim_at = None

    def scorer_closed(self) -> None:
        self.scorers -= 1
        if self.scorers == 0:
            self._trim_at = time.monotonic() + self.POOL_TRIM_IDLE_S

    def _trim_pool_when_idle(self) -> None:
        """Give the stream-ordered pool's memory back once no session has used it for a while.

        The pools keep freed memory (R7: the release threshold, cuda.py/hip.py), so
        without this a daemon's device memory stays at the high-water mark of every
        session it ever ran (measured: +32 MiB after 5,000 churned clients on an H200).
        Only with no session left, after the stream has drained: nothing in flight
        still uses pool memory."""
        if (self._trim_at is None or self.scorers or self.inflight or self._waiting
                or time.monotonic() < self._trim_at):
            return
        self._trim_at = None
        trim = getattr(self.device, "trim_pool", None)
        if trim is None:
            return
        try:
            self.stream.synchronize()
            trim()
        except Exception as e:  # the memory stays pooled; nothing else is wrong
            log.warning("%s: trimming the memory pool failed: %s", self.name, e)

    def busy(self) -> bool:
        return bool(self.inflight or self._waiting)

    def run_batch(self, jobs: list[Job]) -> None:
        # Frames of a session are enqueued in order; other jobs run after what came before them.
        for job in jobs:
            if isinstance(job, FrameJob):
                self._waiting.setdefault(job.session, []).append(job)
            else:
                self._launch(everything=True)
                try:
                    job.run()
                except Exception:
                    log.exception("%s: a job failed", self.name)
        self._launch()

    def _launch(self, everything: bool = False) -> None:
        if self._launching:
            return
        self._launching = True
        try:
            for sess in list(self._waiting):
                frames = self._waiting[sess]
                full = sess.batch
                while frames and (everything or len(frames) >= full or len(self.inflight) < self.AHEAD
                                  or not any(s is sess for s, _ in self.inflight)):
                    chunk, frames[:] = frames[:full], frames[full:]
                    sess._enqueue(chunk)
                if not frames:
                    del self._waiting[sess]
        finally:
            self._launching = False

    def wait_slot(self, session: "GpuLaneSession") -> None:
        """Block until ``session`` can enqueue another batch (its oldest one completes)."""
        while not session.scorer.can_enqueue():
            mine = [b for s, b in self.inflight if s is session]
            if not mine:
                return
            mine[0].done.synchronize()
            self.poll()

    def poll(self, block: bool = False) -> None:
        done = []
        for sess, batch in self.inflight:
            if batch.done.query():
                done.append((sess, batch))
            elif block:
                batch.done.synchronize()
                done.append((sess, batch))
                break
        for sess, batch in done:
            self.inflight.remove((sess, batch))
            self.batch_ended(batch)
            sess._complete(batch)
        if self._waiting:
            self._launch(everything=block and not self.inflight)
        if self._trim_at is not None:
            self._trim_pool_when_idle()

