"""``score_files``: two files a client opened, read and scored by the daemon itself.

A client scoring files through the daemon otherwise reads every frame, copies it
into a shared buffer and submits it: at 1080p that path ran at 0.6x of reading the
files (docs/performance.md).  With ``score_files`` the client sends the two open
files' fds (SCM_RIGHTS: the daemon opens no client path, so it reads only what the
client could) and the daemon scores them the way ``vmafxctl score --in-process``
does -- on a GPU lane, regular files read by position on several threads straight
into page-locked memory and batches of pairs uploaded at once; on the CPU lane,
frame by frame -- with no process start, CUDA context or kernel load to pay.  A GPU's
kernels, stream and pinned slots (a :class:`~vmafxd.lanes.gpu.scoring_kit.ScoringKit`)
stay ready between jobs and are freed once unused for ``files_keep_s`` (vmafxd/config.py).

As many jobs run at once as the lane has devices (GPUs, or the CPU lane's workers):
a job keeps a device busy on its own; a job without a device asked for takes the GPU
with the fewest jobs, and the others wait their turn.  The job owns both fds from the moment the request is taken (the inputs
close them, on every path); the scoring runs on a worker thread, which stops at its
next batch when the client goes (its task is cancelled) and then closes everything
itself.  The frames' metrics go back in ``files_frames`` messages of at most about
half ``max_message_bytes`` each, in order, then ``files_scored`` answers.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import trio

from vmafx.field_error import FieldError
from vmafx.io.inputs import InputError, open_file_input
from vmafx.protocol.errors import ErrorCode, RemoteProtocolError
from vmafx.protocol.messages import FilesFrames, FilesScored, ScoreFiles

from . import offline
from .admission import MAX_FILE_JOBS, MAX_FILE_JOBS_PER_CLIENT
from .session import build_plan

__all__ = ["FileJobs"]

log = logging.getLogger("vmafxd.files")

#: GPU lanes that score files in the daemon's process (the in-process GPU path)
_GPU_LANES = ("cuda", "hip", "emu")


class _Stopped(Exception):
    """The client went: the job stops at its next batch."""


class FileJobs:
    """The daemon's ``score_files`` jobs: as many at once as the lane has devices."""

    def __init__(self, lane, cpu_engine: str = "auto", keep_s: float = 60.0):
        #: the daemon's lane: its name, and on a GPU lane the devices it may use (``gpu_devices``)
        self.lane = lane
        self.lane_name = lane.name
        self.cpu_engine = cpu_engine
        #: jobs at once: one a device of the lane (a GPU's or a CPU worker's), set at the first job
        self._limiter = trio.CapacityLimiter(1)
        self._ordinals: list[int] | None = None
        #: device ordinal -> the jobs on it now (a job without a device asked for takes the least busy)
        self._on_device: dict[int, int] = {}
        #: jobs taken and not answered yet (running or waiting for their turn)
        self.jobs = 0
        #: frame pairs the jobs have scored
        self.frames_scored = 0
        #: worker threads still scoring (an abandoned job's too, until it sees its stop)
        self._threads = 0
        self._threads_lock = threading.Lock()
        #: a GPU lane's kits kept between jobs, one a device (vmafxd/lanes/gpu/scoring_kit.py)
        self.kits = None
        if self.lane_name in _GPU_LANES:
            from .lanes.gpu.scoring_kit import KitPool

            self.kits = KitPool(self.lane_name, keep_s)

    def status(self) -> dict[str, int]:
        """For the daemon's status: file jobs running, waiting, and frame pairs scored."""
        running = self._limiter.borrowed_tokens
        return {"file_jobs_running": running, "file_jobs_waiting": max(0, self.jobs - running),
                "file_frames_scored": self.frames_scored,
                "file_kits_kept": self.kits.kept if self.kits else 0,
                "file_kits_made": self.kits.made if self.kits else 0}

    def admit(self, of_client: int) -> None:
        """A job is about to be taken for a client with ``of_client`` unanswered: refused past
        the limits (each job holds two fds: admission.py counts them), else counted (:meth:`run`
        gives it back)."""
        if of_client >= MAX_FILE_JOBS_PER_CLIENT:
            raise RemoteProtocolError(ErrorCode.E_NOMEM, "score_files", f"this client already has {of_client} "
                                      f"score_files unanswered (at most {MAX_FILE_JOBS_PER_CLIENT})")
        if self.jobs >= MAX_FILE_JOBS:
            raise RemoteProtocolError(ErrorCode.E_BUSY, "score_files", f"the daemon has {self.jobs} score_files "
                                      f"unanswered (at most {MAX_FILE_JOBS}); try again later")
        self.jobs += 1

    async def run(self, handler, msg: ScoreFiles, fds: tuple[int, int]) -> None:
        """Carry out ``msg`` (admitted) for ``handler``'s client; ``fds`` (reference, distorted)
        are this job's from here on.  Every outcome is a reply: ``files_scored`` or an error."""
        try:
            reply, frames = await self._score(handler, msg, fds)
        except RemoteProtocolError as e:
            handler.send_error(msg.seq, e)
            return
        except FieldError as e:  # a lane's or a pair's check, naming its field
            handler.send_error(msg.seq, RemoteProtocolError(ErrorCode.E_INVAL, e.field, e.reason))
            return
        except InputError as e:  # a file that goes bad while read ("distorted: frame 4 is truncated ...")
            role = str(e).split(":", 1)[0]
            handler.send_error(msg.seq, RemoteProtocolError(
                ErrorCode.E_INVAL, role if role in ("reference", "distorted") else "reference", str(e)))
            return
        except Exception as e:
            log.exception("client %s: score_files failed", handler.label)
            handler.send_error(msg.seq, RemoteProtocolError(
                ErrorCode.E_INTERNAL, "", f"the daemon failed scoring the files: {type(e).__name__}: {e}"))
            return
        finally:
            self.jobs -= 1
        self.frames_scored += reply.frames
        await self._send(handler, msg.seq, frames)
        handler.emit(reply)
        log.info("client %s: scored %d frame pairs of two files it sent (%s lane)", handler.label, reply.frames,
                 self.lane_name)

    async def _score(self, handler, msg: ScoreFiles, fds: tuple[int, int]):
        owned = list(fds)
        try:
            if msg.lane not in ("auto", self.lane_name):
                raise RemoteProtocolError(ErrorCode.E_NOTSUP, "lane", f"lane {msg.lane} is not available: this "
                                          f"daemon runs the {self.lane_name} lane")
            device = self._device(msg.device)
            plan = build_plan(msg.models, msg.features, handler.limits, handler.server.config.model_dirs,
                              msg.model_texts)
            geo = dict(width=msg.width, height=msg.height, pixel_format=msg.pixel_format, bitdepth=msg.bitdepth)
            inputs = []
            try:
                for role in ("reference", "distorted"):
                    fd = owned.pop(0)
                    try:
                        inputs.append(open_file_input(fd, role, **geo))
                    except InputError as e:
                        raise RemoteProtocolError(ErrorCode.E_INVAL, role, str(e)) from None
                ref, dist = inputs
                offline.check_pair(ref.info, dist.info)
                log.debug("client %s: score_files %dx%d on the %s lane", handler.label, ref.info.width,
                          ref.info.height, self.lane_name)
                stop = threading.Event()
                claim = threading.Lock()
                taken: list[bool] = []  # [True]: the thread has the inputs; [False]: it must not start

                def work():
                    with claim:
                        if taken:  # given up before it started: the task closed the inputs
                            return None
                        taken.append(True)
                    with self._threads_lock:
                        self._threads += 1
                    try:
                        return self._work(msg, device, plan, ref, dist, stop)
                    finally:
                        with self._threads_lock:
                            self._threads -= 1

                self._on_device[device] = self._on_device.get(device, 0) + 1
                try:
                    return await trio.to_thread.run_sync(work, limiter=self._limiter, abandon_on_cancel=True)
                except trio.Cancelled:
                    stop.set()  # a running thread ends at its next batch and closes the inputs itself
                    with claim:
                        if taken:
                            inputs = []
                        else:
                            taken.append(False)
                    raise
                finally:
                    self._on_device[device] -= 1
            finally:
                for inp in inputs:
                    inp.close()
        finally:
            for fd in owned:  # not yet given to an input
                os.close(fd)

    async def drain(self, timeout: float) -> None:
        """At shutdown, once the clients are gone: wait (at most ``timeout`` s) for the jobs'
        threads, told to stop when their clients' tasks were cancelled, to leave the device
        before the process exits."""
        with trio.move_on_after(timeout):
            while self._threads:
                await trio.sleep(0.01)
        if self._threads:
            log.warning("%d score_files thread(s) still running at exit", self._threads)
        if self.kits is not None:
            await trio.to_thread.run_sync(self.kits.close)

    async def free_unused(self) -> None:
        """The daemon's task: the kits kept between jobs freed once unused for ``keep_s``."""
        if self.kits is None or self.kits.keep_s <= 0:
            return
        every = min(10.0, self.kits.keep_s / 4)
        while True:
            await trio.sleep(every)
            if self.kits.kept:
                await trio.to_thread.run_sync(self.kits.expire)

    def _device(self, asked: int | None) -> int:
        """The device a job runs on: on a GPU lane the one asked for, which must be among the
        daemon's (E_INVAL naming ``device``, as open_session says it), else the one with the
        fewest jobs; the CPU lane's workers are not asked for (its jobs run on threads of their own)."""
        if self._ordinals is None:  # the lane's devices (or CPU workers), known once it runs
            self._ordinals = [d["device"] for d in self.lane.describe().get("devices", ())] or [0]
            self._limiter.total_tokens = len(self._ordinals)
        ordinals = self._ordinals
        if self.lane_name not in _GPU_LANES:
            return 0
        if asked is None:
            return min(ordinals, key=lambda o: self._on_device.get(o, 0))
        if asked not in ordinals:
            raise RemoteProtocolError(ErrorCode.E_INVAL, "device", f"the {self.lane_name} lane has devices "
                                      f"{', '.join(map(str, ordinals))}, not {asked}")
        return asked

    def _work(self, msg: ScoreFiles, device: int, plan, ref, dist, stop: threading.Event):
        """On a worker thread: score, then close both inputs (whoever waits for this or not)."""
        def progress(n: int) -> None:
            if stop.is_set():
                raise _Stopped()

        try:
            info = ref.info
            t0 = time.perf_counter()
            if self.kits is not None:
                scorer, n = self._on_gpu(msg, device, plan, ref, dist, progress)
            else:
                scorer = offline.cpu_scorer(plan, info, self.cpu_engine)
                n = offline.score_frames(scorer, ref, dist, max_frames=msg.max_frames, progress=progress)
            log.debug("score_files: %d frame pairs %dx%d in %.3f s", n, info.width, info.height,
                      time.perf_counter() - t0)
            frames = [metrics for _index, metrics in scorer.assembler.frames]
            reply = FilesScored(
                re=msg.seq, frames=n, lane=self.lane_name, width=info.width, height=info.height,
                models=tuple(ms.name for ms in plan.models), pooled=scorer.assembler.pooled(),
                aggregate=dict(scorer.aggregate),
                reference_ended=ref.total is None or ref.total <= n,
                distorted_ended=dist.total is None or dist.total <= n)
            return reply, frames
        finally:
            ref.close()
            dist.close()

    def _on_gpu(self, msg: ScoreFiles, device: int, plan, ref, dist, progress):
        """The job on the device's kit: kept for the next job unless the device failed it."""
        from .lanes.runtime import RuntimeUnavailable

        t0 = time.perf_counter()
        try:
            kit = self.kits.take(device)
        except RuntimeUnavailable as e:
            raise RemoteProtocolError(ErrorCode.E_NOTSUP, "lane", str(e)) from None
        log.debug("score_files: device %d ready in %.3f s (%d kits made)", device, time.perf_counter() - t0,
                  self.kits.made)
        keep = False
        try:
            result = offline.score_frames_on_gpu(self.lane_name, plan, ref, dist, max_frames=msg.max_frames,
                                                 progress=progress, kit=kit)
            keep = True
            return result
        except (_Stopped, InputError, FieldError):  # the client's or the files' end: the device is fine
            keep = True
            raise
        finally:
            self.kits.give(kit, keep)

    async def _send(self, handler, seq: int, frames: list[dict[str, Any]]) -> None:
        """The frames' metrics in ``files_frames`` of about half ``max_message_bytes`` at most."""
        per_frame = 16 + sum(len(k) + 12 for k in frames[0]) if frames else 1
        chunk = max(1, min(4096, (handler.limits.max_message_bytes // 2) // per_frame))
        for k, first in enumerate(range(0, len(frames), chunk)):
            handler.emit(FilesFrames(re=seq, first=first, frames=tuple(frames[first:first + chunk])))
            if k % 16 == 15:  # let the client read: the outgoing queue is bounded
                await handler.outgoing.flushed()
