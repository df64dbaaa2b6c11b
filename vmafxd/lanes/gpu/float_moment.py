"""Float moments on the GPU: four sums per frame (float_moment.cu); the host half is the CPU twin's own.

Statistics per frame: 32 bytes, the sums of the reference and distorted luma
samples and of their squares (float_moment.NAMES's order).  Up to 12 bits
they are int64 sums of the integer samples (exact, any order), which
``float_moment.sums_from_integers`` turns into libvmaf's doubles; at 16 bits
they are the double sums themselves, added in libvmaf's order.  Then
``float_moment.metrics_from_stats`` divides as the CPU lane does.
"""

from __future__ import annotations

import numpy as np

from ...features import float_moment as cpu
from ...features.float_psnr import EXACT_BITDEPTHS
from .float_util import GpuFloatFeature
from .launch import F32, I32, I64, U64

__all__ = ["make"]


class GpuFloatMoment(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        self.exact = stg.bitdepth in EXACT_BITDEPTHS
        self.stats_bytes = 32
        ks = scorer.kernels
        if self.exact:
            kernel = "vx_fmoment_sums_u8" if stg.elem == 1 else "vx_fmoment_sums_u16"
            self._launch = ks.launcher("float_moment.cu", kernel, [U64, U64, I32, I32, I64, I64, U64, I32])
        else:
            self._launch = ks.launcher("float_moment.cu", "vx_fmoment_seq_u16",
                                       [U64, U64, I32, I32, I64, I64, F32, U64, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st = self.scorer.staging, self.scorer.stream
        ref, dis = stg.plane_ptr(staging, 0, 0, 0), stg.plane_ptr(staging, 0, 1, 0)
        w, h, pitch = self.width, self.height, stg.pitches[0]
        out = stats + self.stats_offset
        if self.exact:
            self._launch((min(h, 128), 2, n), (256,), st, ref, dis, w, h, pitch, stg.frame_stride_elems,
                         out, record_bytes // 8)
        else:
            self._launch((1, 2, n), (1,), st, ref, dis, w, h, pitch, stg.frame_stride_elems, self.div,
                         out, record_bytes // 8)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        record = stats[:count, self.stats_offset:self.stats_offset + 32]
        out = []
        for i in range(count):
            if self.exact:
                sums = cpu.sums_from_integers(record[i].view(np.int64), self.bitdepth)
            else:
                sums = tuple(float(v) for v in record[i].view(np.float64))
            out.append((first_seq + i, cpu.metrics_from_stats(sums, self.width, self.height)))
        return out


def make(instance, scorer) -> GpuFloatMoment:
    return GpuFloatMoment(instance, scorer)
