"""The lane interface, and the generic device-worker shape lanes are built from.

A *lane* is one kind of scoring hardware (``cpu``; ``cuda`` and ``hip``, and
``emu``, the GPU lane over the CPU emulator of its kernels) with one or more
*devices*.  The server knows lanes only through the classes below;
everything lane-specific -- how memory is imported, how frames are batched,
what a release event is -- stays behind them.  A lane imports only
:mod:`vmafxd.core`, the features, the models and the foundation shared with
the client (formats, fds); never the daemon or the wire protocol
(tests/test_layers.py).  It refuses and fails with
:mod:`vmafxd.lanes.errors`, which the daemon turns into protocol codes
(:mod:`vmafxd.lane_errors`).

Lifecycle
---------
``vmafxd.lanes.create_lane(name, config, services)`` builds a lane through its
factory in ``vmafxd.lanes.LANE_FACTORIES`` (``factory(config, services)``; the
config is :class:`vmafxd.config.Config`, the services :class:`LaneServices`),
or raises :class:`~vmafxd.lanes.LaneUnavailable`, which the command line
reports as ``lane cuda is not available: ...`` and exit status 2.  Frame
indices a lane sees and reports are the producer's.  The server then runs
``await nursery.start(lane.run)``: the lane's workers (threads owning devices,
streams, CPU scorers) live inside that call; it calls ``task_status.started()``
once they can take work and, when cancelled at shutdown, stops them within a
bounded time.  :meth:`Lane.describe` feeds ``hello_reply`` and ``status``.

Buffers
-------
``Lane.import_buffer(layout, fds) -> LaneImport`` runs in the trio thread while
``register_buffer`` is handled.  ``layout`` (:class:`~vmafxd.core.layout.BufferLayout`)
is already validated against the declared size by the daemon; ``fds`` maps the
packet's fd indices to :class:`~vmafx.transport.OwnedFd` objects that the
*caller* closes right after the call -- a lane keeps what it needs by
``dup()`` (R3) or by mapping.  The lane checks what only the memory can tell
(kind, real size, seals, modifier, mappability) and refuses with a
:class:`~vmafxd.lanes.errors.LaneError` naming the field (``InvalidInput``,
``Unsupported``, ``OutOfMemory``).  It must
not block on the device for long.  The returned :class:`LaneImport` is freed
with ``close()`` by the reaper only, in a worker thread, once no pending
frame references it (R4).

Fences
------
Fd fences (``sync_file``, ``eventfd``) are waited on the host by the daemon
before a frame reaches the lane (R2), as are a dma-buf's implicit fences when
no fence was given (R8, through :meth:`LaneImport.implicit_fence_fds`).
``Lane.check_fence(kind, field)`` refuses the kinds a lane cannot wait on
(the CPU lane: ``cuda_ipc_event``/``hip_ipc_event``, ``Unsupported``); the kinds
it accepts arrive in :class:`LaneFrame` (``ref_gpu_fence``/``dist_gpu_fence``)
for the lane to wait on its library stream.

Sessions and frames
-------------------
``await Lane.open_session(spec, sink) -> LaneSession`` (trio thread; may refuse
with a ``LaneError``, or raise ``PlanError``/``ValueError`` for a plan
the lane cannot run at this size).  It is awaited so that slow preparation --
the GPU lane compiles a feature's kernels at their first use on a device --
runs off the trio thread; once started it returns a session or raises even
when its caller is cancelled (the caller then drops the session as any
other).  Then, per frame, in index order:

``LaneSession.submit(frame) -> ReleaseEvent``
    Hands over one frame whose acquire fences have signalled.  It must not
    block: a lane queues the frame for its device worker, and is free to
    batch many frames -- of one session or several -- into one launch.  It
    returns the frame's release event (one event covers both roles), which
    the daemon puts into the pending-release table at once.  The event need
    not be recorded yet: a batched lane records it when it enqueues the last
    reader of the frame (the copy/conversion that brings the planes into the
    lane's own memory, or the last kernel that reads them in place), and the
    table does not even query it until then (R5).  Several frames may share
    one device event if the lane hands each a handle whose ``destroy()``
    releases its share.  Every event handed out must eventually be recorded
    and complete -- also for frames the lane drops after :meth:`abort`.

``FrameSink.frames_scored([(index, metrics), ...])`` / ``FrameSink.frame_failed(index, error)``
    How outcomes come back: final metrics (after temporal features and model
    prediction), or a ``LaneError`` naming the field (``LaneFailure``,
    ``LaneStopped`` ...); any number of frames per call, in any grouping,
    from the trio thread (a worker thread hops with
    ``TrioToken.run_sync_soon``).  Every submitted frame gets exactly one of
    the two, before :meth:`finish` returns.  The daemon orders outcomes per
    session itself; a lane may report frames of a batch in any order.

``await LaneSession.finish() -> LaneSummary``
    After the last submit: flush (a temporal feature's last frames are final
    only now), deliver the remaining outcomes through the sink, and return
    the pooled summary.

``LaneSession.abort()``
    The client went away: drop queued frames without reading them (completing
    their release events all the same), free per-session state.  Sink calls
    after ``abort`` are ignored.

Release events (:class:`vmafxd.core.release.ReleaseEvent`): ``recorded``,
``query()``, ``destroy()``, ``signals_completion``; a lane whose events can
announce completion (a host flag, a ``cuLaunchHostFunc`` callback) calls
``services.wake_reaper()`` -- thread-safe -- when one completes; otherwise the
reaper polls pending events every couple of milliseconds.

Host copies: :attr:`Lane.host_copies` counts reads for which the lane moved
imported bytes through host memory that a zero-copy path would not (``status``
reports it; R13 wants it 0 for zero-copy imports).

The worker shape
----------------
:class:`DeviceWorker` is one thread that owns a device's context and stream
(or, on the CPU lane, one share of the cores): jobs run in the order posted,
and the worker takes *every* job queued when it wakes (:meth:`run_batch`), so
a GPU worker can launch them together.  :meth:`serve` runs the thread from a
trio task, so the thread belongs to the lane's nursery like any task.
"""

