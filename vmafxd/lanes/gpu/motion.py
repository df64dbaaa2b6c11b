"""Integer motion on the GPU: the SAD kernel; the temporal rules are the CPU twin's.

Statistics per frame: one int64 SAD (exact).  The host turns it into the
per-frame score with ``motion.metrics_from_stats`` and runs the same
``MotionTimeline`` the CPU twin runs, so motion2/motion3 and the first/last
frame rules cannot drift between lanes.  The reference luma of the last one
or two frames of each batch is kept on the device for the next batch.
"""

from __future__ import annotations

import numpy as np

from ...features import motion as cpu
from .engine import GpuFeature, rows_of
from .launch import I32, I64, U64, PreparedBatches, Relative

__all__ = ["make"]

#: the SAD kernel's output tile (MT_W x MT_H in motion.cu)
_TILE_W, _TILE_H = 64, 64
#: batches of this many frames and more go through the temporal rule as columns
#: (MotionTimeline.push_batch: the same values), smaller ones frame by frame, whichever is
#: cheaper (scripts/bench_engine_host.py --plans motion: 1.5 µs a frame less at 32 frames,
#: 20 µs a batch more at one)
_COLUMNS_FROM = 12


class GpuMotion(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        self.force_zero = bool(self.values["motion_force_zero"])
        self.fps_weight = float(self.values["motion_fps_weight"])
        self.max_val = float(self.values["motion_max_val"])
        self.timeline = cpu.MotionTimeline(self.values, debug=bool(self.values["debug"]))
        self.temporal(self.timeline.push, self.timeline.flush)
        self.gap = self.timeline.min_idx
        w, h = stg.shapes[0]
        if w < 3 or h < 3:
            raise ValueError(f"motion needs a luma plane of at least 3x3, got {w}x{h}")
        self.stats_bytes = 8
        self.stats_offset = 0
        self._plane_bytes = stg.pitches[0] * stg.elem * h
        # history of the last two reference lumas: [seq - 1, seq - 2]
        self._history = [self.own(scorer.device.alloc(self._plane_bytes)) for _ in range(2)]
        kernel = "vx_motion_sad_u8" if stg.elem == 1 else "vx_motion_sad_u16"
        self._launch = scorer.kernels.launcher(
            "motion.cu", kernel, [U64, U64, U64, I32, I32, I32, I64, I64, I32, I32, U64, I32, I32])
        self._batches = PreparedBatches(self._launches)

    def graph_key(self, n: int, first_seq: int) -> tuple:
        # enqueue: the SAD launch (from the first frame with a score: first) and the copies
        return (min(n, max(0, self.gap - first_seq)),)

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        if self.force_zero:
            return
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        first = max(0, self.gap - first_seq)  # frames before the first real score
        if first < n:
            self._batches.run(st, staging, n, first, stats, record_bytes)
        # keep the last two reference lumas for the next batch
        if n >= 2:
            dev.copy_dtod_async(self._history[1], stg.plane_ptr(staging, n - 2, 0, 0), self._plane_bytes, st)
        else:
            dev.copy_dtod_async(self._history[1], self._history[0], self._plane_bytes, st)
        dev.copy_dtod_async(self._history[0], stg.plane_ptr(staging, n - 1, 0, 0), self._plane_bytes, st)

    def _launches(self, n: int, first: int, stats: int, record_bytes: int):
        """The SAD launch of a batch (:class:`PreparedBatches`), staging at ``Relative(0)``."""
        stg = self.scorer.staging
        w, h = stg.shapes[0]
        yield self._launch, ((w + _TILE_W - 1) // _TILE_W, (h + _TILE_H - 1) // _TILE_H, n - first), (256,), (
            stg.plane_ptr(Relative(0), 0, 0, 0), self._history[0], self._history[1], self.gap, w, h,
            stg.pitches[0], stg.frame_stride_elems, stg.bitdepth, first, stats + self.stats_offset,
            record_bytes // 8, 0)

    def _scores(self, stats: np.ndarray, first_seq: int, count: int) -> list[float]:
        """Each frame's score (``motion.columns_from_stats`` of its SAD); 0 before the first real one."""
        if self.force_zero:
            return [0.0] * count
        sad = stats[:count, self.stats_offset:self.stats_offset + 8].view(np.int64)[:, 0]
        w, h = self.scorer.staging.shapes[0]
        x = cpu.columns_from_stats(sad, w, h, fps_weight=self.fps_weight, max_val=self.max_val)
        x[:max(0, self.gap - first_seq)] = 0.0
        return x.tolist()

    def columns(self, stats: np.ndarray, first_seq: int, count: int):
        if count < _COLUMNS_FROM:
            return None  # a few frames: metrics(), frame by frame, costs less than the arrays
        return self.timeline.push_batch(first_seq, self._scores(stats, first_seq, count))

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        if count >= _COLUMNS_FROM:
            return rows_of(self.columns(stats, first_seq, count))
        sad = stats[:count, self.stats_offset:self.stats_offset + 8].view(np.int64)[:, 0]
        w, h = self.scorer.staging.shapes[0]
        return self.push_scores(first_seq, (
            0.0 if self.force_zero or seq < self.gap
            else cpu.metrics_from_stats(int(s), w, h, fps_weight=self.fps_weight, max_val=self.max_val)
            for seq, s in enumerate(sad, first_seq)))


def make(instance, scorer) -> GpuMotion:
    return GpuMotion(instance, scorer)
