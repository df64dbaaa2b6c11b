"""The CPU lane: every feature on the host, run by N worker threads.

A session's scorer is the numpy twins' (``CpuScorer``) or, with the ``cpu_engine``
setting ``auto`` (the default) or ``compiled``, the compiled engine's
(:mod:`.compiled`: the GPU kernels built for the host, equal to the twins bit
for bit) for the features it runs faster; without a host C++ compiler ``auto``
is the twins.

Each session is pinned to one :class:`~vmafxd.lanes.device.DeviceWorker`
(the one with the fewest sessions when it opens), so its frames run in
order on one thread, and sessions spread over the workers.  The heavy numpy
work and the compiled launches release the GIL, so N workers use N cores.

A frame's life on a worker (:class:`_FrameJob`):

1. ``event.record()`` -- the worker starts reading the frame;
2. under ``DMA_BUF_IOCTL_SYNC`` for dma-bufs, the planes are viewed in place
   (:class:`~vmafxd.lanes.cpu_import.CpuImport`) and ``CpuScorer.push``
   extracts every feature;
3. ``event.complete()`` -- right after extraction, before anything else: the
   producer may reuse the buffer now.  This is safe because no CPU twin keeps
   a view of an input plane once ``extract`` returns (motion keeps a padded
   *copy* of the reference luma; tests/daemon/test_lane_cpu.py checks every
   feature by closing the mapping, which fails while any view is alive);
4. the frames that became final (motion's one-frame lag) go back to the trio
   thread through ``TrioToken.run_sync_soon`` and the session's sink.

The scorer numbers frames densely from 0 (the assembler and motion's
timeline require it); a frame the daemon failed before it reached the lane
(a fence timeout) never gets a number, which is how a failed frame is left
out of the sequence and temporal features continue from the previous scored
frame.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Mapping, Sequence

import trio

from vmafx.transport import OwnedFd

from .. import features as feature_registry
from ..core.layout import BufferLayout
from ..core.release import HostReleaseEvent
from ..core.scoring import CpuScorer
from .compiled import make_cpu_scorer
from .cpu_alloc import keep_heap
from .cpu_import import CpuImport, import_host_buffer
from .device import (
    DeviceWorker, FrameSink, Job, Lane, LaneFrame, LaneServices, LaneSummary, SessionSpec, WorkerLaneSession,
    finite_pooled, serve_workers,
)
from .errors import LaneFailure, Unsupported

__all__ = ["CpuLane", "CpuLaneSession", "create_lane"]

log = logging.getLogger("vmafxd.lanes.cpu")


class CpuLane(Lane):
    name = "cpu"

    def __init__(self, workers: int, services: LaneServices, engine: str = "auto"):
        if workers < 1:
            raise ValueError("the cpu lane needs at least one worker")
        self.services = services
        self.engine = engine
        self.workers = [DeviceWorker(i, f"vmafxd-cpu{i}") for i in range(workers)]
        self._copies = 0
        self._copies_lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None

    # -- description --------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {"lane": self.name,
                "devices": [{"device": w.index, "name": w.name, "sessions": w.sessions} for w in self.workers]}

    def features(self) -> list[str]:
        return sorted(d.name for d in feature_registry.all_declarations() if d.cpu is not None)

    @property
    def host_copies(self) -> int:
        return self._copies

    def count_copies(self, n: int) -> None:
        if n:
            with self._copies_lock:
                self._copies += n

    # -- buffers and fences ----------------------------------------------------------

    def import_buffer(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> CpuImport:
        return import_host_buffer(layout, fds)

    def check_fence(self, kind: str, field: str) -> None:
        if kind not in ("sync_file", "eventfd"):
            raise Unsupported(
                field,
                f"the cpu lane cannot wait on a {kind} fence (GPU interprocess events need the "
                f"{'cuda' if kind.startswith('cuda') else 'hip'} lane)",
            )

    # -- sessions -------------------------------------------------------------------

    async def open_session(self, spec: SessionSpec, sink: FrameSink) -> "CpuLaneSession":
        if self._token is None:
            raise RuntimeError("the cpu lane is not running")
        if spec.device is not None:
            if not 0 <= spec.device < len(self.workers):
                raise Unsupported(
                    "device",
                    f"the cpu lane has devices 0..{len(self.workers) - 1} (its workers), not {spec.device}",
                )
            worker = self.workers[spec.device]
        else:
            worker = min(self.workers, key=lambda w: w.sessions)
        geo = spec.geometry
        # Builds every feature's CPU twin: a size a feature cannot take raises ValueError here.
        # In a thread: the compiled engine's first session in a fresh cache builds its kernels.
        # keep_frames False: a session's frames go to the client as they become final (a stream
        # of any length); its pooled summary comes from running sums
        scorer = await _building(functools.partial(make_cpu_scorer, keep_frames=False), spec.plan, geo.width,
                                 geo.height, geo.bitdepth, geo.pixel_format.subsampling, self.engine)
        worker.sessions += 1
        return CpuLaneSession(self, worker, scorer, sink, self._token)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        try:
            await serve_workers(self.workers, task_status=task_status)
        finally:
            # a build still running (a session's, or the host math's on its own thread) would keep
            # its compiler alive past the daemon, and its temporary folder in the cache
            from .emulated import stop_builds

            stop_builds(wait=2.0)


async def _building(make, *args):
    """``make(*args)`` in a thread (it may build native or compiled kernels: seconds of g++ in a
    fresh cache).  Cancelled meanwhile (the daemon stopping, the client gone), the running
    compilers are killed (:func:`.emulated.stop_builds`), so the thread returns within a fraction
    of a second instead of after the build, and what it made is closed; then the cancellation
    goes on.  What ``make`` raises is raised as it is."""
    from .emulated import build_scope, stop_builds

    finished = False
    scope = object()  # this open's builds

    async def stop_builds_if_cancelled():
        try:
            await trio.sleep_forever()
        finally:
            if not finished:
                stop_builds(refuse=scope)

    def run():  # (made, None) or (None, what make raised): raised below, outside the nursery
        try:
            with build_scope(scope):
                return make(*args), None
        except Exception as e:
            return None, e

    made = error = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_builds_if_cancelled)
            try:
                made, error = await trio.to_thread.run_sync(run)
            finally:
                finished = True
                nursery.cancel_scope.cancel()
    except BaseException:  # cancelled after the thread returned: what it made is closed
        close = getattr(made, "close", None)
        if close is not None:
            close()
        raise
    if error is not None:
        raise error
    return made


class CpuLaneSession(WorkerLaneSession):
    """One session's scorer on one worker.  Trio-thread methods: submit, finish, abort."""

    def __init__(self, lane: CpuLane, worker: DeviceWorker, scorer: CpuScorer, sink: FrameSink,
                 token: trio.lowlevel.TrioToken):
        super().__init__(worker, sink, token)
        self.lane = lane
        self.scorer = scorer
        self._next_seq = 0
        # Worker-thread state: dense sequence number -> client index, for frames not yet reported.
        self._unreported: dict[int, int] = {}
        self._broken: str | None = None

    # -- trio thread ------------------------------------------------------------------

    def submit(self, frame: LaneFrame) -> HostReleaseEvent:
        if self._done:
            raise RuntimeError("submit after finish or abort")
        event = HostReleaseEvent(self.lane.services.wake_reaper)
        seq = self._next_seq
        self._next_seq += 1
        self.worker.post(_FrameJob(self, seq, frame, event))
        return event

    def submit_many(self, frames: Sequence[LaneFrame]) -> list[HostReleaseEvent]:
        """Frames handed over as one job group (LaneSession.submit_many: all or none)."""
        if self._done:
            raise RuntimeError("submit after finish or abort")
        wake, seq = self.lane.services.wake_reaper, self._next_seq
        jobs = [_FrameJob(self, seq + k, frame, HostReleaseEvent(wake)) for k, frame in enumerate(frames)]
        self._next_seq = seq + len(jobs)
        self.worker.post_many(jobs)
        return [job.event for job in jobs]

    def _finish_job(self, deliver) -> Job:
        return _FinishJob(self, deliver)

    def _abort_job(self) -> Job:
        return _AbortJob(self)

    # -- worker thread ------------------------------------------------------------------

    def _fail(self, seq: int, message: str) -> None:
        index = self._unreported.pop(seq, None)
        if index is not None:
            self._hop(self._deliver_failed, index, LaneFailure("", message))

    def _run_frame(self, seq: int, frame: LaneFrame, event: HostReleaseEvent) -> None:
        if self._aborted:
            event.complete()  # never read: releasing at once is safe
            return
        self._unreported[seq] = frame.index
        if self._broken is not None:
            event.complete()
            self._fail(seq, f"the session's scorer failed earlier ({self._broken})")
            return
        event.record()
        finals = None
        try:
            ref_imp: CpuImport = frame.ref  # type: ignore[assignment]
            dist_imp: CpuImport = frame.dist  # type: ignore[assignment]
            with ref_imp.reading(), dist_imp.reading():
                self.lane.count_copies(ref_imp.copied_planes + dist_imp.copied_planes)
                finals = self.scorer.push(seq, ref_imp.picture(), dist_imp.picture())
        except Exception as e:  # a feature failed: this frame fails, and the scorer's state is suspect
            log.exception("frame %d: scoring failed", frame.index)
            self._broken = f"frame {frame.index}: {type(e).__name__}: {e}"
        finally:
            # Released right after extraction (R15 tests catch an early one).
            event.complete()
        if finals is None:
            self._fail(seq, f"scoring failed: {self._broken}")
        else:
            self._report_final(finals, self._unreported)

    def _run_finish(self, deliver) -> None:
        summary = LaneSummary()
        if not self._aborted:
            try:
                if self._broken is None:
                    self._report_final(self.scorer.finish(), self._unreported)
                    summary = LaneSummary(finite_pooled(self.scorer.pooled()), dict(self.scorer.aggregate))
            except Exception as e:
                log.exception("finishing a session failed")
                self._broken = f"finish: {type(e).__name__}: {e}"
            for seq in sorted(self._unreported):
                self._fail(seq, f"no score: {self._broken or 'the scorer returned none'}")
        self.scorer = None  # type: ignore[assignment]  (frees the twins' workspaces)
        self._hop(deliver, summary)


