"""Float motion on the GPU: one kernel blurs and differences the staged luma and sums each row,
one adds the rows (features/kernels/float_motion.cu).

Statistics per frame: one float, the SAD's float sum in libvmaf's order
(rows left to right, then rows top to bottom).  The host divides it by
``w * h`` (``float_motion.score_from_sum``) and feeds the CPU twin's own
temporal rules (``FloatMotion.push_score``), so motion2/motion3 and the
first/last frame rules are the CPU lane's.  The last staged reference luma of
each batch is kept on the device (as samples) for the next batch's first frame.
"""

from __future__ import annotations

import numpy as np

from ...features import float_motion as cpu
from .float_util import SUM_THREADS, GpuFloatFeature, upload
from .launch import F32, I32, I64, U64

__all__ = ["make"]

_ROWS = 32  # FM_ROWS
_THREADS = 256  # FM_THREADS


class GpuFloatMotion(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION,
                         ("motion_add_uv", lambda uv: not uv, "runs on the CPU lane only"))
        stg = scorer.staging
        w, h = self.width, self.height
        # the CPU twin: its options, checks and temporal rules (its extract is not used here)
        self.twin = cpu.FloatMotion(self.values, w, h, stg.bitdepth)
        self.temporal(self.twin.push_score, self.twin.flush)
        self.force_zero = self.twin.force_zero
        self.taps = cpu.filter_for(int(self.values["motion_filter_size"]))
        self.stats_bytes = 4
        dev = scorer.device
        self._taps = self.own(upload(dev, scorer.stream, self.taps))
        self._luma_bytes = stg.pitches[0] * stg.elem * h  # one staged luma plane, pitch included
        self._history = self.own(dev.alloc(self._luma_bytes))
        ks = scorer.kernels
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._rows = ks.launcher("float_motion.cu", "vx_fmotion_rows" + sfx,
                                 [U64, U64, I64, I32, I32, I64, F32, U64, I32, I32, U64, I64])
        self._total = ks.launcher("float_motion.cu", "vx_fmotion_total", [U64, I64, I32, I32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        if self.force_zero:
            return
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        w, h = self.width, self.height
        first = 1 if first_seq == 0 else 0
        if first < n:
            rows = dev.alloc_async(max(256, n * h * 4), st)
            self._rows(((h + _ROWS - 1) // _ROWS, 1, n - first), (_THREADS,), st, stg.plane_ptr(staging, 0, 0, 0),
                       self._history, stg.frame_stride_elems, w, h, stg.pitches[0], self.div, self._taps,
                       len(self.taps), first, rows, h)
            self._total((1, 1, n - first), (SUM_THREADS,), st, rows, h, h, first, stats + self.stats_offset,
                        record_bytes // 4, 0)
            dev.free_async(rows, st)
        # after the kernel that read it (the same stream): the next batch's predecessor
        dev.copy_dtod_async(self._history, stg.plane_ptr(staging, n - 1, 0, 0), self._luma_bytes, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + 4].view(np.float32)[:, 0]
        return self.push_scores(first_seq, (
            None if self.force_zero or seq == 0 else cpu.score_from_sum(s, self.width, self.height)
            for seq, s in enumerate(sums, first_seq)))


def make(instance, scorer) -> GpuFloatMotion:
    return GpuFloatMotion(instance, scorer)