from __future__ import annotations

import abc
import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import trio

from vmafx.transport import OwnedFd

from ..core.layout import BufferLayout, Geometry
from ..core.release import ReleaseEvent
from ..core import working_set
from ..core.scoring import ScoringPlan
from .errors import LaneError, Unsupported

__all__ = [
    "Lane", "LaneImport", "LaneSession", "LaneFrame", "LaneSummary", "LaneServices", "SessionSpec",
    "FrameSink", "GpuFence", "DeviceWorker", "Job", "serve_workers", "WorkerLaneSession", "finite_pooled",
]

log = logging.getLogger("vmafxd.lanes")


@dataclass(frozen=True)
class LaneServices:
    """What the daemon offers every lane."""

    #: thread-safe: tells the reaper that a release event completed
    wake_reaper: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class SessionSpec:
    plan: ScoringPlan
    geometry: Geometry
    #: the device the client asked for (None: the lane chooses)
    device: int | None = None
    name: str | None = None


class GpuFence(Protocol):
    """A GPU interprocess event to wait on (the protocol's ``cuda_ipc_event``/``hip_ipc_event`` fence)."""

    kind: str
    handle: bytes | None


@dataclass
class LaneFrame:
    """One frame handed to a lane: its index and its two imports."""

    index: int
    ref: "LaneImport"
    dist: "LaneImport"
    #: a GPU interprocess event to wait on the library stream (GPU lanes only)
    ref_gpu_fence: GpuFence | None = None
    dist_gpu_fence: GpuFence | None = None


@dataclass
class LaneSummary:
    #: {metric: {min, max, mean, harmonic_mean}}
    pooled: dict[str, dict[str, float]] = field(default_factory=dict)
    #: whole-run metrics (apsnr ...)
    aggregate: dict[str, float] = field(default_factory=dict)


class FrameSink(Protocol):
    """Where a lane reports outcomes (trio thread only)."""

    def frames_scored(self, items: Sequence[tuple[int, Mapping[str, float]]]) -> None: ...

    def frame_failed(self, index: int, error: LaneError) -> None: ...


class LaneImport(abc.ABC):
    """A buffer's memory as a lane reads it (a host mapping, a device pointer)."""

    #: False when reading it moves bytes through the host that zero-copy would not
    zero_copy: bool = True

    def implicit_fence_fds(self) -> Sequence[int]:
        """dma-buf fds whose implicit write fences gate a fence-less frame (R8); none for memfds."""
        return ()

    @abc.abstractmethod
    def close(self) -> None:
        """Free the import (idempotent).  Called by the reaper only, in a worker thread (R4)."""


