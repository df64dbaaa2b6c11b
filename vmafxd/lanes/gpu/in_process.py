"""Two readers' frames scored on a GPU of this process, without a daemon.

What ``vmafxctl score --in-process --lane cuda`` runs: no socket, no second
process, no copy through a shared buffer.  Frames are read straight into
page-locked host memory (a reader's ``read_frame_into``), a whole batch of
reference and distorted frames goes up in one asynchronous copy, and the
engine scores it while the next batch is read.  ``slots`` batches are in
flight at most; a slot's host memory is refilled only after its batch's
``done`` event (the copy is on the same stream, so it has finished by then).
The scores are the engine's, so the daemon's and the CPU lane's, bit for bit.
"""

from __future__ import annotations

import importlib
from collections import deque
from typing import Callable

import numpy as np

from vmafx.formats import storage_planes
from vmafx.io.input import pack_planes

from ..runtime import RuntimeUnavailable
from .engine import FrameSource, GpuFrame, GpuScorer, KernelSet

__all__ = ["RUNTIMES", "score_readers", "RuntimeUnavailable"]

#: the GPU runtimes this can score on ("emu": the CPU emulator of the kernels, for tests)
RUNTIMES = {"cuda": "vmafxd.lanes.cuda", "hip": "vmafxd.lanes.hip", "emu": "vmafxd.lanes.emulated"}


def _read_into(reader, dst: memoryview) -> bool:
    """The reader's next frame, packed plane after plane, into ``dst``; False at its end."""
    into = getattr(reader, "read_frame_into", None)
    if into is not None:
        return into(dst)
    planes = reader.read_frame()  # a reader of planes only (the --scale path)
    if planes is None:
        return False
    pack_planes(planes, dst)
    return True


def _unpack(buf: memoryview, shapes, dtype) -> list[np.ndarray]:
    planes, off = [], 0
    for s in shapes:
        n = s.width * s.components * s.height
        planes.append(np.frombuffer(bytes(buf[off:off + s.size]), dtype, n).reshape(s.height, s.width * s.components))
        off += s.size
    return planes


def score_readers(lane: str, plan, reference, distorted, *, max_frames: int | None = None,
                  progress: Callable[[int], None] | None = None, batch: int = 32, slots: int = 3):
    """Score frame pairs from two readers (``.info``, ``read_frame_into`` or ``read_frame``)
    until either ends or ``max_frames``; returns (the finished :class:`GpuScorer`, frames scored).

    A reference frame read past the distorted's end goes back through ``pushback``.
    Raises :class:`RuntimeUnavailable` when the lane's runtime or device is missing."""
    try:
        binding = importlib.import_module(RUNTIMES[lane])
    except ImportError as e:
        raise RuntimeUnavailable(lane, f"its binding cannot be imported ({e})") from None
    rt = binding.load()
    if rt.device_count() < 1:
        raise RuntimeUnavailable(lane, "no device")
    info = reference.info
    w, h, bpc, fmt = info.width, info.height, info.bitdepth, info.pixel_format
    shapes = storage_planes(fmt, w, h, bpc)
    layout, fs = [], 0
    for s in shapes:
        layout.append((fs, s.row_bytes))
        fs += s.size
    layout = tuple(layout)
    dev = rt.device(0)
    dev.make_current()
    kernels = KernelSet(rt, dev)
    stream = dev.create_stream()
    scorer = GpuScorer(dev, kernels, stream, plan, w, h, bpc, fmt.subsampling, max_batch=batch, slots=slots)
    hosts, devs = [], []
    try:
        for _ in range(slots):
            hosts.append(dev.alloc_host(2 * batch * fs))
            devs.append(dev.alloc(2 * batch * fs))
        free, pending = list(range(slots)), deque()

        def complete_oldest() -> None:
            done, slot = pending.popleft()
            done.done.synchronize()
            scorer.complete(done)
            free.append(slot)

        n, more = 0, True
        while more:
            if not free:
                complete_oldest()
            slot = free.pop()
            host = memoryview(hosts[slot])
            count = 0
            while count < batch:
                if max_frames is not None and n >= max_frames:
                    more = False
                    break
                ref = host[2 * count * fs:(2 * count + 1) * fs]
                if not _read_into(reference, ref):
                    more = False
                    break
                if not _read_into(distorted, host[(2 * count + 1) * fs:(2 * count + 2) * fs]):
                    pushback = getattr(reference, "pushback", None)
                    if pushback is not None:
                        pushback(_unpack(ref, shapes, np.uint8 if bpc <= 8 else np.dtype("<u2")))
                    more = False
                    break
                count += 1
                n += 1
                if progress:
                    progress(n)
            if not count:
                free.append(slot)
                break
            dev.copy_htod_async(devs[slot], hosts[slot], 2 * count * fs, stream)
            frames = [GpuFrame(FrameSource(devs[slot] + 2 * i * fs, fmt, layout),
                               FrameSource(devs[slot] + (2 * i + 1) * fs, fmt, layout)) for i in range(count)]
            pending.append((scorer.enqueue(frames), slot))
        while pending:
            complete_oldest()
        scorer.finish()
        return scorer, n
    finally:
        stream.synchronize()
        for p in devs:
            dev.free(p)
        for p in hosts:
            dev.free_host(p)
        scorer.close()
        kernels.close()
