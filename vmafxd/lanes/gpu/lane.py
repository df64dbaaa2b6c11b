"""The GPU lane (CUDA and HIP, and the CPU emulator of both): the daemon's side of the engine.

One code path over :mod:`vmafxd.lanes.runtime`; only the runtime binding
and the import kinds differ between ``cuda``, ``hip`` and ``emu``.

Devices and workers (R1)
    One :class:`GpuWorker` thread per device owns the device's context and its
    single *library stream*; every kernel, copy and event record of the lane
    is enqueued on that stream by that thread.  Sessions are placed on a
    device when they open (the client's ``device``, else the least loaded).

Frames
    ``submit`` posts a frame to its device's worker and returns a
    :class:`BatchReleaseHandle` that is *not recorded yet* (R5).  The worker
    takes every frame queued when it wakes, groups them by session into
    batches, enqueues each batch on the library stream (waits on the frames'
    GPU acquire events, one gather/convert launch, the feature kernels, one
    copy of the statistics to pinned memory) and records the batch's
    ``copied`` event right after the gather: that is the last read of the
    producer's buffers, so the batch's handles become recorded there and the
    reaper releases the buffers once it completes — before the features have
    even run.  The worker never blocks on a single frame: it blocks on its job
    queue, and its completion watcher (:mod:`.completion`, a thread that waits
    on the stream's points in the driver, the GIL released) wakes the reaper
    when a batch's gather completes and the worker when a batch ends; the
    worker waits on a batch itself only when all its statistics slots are
    taken (the device is busy then anyway).

Imports (R3, R4, R13)
    ``cuda_vmm``/``hip_vmm``: the producer's allocation mapped read-only,
    zero-copy.  ``cuda_ipc``/``hip_ipc``: an IPC memory handle.  ``dmabuf``:
    the runtime's external-memory import where the driver has one (HIP);
    where it answers not-supported (CUDA on the H200) ``Unsupported`` naming the
    runtime and the field, or, with ``ALLOW_COPY``, a host mapping uploaded per
    frame.  ``memfd``: mapped, page-locked once at import where the driver
    lets it (then each frame's upload is an asynchronous DMA the worker does not
    wait for), and uploaded per frame (a host copy, counted).
    Imports are closed by the reaper only, behind the release events of every
    frame that read them (R4).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import trio

from vmafx.formats import PixelFormat
from vmafx.transport import OwnedFd

from ...core import working_set
from ...core.layout import BufferLayout
from ...core.scoring import PlanError
from ..device import (
    DeviceWorker, FrameSink, Job, Lane, LaneFrame, LaneImport, LaneServices, LaneSummary, SessionSpec,
    WorkerLaneSession, finite_pooled, serve_workers,
)
from ..runtime import RuntimeCallError, RuntimeUnavailable
from ..errors import InvalidInput, LaneError, LaneFailure, LaneStopped, Unsupported
from .completion import CompletionWatcher
from .engine import FrameSource, GpuFrame, GpuScorer, KernelSet, twin_modules

__all__ = ["GpuLane", "create_cuda_lane", "create_hip_lane", "create_emu_lane", "BatchReleaseHandle"]

log = logging.getLogger("vmafxd.lanes.gpu")


def _skip_gpu_waits() -> bool:
    """A test plant: ``VMAFXD_TEST_SKIP_GPU_WAIT=1`` drops the wait on producers' GPU acquire
    events, so a test can show that without it a producer still writing is read too early."""
    return os.environ.get("VMAFXD_TEST_SKIP_GPU_WAIT") == "1"


# --------------------------------------------------------------------------- release events


class _SharedEvent:
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
        self._shared: _SharedEvent | None = None
        self._host_done = False
        #: a plain attribute, not a property: the reaper reads it for every pending frame on every pass
        self.recorded = False
        self._destroyed = False

    def bind(self, shared: _SharedEvent) -> None:
        BatchReleaseHandle.bind_all((self,), shared)

    @staticmethod
    def bind_all(handles: Sequence["BatchReleaseHandle"], shared: _SharedEvent) -> None:
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
        if self._host_done:
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


# --------------------------------------------------------------------------- imports


@dataclass(eq=False)
class GpuImport(LaneImport):
    """A buffer's memory on a device: a device pointer (zero-copy) or a host mapping to upload."""

    lane: "GpuLane"
    layout: BufferLayout
    device: int
    memory: Any = None  # runtime ImportedMemory (zero-copy)
    host: Any = None  # vmafxd.lanes.cpu_import.CpuImport (uploaded per frame)
    #: the host mapping page-locked (runtime HostRegistration): uploads are asynchronous DMA
    pinned: Any = None
    closed: bool = False

    def __post_init__(self):
        self.zero_copy = self.memory is not None
        #: what every frame's FrameSource takes from the layout (made once: it is per frame otherwise)
        self._format: PixelFormat = self.layout.geometry.pixel_format
        self._planes = tuple((p.offset, p.pitch) for p in self.layout.planes)
        #: a zero-copy import's frames all read the same memory: its one FrameSource (read, never
        #: changed, by the batches that take it)
        self.device_source: FrameSource | None = (
            FrameSource(self.memory.ptr, self._format, self._planes) if self.memory is not None else None)

    def implicit_fence_fds(self):
        return self.host.implicit_fence_fds() if self.host is not None else ()

    def source(self, ptr: int) -> FrameSource:
        return FrameSource(ptr, self._format, self._planes)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.memory is not None:
            self.memory.close()
        pinned, self.pinned = self.pinned, None
        try:
            if pinned is not None:
                self.lane.unpinned(pinned.size)
                pinned.close()  # unregistered before the mapping goes: never pinned and unmapped
        finally:
            if self.host is not None:
                self.host.close()