class LaneSession(abc.ABC):
    #: the device (index) the session runs on
    device: int | None = None

    #: ``submit_many(frames) -> [ReleaseEvent, ...]``: several frames handed over in one go (one
    #: job for the group: the daemon hands over every frame a wake-up of the session's task found
    #: ready), one event per frame in the same order.  All or none: when it raises, no frame was
    #: taken.  None (a lane without it): the daemon submits the frames one by one.
    submit_many: Callable[[Sequence[LaneFrame]], list[ReleaseEvent]] | None = None

    @abc.abstractmethod
    def submit(self, frame: LaneFrame) -> ReleaseEvent: ...

    @abc.abstractmethod
    async def finish(self) -> LaneSummary: ...

    @abc.abstractmethod
    def abort(self) -> None: ...


class WorkerLaneSession(LaneSession):
    """A session whose work runs on one :class:`DeviceWorker` (the CPU and GPU lanes').

    The trio-thread half is the same for every such lane: ``finish`` posts the
    lane's finish job and waits for its summary, ``abort`` posts its abort job
    once, and outcomes hop back to the trio thread (:meth:`_hop`) and reach
    the sink unless the session was aborted.  Subclasses provide ``submit``,
    :meth:`_finish_job` and :meth:`_abort_job`.
    """

    def __init__(self, worker: "DeviceWorker", sink: FrameSink, token: trio.lowlevel.TrioToken):
        self.worker = worker
        self.device = worker.index
        self.sink = sink
        self._token = token
        # Read by the worker (a plain bool is enough under the GIL): frames of an
        # aborted session are dropped unread.
        self._aborted = False
        self._done = False
        self._worker_released = False

    @abc.abstractmethod
    def _finish_job(self, deliver: Callable[[LaneSummary], None]) -> "Job": ...

    @abc.abstractmethod
    def _abort_job(self) -> "Job": ...

    async def finish(self) -> LaneSummary:
        self._done = True
        result: list[LaneSummary] = []
        finished = trio.Event()

        def deliver(summary: LaneSummary) -> None:
            result.append(summary)
            finished.set()

        self.worker.post(self._finish_job(deliver))
        await finished.wait()
        self._release_worker()
        return result[0]

    def abort(self) -> None:
        if not self._aborted:
            self._aborted = True
            self._done = True
            self._release_worker()
            self.worker.post(self._abort_job())

    def _release_worker(self) -> None:
        if not self._worker_released:
            self._worker_released = True
            self.worker.sessions -= 1

    def _report_final(self, finals: Sequence[tuple[int, Mapping[str, float]]], indices: dict[int, int]) -> None:
        """Worker thread: hand frames the scorer made final to the sink, by the producer's index.

        A scorer numbers frames densely; ``indices`` maps its numbers to the
        producer's indices, and loses each entry as its frame is reported (a
        number it no longer holds was already failed).
        """
        items = []
        for seq, metrics in finals:
            index = indices.pop(seq, None)
            if index is not None:
                items.append((index, metrics))
        if items:
            self._hops().call_joined(self._deliver_scored, items)

    def _deliver_scored(self, items) -> None:
        if not self._aborted and items:
            self.sink.frames_scored(items)

    def _deliver_failed(self, index: int, error: LaneError) -> None:
        if not self._aborted:
            self.sink.frame_failed(index, error)

    def _hop(self, fn, *args) -> None:
        """Run ``fn(*args)`` in the trio thread (from a worker thread), after the calls hopped before
        it (the worker's :class:`TrioHops`: one wake-up of the trio thread for the calls of a pass)."""
        self._hops().call(fn, args)

    def _hops(self) -> "TrioHops":
        """The worker's queue of hops to this session's trio run (made at the first)."""
        hops = getattr(self.worker, "hops", None)
        if hops is None or hops.token is not self._token:
            hops = self.worker.hops = TrioHops(self._token)
        return hops


