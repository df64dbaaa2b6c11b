"""Two readers' frames scored on a GPU of this process, without a daemon.

What ``vmafxctl score --in-process --lane cuda`` runs: no socket, no second
process, no copy through a shared buffer.  Frames are read straight into
page-locked host memory on reader threads (vmafxd/lanes/gpu/batch_filler.py: regular
files by position on several threads, others with a reader's ``read_frame_into``),
a whole batch of reference and distorted frames goes up in one asynchronous
copy, and the engine scores it while the readers fill the next slots.
The scores are the engine's, so the daemon's and the CPU lane's, bit for bit.
"""

from __future__ import annotations

import atexit
import importlib
import queue
import threading
from collections import deque
from typing import Callable

import numpy as np

from vmafx.formats import storage_planes
from vmafx.io.input import unpack_planes
from vmafx.io.parallel_read import read_threads

from ..runtime import RuntimeUnavailable
from .batch_filler import BatchFiller, SlotPinner
from .engine import FrameSource, GpuFrame, GpuScorer, KernelSet

__all__ = ["RUNTIMES", "score_readers", "start_device", "RuntimeUnavailable"]

#: the GPU runtimes this can score on ("emu": the CPU emulator of the kernels, for tests)
RUNTIMES = {"cuda": "vmafxd.lanes.cuda", "hip": "vmafxd.lanes.hip", "emu": "vmafxd.lanes.emulated"}


#: at most this many frame pairs a batch (one upload, one launch sequence), and batches of
#: host memory circulating
BATCH, SLOTS = 32, 4
#: page-locked bytes a slot aims at.  Pinning costs (cuMemHostAlloc: about 0.4 ms a MiB
#: on the H200; the first slot before the first frame, the others while scoring), so 32
#: pairs of 4K frames (800 MB a slot) cost more to pin than to score; measured there (docs/gpu-runs.md), 800 1080p frames: batches of 32
#: 776 frames/s, 16 966, 8 1,068, 4 1,002; 200 4K frames: 32 69, 8 186, 4 242.
SLOT_BYTES = 64 << 20


class _DeviceStart:
    """A lane's runtime, device 0 and one page-locked slot, made on a thread of their own.

    Before the first frame the command pays for the driver (about 0.37 s of CUDA context on
    the H200) and for pinning (about 0.4 ms a MiB); neither holds the GIL, so both run here
    while the main thread loads the models, opens the files and builds the plan
    (:func:`start_device`, called as soon as the command knows it scores in this process).
    The slot is ``SLOT_BYTES`` whatever the geometry: a batch is sized to fit it."""

    def __init__(self, lane: str):
        self.lane = lane
        self.runtime = self.device = self.host = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"vmafx-start-{lane}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            try:
                binding = importlib.import_module(RUNTIMES[self.lane])
            except ImportError as e:
                raise RuntimeUnavailable(self.lane, f"its binding cannot be imported ({e})") from None
            rt = binding.load()
            if rt.device_count() < 1:
                raise RuntimeUnavailable(self.lane, "no device")
            dev = rt.device(0)
            dev.make_current()  # (the context is current per thread: the scoring thread makes it so again)
            self.runtime, self.device = rt, dev
            self.host = dev.alloc_host(SLOT_BYTES)
        except BaseException as e:  # raised where the device is taken
            self.error = e

    def take(self):
        """(runtime, device, the pinned slot or None); the start's error raised here."""
        self._thread.join()
        if self.error is not None and self.device is None:
            raise self.error
        return self.runtime, self.device, self.host


#: devices being started for the scoring to come, by lane
_starting: dict[str, _DeviceStart] = {}
_starting_lock = threading.Lock()


def start_device(lane: str) -> None:
    """Start ``lane``'s runtime and device 0 (and pin a first slot) on a thread now; the next
    :func:`score_readers` on that lane takes them.  Errors wait for it (a lane that cannot run
    fails there, as it would have)."""
    with _starting_lock:
        if not _starting:
            atexit.register(_wait_for_starts)
        if lane not in _starting:
            _starting[lane] = _DeviceStart(lane)


def _wait_for_starts() -> None:
    """At exit, a start never taken (the command failed first) finishes before the interpreter
    does: a thread still inside the driver's initialisation while the process tears the driver
    down could crash the exit."""
    with _starting_lock:
        starts = list(_starting.values())
    for start in starts:
        start._thread.join(timeout=30)


def _take_device(lane: str):
    with _starting_lock:
        start = _starting.pop(lane, None)
    return (start or _DeviceStart(lane)).take()


