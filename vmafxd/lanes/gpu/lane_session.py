"""A session on the GPU lane: its frames enqueued as batches on its device's worker.

The trio thread's side (``submit``, ``submit_many``, finish and abort) posts jobs; the
worker thread's side builds the session's scorer, turns a run of frames into batches
(zero-copy imports at once; uploads, producers' acquire events and per-frame refusals
otherwise), binds each batch's release handles (:mod:`.release_events`), and reports the
results as the batches complete.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import trio

from ..device import FrameSink, Job, LaneFrame, LaneSummary, SessionSpec, WorkerLaneSession, finite_pooled
from ..errors import InvalidInput, LaneError, LaneFailure, LaneStopped, Unsupported
from ..runtime import RuntimeCallError
from .engine import FrameSource, GpuFrame, GpuScorer
from .release_events import BatchReleaseHandle, SharedEvent

__all__ = ["GpuLaneSession", "FrameJob", "OpenJob"]

log = logging.getLogger("vmafxd.lanes.gpu")


def _skip_gpu_waits() -> bool:
    """A test plant: ``VMAFXD_TEST_SKIP_GPU_WAIT=1`` drops the wait on producers' GPU acquire
    events, so a test can show that without it a producer still writing is read too early."""
    return os.environ.get("VMAFXD_TEST_SKIP_GPU_WAIT") == "1"


class GpuLaneSession(WorkerLaneSession):
    def __init__(self, lane: "GpuLane", worker: "GpuWorker", spec: SessionSpec, sink: FrameSink, token):
        super().__init__(worker, sink, token)
        self.lane = lane
        self.spec = spec
        self.scorer: GpuScorer | None = None
        self._seq_to_index: dict[int, int] = {}
        self._finishing = None  # deliver callback once in-flight batches complete
        #: the most frames a batch of this session holds (``gpu_batch``, by picture size when "auto")
        self.batch = lane.batch_for(spec.geometry)

    # -- trio thread --------------------------------------------------------------------
    def submit(self, frame: LaneFrame) -> BatchReleaseHandle:
        if self._done:
            raise RuntimeError("submit after finish or abort")
        handle = BatchReleaseHandle()
        self.worker.post(FrameJob(self, frame, handle))
        return handle

    def submit_many(self, frames) -> list[BatchReleaseHandle]:
        """Frames handed over as one job group (LaneSession.submit_many: all or none)."""
        if self._done:
            raise RuntimeError("submit after finish or abort")
        jobs = [FrameJob(self, frame, BatchReleaseHandle()) for frame in frames]
        self.worker.post_many(jobs)
        return [job.handle for job in jobs]

    def _finish_job(self, deliver) -> Job:
        return _FinishJob(self, deliver)

    def _abort_job(self) -> Job:
        return _AbortJob(self)

    # -- worker thread --------------------------------------------------------------------
    def _open(self) -> None:
        geo = self.spec.geometry
        w = self.worker
        self.scorer = GpuScorer(w.device, w.kernels, w.stream, self.spec.plan, geo.width, geo.height,
                                geo.bitdepth, geo.pixel_format.subsampling, max_batch=self.batch, keep_frames=False)
        w.scorer_opened()

    def _fail_frames(self, jobs, error: LaneError) -> None:
        for job in jobs:
            job.handle.complete_on_host()
            self._hop(self._deliver_failed, job.frame.index, error)

    def _enqueue(self, jobs: list["FrameJob"]) -> None:
        if self._aborted or self.scorer is None:
            for job in jobs:
                job.handle.complete_on_host()
            return
        dev, stream = self.worker.device, self.worker.stream
        max_batch = self.scorer.max_batch
        for start in range(0, len(jobs), max_batch):
            chunk = jobs[start:start + max_batch]
            if self._enqueue_plain(chunk):
                continue
            bad = [j for j in chunk if j.frame.ref.device != self.device or j.frame.dist.device != self.device]
            for j in bad:
                other = j.frame.ref.device if j.frame.ref.device != self.device else j.frame.dist.device
                role = "ref" if j.frame.ref.device != self.device else "dist"
                self._fail_frames([j], InvalidInput(
                    role, f"the buffer lives on device {other}; this session runs on device {self.device}"))
            chunk = [j for j in chunk if j not in bad]
            # Each frame's acquire events are opened on their own, before the batch: a
            # handle the driver refuses fails that frame alone (E_INVAL naming the field),
            # never the frames batched with it.
            waits_of: dict[int, list] = {}
            for j in chunk:
                waits = self._open_waits(j)
                if waits is not None:
                    waits_of[id(j)] = waits
            chunk = [j for j in chunk if id(j) in waits_of]
            if not chunk:
                continue
            self.worker.wait_slot(self)
            uploads: list[int] = []
            transient = [ev for waits in waits_of.values() for ev in waits]
            try:
                frames = []
                for j in chunk:
                    srcs = []
                    for imp in (j.frame.ref, j.frame.dist):
                        srcs.append(self._source(imp, uploads))
                    frames.append(GpuFrame(srcs[0], srcs[1], waits_of[id(j)]))
                batch = self.scorer.enqueue(frames)
            except Exception as e:
                self._enqueue_failed(chunk, e, uploads, transient)
                continue
            # R6: events used only for a stream wait may be destroyed once the wait is enqueued
            for ev in transient:
                ev.close()
            for p in uploads:
                dev.free_async(p, stream)
            self._enqueued(chunk, batch)

    def _enqueued(self, chunk: list["FrameJob"], batch) -> None:
        """A batch is enqueued: its frames' release handles bound to its ``copied`` event, their
        indices kept by the scorer's numbers, the batch in flight."""
        shared = SharedEvent(self.worker.device, batch.copied)
        # The worker's own share, held until it has seen the gather complete: the reaper may
        # release (and destroy) the first handles before the last ones are bound.
        shared.add_shares()
        BatchReleaseHandle.bind_all([j.handle for j in chunk], shared)
        self.worker.watch_copied(shared)
        first = batch.first_seq
        self._seq_to_index.update(zip(range(first, first + len(chunk)), [j.frame.index for j in chunk]))
        self.worker.inflight.append((self, batch))
        self.worker.batch_enqueued(batch)

    def _enqueue_plain(self, chunk: list["FrameJob"]) -> bool:
        """The usual batch, enqueued at once: every frame's buffers zero-copy on this session's
        device and no producer fence.  False (nothing done) for any other: :meth:`_enqueue`'s
        frame-by-frame checks, uploads and fence waits take it, as they would each frame.

        The batch is what :meth:`_enqueue` makes of such a chunk: the same frames in the same
        order, each reading its imports' memory with nothing to wait for."""
        device = self.device
        frames = []
        for j in chunk:
            f = j.frame
            ref, dist = f.ref, f.dist
            rs, ds = ref.device_source, dist.device_source
            if (rs is None or ds is None or ref.device != device or dist.device != device
                    or f.ref_gpu_fence is not None or f.dist_gpu_fence is not None or ref.closed or dist.closed):
                return False
            frames.append(GpuFrame(rs, ds, []))
        self.worker.wait_slot(self)
        try:
            batch = self.scorer.enqueue(frames)
        except Exception as e:
            self._enqueue_failed(chunk, e)
            return True
        self._enqueued(chunk, batch)
        return True

    def _enqueue_failed(self, chunk: list["FrameJob"], e: Exception, uploads=(), transient=()) -> None:
        """Enqueueing ``chunk`` raised ``e``: once the stream has passed what was enqueued, the
        batch's uploads and wait events go, and its frames fail."""
        log.exception("%s: enqueueing a batch failed", self.worker.name)
        self.worker.stream.synchronize()
        for p in uploads:
            self.worker.device.free(p)
        for ev in transient:
            ev.close()
        self._fail_frames(chunk, LaneFailure("", f"{type(e).__name__}: {e}"))

    def _open_waits(self, job: "FrameJob") -> list | None:
        """The frame's producer IPC events, opened; None when the driver refused one (the frame failed)."""
        opened: list = []
        for role, fence in (("ref_fence", job.frame.ref_gpu_fence), ("dist_fence", job.frame.dist_gpu_fence)):
            if fence is None or _skip_gpu_waits():
                continue
            try:
                opened.append(self.worker.device.open_ipc_event(fence.handle))
            except (RuntimeCallError, ValueError, TypeError) as e:
                for ev in opened:
                    ev.close()
                field = f"{role}.handle"
                refusal = Unsupported if getattr(e, "not_supported", False) else InvalidInput
                self._handle_refused(field, e)
                job.handle.complete_on_host()  # never read: released at once
                self._hop(self._deliver_failed, job.frame.index,
                          refusal(field, f"the driver refused the IPC event handle: {e}"))
                return None
        return opened

    def _handle_refused(self, field: str, e: Exception) -> None:
        """A client's bad handle is its error, not ours: one warning per client, no traceback.

        The client is the session's sink's label (vmafxd/session.py ``client_name``:
        name#id (pid)); the lane counts refusals per client and logs the first.
        """
        client = getattr(self.sink, "client_name", None) or f"session {self.spec.name or '?'}"
        counts = self.lane.__dict__.setdefault("handles_refused", {})
        if client not in counts and len(counts) >= 4096:
            counts.clear()  # bounded: a churn of clients must not grow it (a repeat warns again, once)
        counts[client] = counts.get(client, 0) + 1
        if counts[client] == 1:
            log.warning("%s: client %s: the driver refused its %s (%s); the frame fails with E_INVAL; "
                        "further refusals of this client are counted, not logged",
                        self.worker.name, client, field, e)

    def _source(self, imp: "GpuImport", uploads: list[int]) -> FrameSource:
        if imp.device_source is not None:  # zero-copy: the import's one FrameSource
            return imp.device_source
        # Host path: upload the mapped buffer (a host copy, counted: R13 wants 0 for zero-copy)
        dev, stream = self.worker.device, self.worker.stream
        host = imp.host
        size = imp.layout.size
        ptr = dev.alloc_async(size, stream)
        uploads.append(ptr)
        if imp.pinned is not None:
            # Page-locked: the copy is a DMA the stream runs later, and nothing here waits for
            # it.  The producer may rewrite the buffer only once the frame is released, and the
            # frame's release event is its batch's ``copied`` event, recorded on this stream
            # after the gather that reads this upload: it cannot complete before the copy has.
            view = host.bytes_view()
            dev.copy_htod_async(ptr, view, min(size, view.nbytes), stream)
        else:
            with host.reading():
                view = host.bytes_view()
                dev.copy_htod_async(ptr, view, min(size, view.nbytes), stream)
                stream.synchronize()  # pageable source: the copy must finish while the mapping is synced
        self.lane.count_copies(1)
        return imp.source(ptr)

    def _complete(self, batch) -> None:
        finals = self.scorer.complete(batch)
        self._report_final(finals, self._seq_to_index)
        if self._finishing is not None and not any(s is self for s, _ in self.worker.inflight):
            self._do_finish()

    def _finish(self, deliver) -> None:
        self._finishing = deliver
        if not any(s is self for s, _ in self.worker.inflight):
            self._do_finish()

    def _do_finish(self) -> None:
        deliver, self._finishing = self._finishing, None
        summary = LaneSummary()
        if self.scorer is not None and not self._aborted:
            try:
                self._report_final(self.scorer.finish(), self._seq_to_index)
                summary = LaneSummary(finite_pooled(self.scorer.assembler.pooled()), dict(self.scorer.aggregate))
            except Exception as e:
                log.exception("finishing a session failed")
                for seq, index in sorted(self._seq_to_index.items()):
                    self._hop(self._deliver_failed, index, LaneFailure("", f"finish: {e}"))
                self._seq_to_index.clear()
        self._close_scorer()
        self._hop(deliver, summary)

    def _close_scorer(self) -> None:
        if self.scorer is not None:
            try:
                self.worker.stream.synchronize()
                self.scorer.close()
            finally:
                self.scorer = None
                self.worker.scorer_closed()