class TrioHops:
    """Calls a worker thread hands to the trio thread, run there in the order they were made.

    The first call of a run schedules one ``run_sync_soon`` that runs every call queued by the time
    it runs; later calls join it.  So the completions of one worker pass (a scored batch's results,
    the next batch's, a failure) cost the trio thread one wake-up and the worker one write to its
    wake-up socket, where a ``run_sync_soon`` per call cost one each.  A call is never run before
    one made earlier; it may run earlier than a ``run_sync_soon`` made elsewhere in between (a
    reaper's wake-up), which orders nothing the calls do.  Once the trio run has finished, calls are
    dropped, as ``run_sync_soon`` refuses them.
    """

    __slots__ = ("token", "_calls", "_lock", "_scheduled")

    def __init__(self, token: trio.lowlevel.TrioToken):
        self.token = token
        self._calls: list[tuple[Callable[..., Any], tuple]] = []
        self._lock = threading.Lock()
        self._scheduled = False

    def call(self, fn: Callable[..., Any], args: tuple) -> None:
        with self._lock:
            self._calls.append((fn, args))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.token.run_sync_soon(self._run)
        except trio.RunFinishedError:
            with self._lock:
                self._calls.clear()
                self._scheduled = False

    def call_joined(self, fn: Callable[[list], Any], items: list) -> None:
        """``call(fn, (items,))``, joined to the last call queued when that one is ``fn``'s too (a
        session's results of the batches of one pass: one call with the lists end to end, in order,
        where nothing was queued between them).  ``items`` becomes the queue's: not used after."""
        with self._lock:
            if self._calls:
                last_fn, last_args = self._calls[-1]
                if last_fn == fn:  # a bound method: the same function of the same session
                    last_args[0].extend(items)
                    return
        self.call(fn, (items,))

    def _run(self) -> None:
        """(trio thread) Every call queued so far, in order."""
        with self._lock:
            calls, self._calls = self._calls, []
            self._scheduled = False
        for fn, args in calls:
            fn(*args)


def finite_pooled(pooled: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float | None]]:
    """Pooled metrics with non-finite values as None (the wire's nil, libvmaf's null)."""
    import math

    return {name: {k: (v if math.isfinite(v) else None) for k, v in stats.items()} for name, stats in pooled.items()}