class _MappedMemory:
    """The emulator's import of a host mapping: its address is the "device pointer"."""

    def __init__(self, host, device: int):
        self.host = host
        self.ptr = int(host.bytes_view().ctypes.data)
        self.size = host.bytes_view().nbytes
        self.device = device

    def close(self) -> None:
        self.host.close()


# --------------------------------------------------------------------------- the lane


class GpuLane(Lane):
    def __init__(self, runtime, config: Any, services: LaneServices, name: str):
        self.name = name
        self.runtime = runtime
        self.services = services
        self.batch = int(getattr(config, "gpu_batch", 32))
        ordinals = getattr(config, "gpu_devices", None) or range(runtime.device_count())
        self.devices = [runtime.device(i) for i in ordinals]
        if not self.devices:
            raise RuntimeUnavailable(name, "no device")
        self.options = tuple(runtime.compile_options)
        self.workers = [GpuWorker(self, dev) for dev in self.devices]
        self._copies = 0
        self._copies_lock = threading.Lock()
        #: the driver refused to page-lock a host mapping (said once, see _pin)
        self._pin_refused = False
        #: bytes of host mappings page-locked now (bounded by PIN_BUDGET)
        self._pinned_bytes = 0
        self._token: trio.lowlevel.TrioToken | None = None
        # what the runtime can do, from its capabilities (never from its name)
        self.device_kinds: tuple[str, ...] = tuple(runtime.device_import_kinds)
        self.event_kind: str | None = runtime.ipc_event_kind

    # -- description -----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "lane": self.name,
            "runtime": self.runtime.name,
            "devices": [
                {"device": w.index, "name": d.info.name, "pci": d.info.pci_bus_id, "arch": d.info.arch,
                 "sessions": w.sessions}
                for w, d in zip(self.workers, self.devices)
            ],
        }

    def features(self) -> list[str]:
        return sorted(twin_modules())

    #: the share of a device's free memory that frames in flight may take; the rest stays for
    #: modules, stream-ordered pools, the driver and other processes' growth
    DEVICE_BUDGET_FRACTION = 0.8

    def frame_bytes(self, plan, geometry) -> int:
        """A queued frame holds its staged pictures; the working set is per batch
        (:func:`vmafxd.core.working_set.batched_frame_bytes`)."""
        return working_set.batched_frame_bytes(geometry)

    def memory_budget(self) -> int | None:
        """Device memory frames in flight may use: a share of the least free memory among the
        lane's devices (sessions may go to any of them); total memory when the runtime cannot say."""
        free = []
        for dev in self.devices:
            query = getattr(dev, "free_memory", None)
            try:
                free.append(int(query()) if query is not None else int(dev.info.total_memory))
            except Exception as e:  # a driver that cannot answer: the total, and say so
                log.warning("%s: cannot query free device memory (%s); budgeting from the total", self.name, e)
                free.append(int(dev.info.total_memory))
        return int(min(free) * self.DEVICE_BUDGET_FRACTION)

    def device_memory(self) -> list[dict[str, int]]:
        """Per device: bytes in use (total less free: the driver's figure, as nvidia-smi's, every
        process's; the emulator's own allocations) and, where the runtime counts them, its live
        allocations (the emulator: device, pool and pinned host blocks)."""
        rows = []
        for w, dev in zip(self.workers, self.devices):
            row = {"device": w.index}
            try:
                row["used_bytes"] = int(dev.info.total_memory) - int(dev.free_memory())
            except Exception:  # a runtime that cannot say: the row has no figure
                pass
            count = getattr(dev, "live_allocations", None)
            if count is not None:
                row["allocations"] = int(count())
            rows.append(row)
        return rows

    #: host memory the lane page-locks at most; buffers beyond it upload from pageable memory.
    #: 8 GiB holds vmafxctl's 32 pairs of 8K 4:2:0 10-bit frames (6.4 GB); locking much more
    #: starves the host's page cache.
    PIN_BUDGET = 8 << 30

    @property
    def host_copies(self) -> int:
        return self._copies

    def count_copies(self, n: int) -> None:
        with self._copies_lock:
            self._copies += n

    # -- imports ---------------------------------------------------------------------
    def _worker(self, ordinal: int, error: type[LaneError] = InvalidInput) -> "GpuWorker":
        """The worker of that device ordinal, as describe() numbers them (``gpu_devices`` may
        list a subset: ordinals are not positions); ``error`` on the field ``device`` if none."""
        for w in self.workers:
            if w.index == ordinal:
                return w
        raise error("device", f"the {self.name} lane has devices "
                              f"{', '.join(str(w.index) for w in self.workers)}, not {ordinal}")

    def _device_for(self, layout: BufferLayout) -> int:
        """The device ordinal the layout names (None: the first)."""
        return self._worker(self.workers[0].index if layout.device is None else layout.device).index

    def _device(self, ordinal: int):
        """The device of that ordinal."""
        return self._worker(ordinal).device

    def import_buffer(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> GpuImport:
        kind = layout.kind
        if kind in ("memfd", "dmabuf") or (self.runtime.device_reads_host and kind not in self.device_kinds):
            return self._import_host_or_dmabuf(layout, fds)
        if kind not in self.device_kinds:
            raise Unsupported("kind",
                              f"the {self.name} lane cannot import {kind} buffers "
                              f"(it imports {', '.join(self.device_kinds + ('dmabuf', 'memfd'))})")
        d = self._device_for(layout)
        dev = self._device(d)
        dev.make_current()
        try:
            if kind.endswith("_ipc"):
                mem = dev.import_ipc_memory(layout.handle, layout.size)
            else:
                idx = layout.fd_indices()
                if len(idx) != 1:
                    raise Unsupported("planes[1].fd", "a VMM buffer's planes must all live in its one fd")
                mem = dev.import_vmm_fd(fds[idx[0]].fileno(), layout.size)
        except RuntimeCallError as e:
            refusal = Unsupported if e.not_supported else InvalidInput
            raise refusal("handle" if kind.endswith("_ipc") else "planes[0].fd", str(e)) from None
        return GpuImport(self, layout, d, memory=mem)

    def _import_host_or_dmabuf(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> GpuImport:
        from ..cpu_import import import_host_buffer

        d = self._device_for(layout)
        if layout.kind == "dmabuf" and len(layout.fd_indices()) == 1:
            dev = self._device(d)
            fd = fds[layout.fd_indices()[0]].fileno()
            try:
                dev.make_current()
                return GpuImport(self, layout, d, memory=dev.import_dmabuf(fd, layout.size))
            except RuntimeCallError as e:
                if not e.not_supported:
                    raise InvalidInput("planes[0].fd", str(e)) from None
                if not layout.allow_copy:
                    raise Unsupported(
                        "planes[0].fd",
                        f"{e}: this {self.runtime.name} driver cannot import a dma-buf; register it with "
                        "flags ALLOW_COPY to let the daemon read it through a host mapping") from None
        host = import_host_buffer(layout, fds)  # memfd; or a dma-buf with ALLOW_COPY (mmap may still refuse)
        if self.runtime.device_reads_host and len(layout.fd_indices()) == 1:
            # The emulator's device memory *is* host memory: the checked mapping is
            # read in place, zero-copy, exactly as a GPU reads an imported buffer.
            return GpuImport(self, layout, d, memory=_MappedMemory(host, d))
        if len(layout.fd_indices()) != 1:
            host.close()
            raise Unsupported("planes[1].fd",
                              f"the {self.name} lane uploads host buffers whose planes share one fd")
        return GpuImport(self, layout, d, host=host, pinned=self._pin(layout, host, d))

    def _pin(self, layout: BufferLayout, host, d: int):
        """Page-lock a memfd's mapping once, at import, so each frame's upload is an
        asynchronous DMA (no staging copy, no wait on the host); None where it cannot be.

        Only memfds: a dma-buf read through the host must stay inside its
        ``DMA_BUF_IOCTL_SYNC`` bracket, which an upload finishing later would leave.  A
        driver that refuses (some mappings cannot be pinned) leaves today's path: a pageable
        upload the worker waits for.  Said once per lane, not per buffer."""
        if layout.kind != "memfd":
            return None
        view = host.bytes_view()
        with self._copies_lock:  # (the lane's one small lock: copies and pinned bytes)
            if self._pinned_bytes + view.nbytes > self.PIN_BUDGET:
                return None
            self._pinned_bytes += view.nbytes
        dev = self._device(d)
        try:
            dev.make_current()
            return dev.host_register(view)
        except Exception as e:  # any refusal (or a binding without it) leaves the proven path
            self.unpinned(view.nbytes)
            if not self._pin_refused:
                self._pin_refused = True
                log.warning("%s: cannot page-lock a memfd's mapping (%s); such host buffers are uploaded "
                            "from pageable memory, one frame at a time (said once)", self.name, e)
            return None

    def unpinned(self, nbytes: int) -> None:
        with self._copies_lock:
            self._pinned_bytes -= nbytes

    def check_fence(self, kind: str, field: str) -> None:
        if kind in ("sync_file", "eventfd"):
            return
        if kind != self.event_kind:
            raise Unsupported(field, f"the {self.name} lane cannot wait on a {kind} fence")

    # -- sessions ----------------------------------------------------------------------
    async def open_session(self, spec: SessionSpec, sink: FrameSink) -> "GpuLaneSession":
        if self._token is None:
            raise RuntimeError(f"the {self.name} lane is not running")
        if spec.device is not None:
            worker = self._worker(spec.device, Unsupported)
        else:
            worker = min(self.workers, key=lambda w: w.sessions)
        for inst in spec.plan.instances:
            if inst.decl.gpu is None:
                raise PlanError(f"feature.{inst.decl.name}", f"has no kernel on the {self.name} lane")
        session = GpuLaneSession(self, worker, spec, sink, self._token)
        job = _OpenJob(session, trio.Event(), self._token)
        worker.post(job)
        # The worker builds the scorer, compiling the plan's kernels at their first use on
        # the device (NVRTC takes seconds); the trio thread serves everyone else meanwhile.
        # Shielded: the opener gets the session or the error even when cancelled, so no
        # opened session is left without an owner (a cancelled caller drops it as any other).
        with trio.CancelScope(shield=True):
            await job.opened.wait()
        if job.errors:
            e = job.errors[0]
            if isinstance(e, ValueError):  # a PlanError (GpuUnsupported), or a size a feature cannot score
                raise e
            raise LaneFailure("session", f"{type(e).__name__}: {e}")
        worker.sessions += 1
        return session

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        await serve_workers(self.workers, task_status=task_status)


# --------------------------------------------------------------------------- the worker


class GpuWorker(DeviceWorker):
    """The thread that owns one device's context and library stream (R1)."""

    def __init__(self, lane: GpuLane, device):
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
        self._waiting: dict["GpuLaneSession", list["_FrameJob"]] = {}
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

    def watch_copied(self, shared: _SharedEvent) -> None:
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
    # Batching: a session's frames are launched at once while fewer than
    # AHEAD of its batches are in flight (an idle device starts at once);
    # otherwise they wait, and are launched together as soon as one of its
    # batches completes or a full batch has gathered.  Launching a batch costs
    # the same host time whatever it holds, so a busy device gets fewer,
    # fuller batches, and a frame waits at most about one batch's run.
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
            if isinstance(job, _FrameJob):
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
                full = sess.lane.batch
                while frames and (everything or len(frames) >= full
                                  or sum(1 for s, _ in self.inflight if s is sess) < self.AHEAD):
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


# --------------------------------------------------------------------------- sessions


class GpuLaneSession(WorkerLaneSession):
    def __init__(self, lane: GpuLane, worker: GpuWorker, spec: SessionSpec, sink: FrameSink, token):
        super().__init__(worker, sink, token)
        self.lane = lane
        self.spec = spec
        self.scorer: GpuScorer | None = None
        self._seq_to_index: dict[int, int] = {}
        self._finishing = None  # deliver callback once in-flight batches complete

    # -- trio thread --------------------------------------------------------------------
    def submit(self, frame: LaneFrame) -> BatchReleaseHandle:
        if self._done:
            raise RuntimeError("submit after finish or abort")
        handle = BatchReleaseHandle()
        self.worker.post(_FrameJob(self, frame, handle))
        return handle

    def submit_many(self, frames) -> list[BatchReleaseHandle]:
        """Frames handed over as one job group (LaneSession.submit_many: all or none)."""
        if self._done:
            raise RuntimeError("submit after finish or abort")
        jobs = [_FrameJob(self, frame, BatchReleaseHandle()) for frame in frames]
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
                                geo.bitdepth, geo.pixel_format.subsampling, max_batch=self.lane.batch)
        w.scorer_opened()

    def _fail_frames(self, jobs, error: LaneError) -> None:
        for job in jobs:
            job.handle.complete_on_host()
            self._hop(self._deliver_failed, job.frame.index, error)

    def _enqueue(self, jobs: list["_FrameJob"]) -> None:
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

    def _enqueued(self, chunk: list["_FrameJob"], batch) -> None:
        """A batch is enqueued: its frames' release handles bound to its ``copied`` event, their
        indices kept by the scorer's numbers, the batch in flight."""
        shared = _SharedEvent(self.worker.device, batch.copied)
        # The worker's own share, held until it has seen the gather complete: the reaper may
        # release (and destroy) the first handles before the last ones are bound.
        shared.add_shares()
        BatchReleaseHandle.bind_all([j.handle for j in chunk], shared)
        self.worker.watch_copied(shared)
        first = batch.first_seq
        self._seq_to_index.update(zip(range(first, first + len(chunk)), [j.frame.index for j in chunk]))
        self.worker.inflight.append((self, batch))
        self.worker.batch_enqueued(batch)

    def _enqueue_plain(self, chunk: list["_FrameJob"]) -> bool:
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

    def _enqueue_failed(self, chunk: list["_FrameJob"], e: Exception, uploads=(), transient=()) -> None:
        """Enqueueing ``chunk`` raised ``e``: once the stream has passed what was enqueued, the
        batch's uploads and wait events go, and its frames fail."""
        log.exception("%s: enqueueing a batch failed", self.worker.name)
        self.worker.stream.synchronize()
        for p in uploads:
            self.worker.device.free(p)
        for ev in transient:
            ev.close()
        self._fail_frames(chunk, LaneFailure("", f"{type(e).__name__}: {e}"))

    def _open_waits(self, job: "_FrameJob") -> list | None:
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

    def _source(self, imp: GpuImport, uploads: list[int]) -> FrameSource:
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
class _FrameJob(Job):
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
class _OpenJob(Job):
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


# --------------------------------------------------------------------------- factories


def _make(binding_module: str, name: str, config: Any, services: LaneServices) -> GpuLane:
    import importlib

    binding = importlib.import_module(f"vmafxd.lanes.{binding_module}")
    runtime = binding.load()
    if runtime.device_count() < 1:
        raise RuntimeUnavailable(name, "no device")
    return GpuLane(runtime, config, services, name)


def create_cuda_lane(config: Any, services: LaneServices) -> GpuLane:
    return _make("cuda", "cuda", config, services)


def create_hip_lane(config: Any, services: LaneServices) -> GpuLane:
    return _make("hip", "hip", config, services)


def create_emu_lane(config: Any, services: LaneServices) -> GpuLane:
    """The GPU lane over the CPU emulator (tests and CI; slow)."""
    return _make("emulated", "emu", config, services)
