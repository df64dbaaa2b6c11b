"""The GPU lane (CUDA and HIP, and the CPU emulator of both): the daemon's side of the engine.

One code path over :mod:`vmafxd.lanes.runtime`; only the runtime binding
and the import kinds differ between ``cuda``, ``hip`` and ``emu``.  This
module holds the lane (devices, imports, sessions' placement) and its
factories; the worker thread is :mod:`.worker`, a session's batches
:mod:`.lane_session`, the frames' release events :mod:`.release_events`.

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
import threading
from dataclasses import dataclass
from typing import Any, Mapping

import trio

from vmafx.formats import PixelFormat
from vmafx.transport import OwnedFd

from ...core import working_set
from ...core.batch_size import batch_for, check_batch_setting
from ...core.layout import BufferLayout
from ...core.scoring import PlanError
from ..device import FrameSink, Lane, LaneImport, LaneServices, SessionSpec, serve_workers
from ..runtime import RuntimeCallError, RuntimeUnavailable
from ..errors import InvalidInput, LaneError, LaneFailure, Unsupported
from .engine import FrameSource, twin_modules
from .lane_session import GpuLaneSession, OpenJob
from .worker import GpuWorker

__all__ = ["GpuLane", "GpuImport", "create_cuda_lane", "create_hip_lane", "create_emu_lane"]

log = logging.getLogger("vmafxd.lanes.gpu")


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
        #: ``gpu_batch``: a number of frames, or "auto" (vmafxd/core/batch_size.py, per session)
        self.batch_setting = check_batch_setting(getattr(config, "gpu_batch", "auto"))
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

    def batch_for(self, geometry) -> int:
        """The most frames a batch of a session of ``geometry`` holds (``gpu_batch``)."""
        return batch_for(self.batch_setting, geometry.width, geometry.height)

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
        job = OpenJob(session, trio.Event(), self._token)
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