class Lane(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """``{"lane": name, "devices": [{"device": i, "name": ...}, ...]}``"""

    @property
    def host_copies(self) -> int:
        return 0

    def features(self) -> list[str]:
        """Names of the features this lane can score."""
        return []

    def scoring_bytes(self, plan: ScoringPlan, geometry: Geometry) -> int:
        """What one frame costs in the lane's memory while it is scored: its pictures and the
        plan's working set (the estimate lives in one place, :mod:`vmafxd.core.working_set`).
        A geometry whose one frame cannot fit the budgets is refused when the session opens."""
        return working_set.frame_bytes(plan, geometry)

    def frame_bytes(self, plan: ScoringPlan, geometry: Geometry) -> int:
        """What one frame in flight holds, counted against the byte budgets at each submit; on a
        lane that scores frame by frame in host memory, the same as :meth:`scoring_bytes`."""
        return self.scoring_bytes(plan, geometry)

    def memory_budget(self) -> int | None:
        """Bytes of the lane's own memory that frames in flight may use, or None when the lane
        scores in host memory (the daemon's configured byte budgets are the bound then)."""
        return None

    def device_memory(self) -> list[dict[str, int]] | None:
        """The device memory in use now, per device (``status``: a soak compares it before and
        after churn), or None when the lane has no device memory of its own."""
        return None

    @abc.abstractmethod
    def import_buffer(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> LaneImport: ...

    def check_fence(self, kind: str, field: str) -> None:
        """Refuse fence kinds this lane cannot wait on (fd fences are the daemon's, R2)."""
        if kind not in ("sync_file", "eventfd"):
            raise Unsupported(field, f"the {self.name} lane cannot wait on a {kind} fence")

    @abc.abstractmethod
    async def open_session(self, spec: SessionSpec, sink: FrameSink) -> LaneSession: ...

    @abc.abstractmethod
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None: ...


class Job(abc.ABC):
    """A unit of work for a :class:`DeviceWorker`."""

    @abc.abstractmethod
    def run(self) -> None:
        """Do it (worker thread)."""

    def drop(self) -> None:
        """The worker stopped before running it: complete what must complete (release events)."""


_STOP = object()


class _Wake(Job):
    """A wake-up with nothing to run: the worker's :meth:`DeviceWorker.poll` does the work."""

    def run(self) -> None:
        pass


_WAKE = _Wake()


class DeviceWorker:
    """One thread that runs jobs in the order they were posted."""

    def __init__(self, index: int, name: str):
        self.index = index
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = threading.Event()
        #: sessions assigned to this worker (trio thread bookkeeping)
        self.sessions = 0
        #: the calls its sessions hop to the trio thread (WorkerLaneSession._hop; made at the first)
        self.hops: TrioHops | None = None

    def post(self, job: Job) -> None:
        """Thread-safe; jobs posted after :meth:`stop` are dropped."""
        self._queue.put(job)

    def post_many(self, jobs: list[Job]) -> None:
        """:meth:`post` for each of ``jobs``, in order, as one queue item: one wake-up of the
        worker for a group of frames (each put may hand the GIL to the waiting worker)."""
        if jobs:
            self._queue.put(jobs)

    def stop(self) -> None:
        self._stopping.set()
        self._queue.put(_STOP)

    def wake(self) -> None:
        """Thread-safe: wake the worker for a :meth:`poll` (work in flight completed), with no job."""
        self._queue.put(_WAKE)

    # -- thread side ----------------------------------------------------------

    def setup(self) -> None:
        """Per-thread initialisation (a GPU worker makes its context current here)."""

    def teardown(self) -> None:
        """Per-thread cleanup."""

    def run_batch(self, jobs: list[Job]) -> None:
        """Run every job taken in one wake-up.  A GPU worker batches them into launches."""
        for job in jobs:
            if self._stopping.is_set():
                job.drop()
                continue
            try:
                job.run()
            except Exception:
                log.exception("%s: a job failed", self.name)

    def poll_timeout(self) -> float | None:
        """How long to wait for a job before waking anyway (None: block until a job or a
        :meth:`wake` arrives)."""
        return None

    def poll(self, block: bool = False) -> None:
        """Called after every wake-up: complete work in flight (``block``: wait for some)."""

    def busy(self) -> bool:
        """Work in flight that must complete before the thread may stop."""
        return False

    @staticmethod
    def _take(item: Any, jobs: list) -> None:
        """A queue item into ``jobs``: a job, or a group of them (:meth:`post_many`)."""
        if type(item) is list:
            jobs.extend(item)
        else:
            jobs.append(item)

    def run_forever(self) -> None:
        self.setup()
        try:
            while True:
                jobs = []
                try:
                    self._take(self._queue.get(timeout=self.poll_timeout()), jobs)
                except queue.Empty:
                    pass
                while True:
                    try:
                        self._take(self._queue.get_nowait(), jobs)
                    except queue.Empty:
                        break
                stop = any(j is _STOP for j in jobs)
                jobs = [j for j in jobs if j is not _STOP and j is not _WAKE]
                if stop:
                    for job in jobs:
                        job.drop()
                elif jobs:  # (none: a wake-up or a timeout, for poll alone)
                    self.run_batch(jobs)
                self.poll()
                if stop:
                    while self.busy():
                        self.poll(block=True)
                    break
            # Whatever was posted after the stop still gets its drop().
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                for job in item if type(item) is list else (item,):
                    if job is not _STOP:
                        job.drop()
        finally:
            self.teardown()

    async def serve(self, limiter: trio.CapacityLimiter) -> None:
        """Run the thread as a trio task (so it belongs to the lane's nursery).

        ``to_thread.run_sync`` does not abandon the thread when cancelled, so
        the owner must call :meth:`stop` when it is cancelled (see
        :func:`serve_workers`); the task then returns once the thread has
        finished its current job and dropped the rest -- shutdown is bounded
        by one job.
        """
        await trio.to_thread.run_sync(self.run_forever, limiter=limiter, thread_name=self.name)


async def serve_workers(workers: Sequence[DeviceWorker], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Run ``workers`` until cancelled, then stop them (bounded by one job each)."""
    limiter = trio.CapacityLimiter(max(1, len(workers)))
    async with trio.open_nursery() as nursery:
        for w in workers:
            nursery.start_soon(w.serve, limiter)
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            for w in workers:
                w.stop()