@dataclass(eq=False)
class FrameJob(Job):
    session: GpuLaneSession
    frame: LaneFrame
    handle: BatchReleaseHandle

    def run(self) -> None:  # frames go through GpuWorker.run_batch; a lone one runs as a batch of one
        self.session._enqueue([self])

    def drop(self) -> None:
        self.handle.complete_on_host()
        self.session._hop(self.session._deliver_failed, self.frame.index,
                          LaneStopped("", "the daemon stopped before the frame was read"))


@dataclass(eq=False)
class OpenJob(Job):
    """Builds a session's scorer on its device's worker; the opener awaits ``opened``."""

    session: GpuLaneSession
    opened: trio.Event
    token: Any
    errors: list = field(default_factory=list)

    def run(self) -> None:
        try:
            self.session._open()
        except BaseException as e:  # reported to the opener
            self.errors.append(e)
        finally:
            self._signal()

    def drop(self) -> None:
        self.errors.append(RuntimeError("the lane is stopping"))
        self._signal()

    def _signal(self) -> None:
        try:
            self.token.run_sync_soon(self.opened.set)
        except trio.RunFinishedError:
            pass


@dataclass(eq=False)
class _FinishJob(Job):
    session: GpuLaneSession
    deliver: Any

    def run(self) -> None:
        self.session._finish(self.deliver)

    def drop(self) -> None:
        self.session._hop(self.deliver, LaneSummary())


@dataclass(eq=False)
class _AbortJob(Job):
    session: GpuLaneSession

    def run(self) -> None:
        s = self.session
        # batches already enqueued complete on their own (their handles are bound);
        # the scorer is freed once the stream has passed them.
        for x, b in s.worker.inflight:
            if x is s:
                s.worker.batch_ended(b)
        s.worker.inflight[:] = [(x, b) for x, b in s.worker.inflight if x is not s]
        s._close_scorer()