def batch_for(pair_bytes: int, most: int) -> int:
    """Frame pairs a batch: as many as fit SLOT_BYTES, at least one, at most ``most``."""
    return max(1, min(most, SLOT_BYTES // max(1, pair_bytes)))


def score_readers(lane: str, plan, reference, distorted, *, max_frames: int | None = None,
                  progress: Callable[[int], None] | None = None, batch: int | None = None,
                  slots: int | None = None, threads: int | None = None):
    """Score frame pairs from two readers (``.info``, ``read_frame_into`` or ``read_frame``)
    until either ends or ``max_frames``; returns (the finished :class:`GpuScorer`, frames scored).

    ``slots`` batches of page-locked memory circulate: the reader thread fills one
    while others are uploaded and scored; a slot goes back to the reader after its
    batch's ``done`` event (its copy is on the same stream, so it has finished by then).
    A frame read past the other input's end goes back through ``pushback``.
    ``threads``: how many read the files (:func:`vmafx.io.parallel_read.read_threads`).
    The device comes from :func:`start_device` when it was started, else is started now.
    One slot is pinned before the first frame, the others on a thread while the first batches
    are read and scored.
    Raises :class:`RuntimeUnavailable` when the lane's runtime or device is missing."""
    slots = slots or SLOTS
    rt, dev, first_host = _take_device(lane)
    info = reference.info
    w, h, bpc, fmt = info.width, info.height, info.bitdepth, info.pixel_format
    shapes = storage_planes(fmt, w, h, bpc)
    layout, fs = [], 0
    for s in shapes:
        layout.append((fs, s.row_bytes))
        fs += s.size
    layout = tuple(layout)
    batch = batch or batch_for(2 * fs, BATCH)
    dev.make_current()
    slot_bytes = 2 * batch * fs
    hosts: list = [None] * slots
    devs: list = []
    filler = pinner = kernels = stream = scorer = None
    try:
        if first_host is not None and first_host.nbytes >= slot_bytes:
            hosts[0], first_host = first_host, None
        else:
            hosts[0] = dev.alloc_host(slot_bytes)
        dtype = np.uint8 if bpc <= 8 else np.dtype("<u2")
        filler = BatchFiller(reference, distorted, fs, batch, max_frames,
                              lambda buf: unpack_planes(bytes(buf), shapes, dtype), read_threads(threads))
        filler.free.put((0, memoryview(hosts[0])))
        # the first batch is read, and the other slots pinned, while the kernels' modules load
        filler.start()
        pinner = SlotPinner(dev, hosts, slot_bytes, filler.free)
        kernels = KernelSet(rt, dev)
        stream = dev.create_stream()
        # a slot is completed before the reader gets it back, so the scorer needs room for all of them
        scorer = GpuScorer(dev, kernels, stream, plan, w, h, bpc, fmt.subsampling, max_batch=batch, slots=slots)
        for _ in range(slots):
            devs.append(dev.alloc(slot_bytes))
        pending: deque = deque()

        def complete_oldest() -> None:
            done, slot = pending.popleft()
            done.done.synchronize()
            scorer.complete(done)
            filler.free.put(slot)

        n = 0
        while True:
            try:
                item = filler.ready.get_nowait()
            except queue.Empty:
                if pending:  # the reader is the limit: hand it a slot back meanwhile
                    complete_oldest()
                    continue
                item = filler.ready.get()
            if isinstance(item, BaseException):
                raise item
            slot, count, last = item
            if count:
                k = slot[0]
                dev.copy_htod_async(devs[k], hosts[k], 2 * count * fs, stream)
                frames = [GpuFrame(FrameSource(devs[k] + 2 * i * fs, fmt, layout),
                                   FrameSource(devs[k] + (2 * i + 1) * fs, fmt, layout)) for i in range(count)]
                pending.append((scorer.enqueue(frames), slot))
                n += count
                if progress:
                    progress(n)
            if last:
                break
        while pending:
            complete_oldest()
        scorer.finish()
        return scorer, n
    finally:
        if pinner is not None:
            pinner.stop()
        if filler is not None:
            filler.stop()
        if stream is not None:
            stream.synchronize()
        for p in devs:
            dev.free(p)
        for p in hosts:
            if p is not None:
                dev.free_host(p)
        if first_host is not None:  # a slot too small for this geometry's batch
            dev.free_host(first_host)
        if scorer is not None:
            scorer.close()
        if kernels is not None:
            kernels.close()