class _FrameJob(Job):
    __slots__ = ("session", "seq", "frame", "event")

    def __init__(self, session: CpuLaneSession, seq: int, frame: LaneFrame, event: HostReleaseEvent):
        self.session, self.seq, self.frame, self.event = session, seq, frame, event

    def run(self) -> None:
        self.session._run_frame(self.seq, self.frame, self.event)

    def drop(self) -> None:
        self.event.complete()


class _FinishJob(Job):
    def __init__(self, session: CpuLaneSession, deliver):
        self.session, self.deliver = session, deliver

    def run(self) -> None:
        self.session._run_finish(self.deliver)

    def drop(self) -> None:
        self.session._hop(self.deliver, LaneSummary())


class _AbortJob(Job):
    def __init__(self, session: CpuLaneSession):
        self.session = session

    def run(self) -> None:
        self.session.scorer = None  # type: ignore[assignment]


def create_lane(config: Any, services: LaneServices) -> CpuLane:
    # Once, before any twin allocates: the twins' per-frame temporaries come from a heap
    # that is kept, not from fresh pages (cpu_alloc.py; off: cpu_keep_heap = false).
    keep_heap(bool(getattr(config, "cpu_keep_heap", True)))
    return CpuLane(int(getattr(config, "cpu_workers", 1)), services, str(getattr(config, "cpu_engine", "auto")))
