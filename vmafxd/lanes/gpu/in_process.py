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

import os
import queue
from collections import deque
from typing import Callable

import numpy as np

from vmafx.formats import storage_planes
from vmafx.io.input import unpack_planes
from vmafx.io.parallel_read import read_threads

from ..runtime import RuntimeUnavailable
from .batch_filler import BatchFiller, SlotPinner
from .device_start import RUNTIMES, SLOT_BYTES
from .engine import FrameSource, GpuFrame, GpuScorer
from .scoring_kit import SLOTS, ScoringKit

__all__ = ["RUNTIMES", "score_readers", "RuntimeUnavailable"]

#: at most this many frame pairs a batch (one upload, one launch sequence), as many as fit
#: SLOT_BYTES below that; SLOTS (scoring_kit.py) batches of host memory circulate.  128: at
#: 576x324 a running daemon's job of 6,000 frames took 0.30-0.39 s against 0.49-0.58 s with
#: 32 (the H200, docs/gpu-runs.md); from 1080p up SLOT_BYTES holds fewer pairs anyway
BATCH = 128
# SLOT_BYTES: page-locked bytes a slot aims at (device_start.py says why 64 MiB)


def batch_for(pair_bytes: int, most: int) -> int:
    """Frame pairs a batch: as many as fit SLOT_BYTES, at least one, at most ``most``."""
    return max(1, min(most, SLOT_BYTES // max(1, pair_bytes)))


def score_readers(lane: str, plan, reference, distorted, *, max_frames: int | None = None,
                  progress: Callable[[int], None] | None = None, batch: int | None = None,
                  threads: int | None = None, device: int = 0, kit: ScoringKit | None = None):
    """Score frame pairs from two readers (``.info``, ``read_frame_into`` or ``read_frame``)
    until either ends or ``max_frames``; returns (the finished :class:`GpuScorer`, frames scored).

    The kit's slots (page-locked batches) circulate: the reader thread fills one
    while others are uploaded and scored; a slot goes back to the reader after its
    batch's ``done`` event (its copy is on the same stream, so it has finished by then).
    A frame read past the other input's end goes back through ``pushback``.
    ``threads``: how many read the files (:func:`vmafx.io.parallel_read.read_threads`).
    ``kit``: a :class:`ScoringKit` to score with, left open (a daemon's, kept between jobs);
    without one, a kit of device ``device`` is made for this scoring and closed after it (its
    device from :func:`.device_start.start_device` when that was started).  Slots the kit has
    not pinned yet are: the first before the first frame, the others on a thread while the first
    batches are read and scored.
    Raises :class:`RuntimeUnavailable` when the lane's runtime or device is missing."""
    own = kit is None
    if own:
        kit = ScoringKit(lane, device, slots=SLOTS)
    try:
        return _score(kit, plan, reference, distorted, max_frames, progress, batch, threads)
    finally:
        if own:
            kit.close()


def _score(kit: ScoringKit, plan, reference, distorted, max_frames, progress, batch, threads):
    dev = kit.device
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
    slots = kit.slots
    devs = []
    filler = pinner = stream = scorer = None
    try:
        dtype = np.uint8 if bpc <= 8 else np.dtype("<u2")
        # a plan whose every feature reads luma alone (vmaf_v0.6.1's) leaves chroma unread in files
        # read by position: a third less to copy out of the page cache at 4:2:0 (the planes after
        # the first hold what the slot last held; no kernel reads them)
        luma = layout[1][0] if plan.luma_only and len(layout) > 1 and os.environ.get("VMAFX_READ_CHROMA") != "1" \
            else None
        filler = BatchFiller(reference, distorted, fs, batch, max_frames,
                              lambda buf: unpack_planes(bytes(buf), shapes, dtype), read_threads(threads), luma)
        filler.free.put((0, memoryview(kit.host(0, slot_bytes))))
        to_pin = []
        for k in range(1, slots):
            if kit.has_host(k, slot_bytes):
                filler.free.put((k, memoryview(kit.hosts[k])))
            else:
                to_pin.append(k)
        # the first batch is read, and the other slots pinned, while the kernels' modules load
        filler.start()
        if to_pin:
            pinner = SlotPinner(dev, to_pin, lambda k: kit.host(k, slot_bytes), filler.free)
        stream = kit.stream()
        # a slot is completed before the reader gets it back, so the scorer needs room for all of them
        scorer = GpuScorer(dev, kit.kernels, stream, plan, w, h, bpc, fmt.subsampling, max_batch=batch, slots=slots)
        devs = [kit.dev(k, slot_bytes) for k in range(slots)]
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
                dev.copy_htod_async(devs[k], kit.hosts[k], 2 * count * fs, stream)
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
        if scorer is not None:
            scorer.close()
