"""Float PSNR on the GPU: the luma's noise sum per frame; the host half is the CPU twin's own.

Statistics per frame: 8 bytes.  Up to 12 bits, the int64 sum of squared
sample differences from psnr.cu's kernel (exact, any order), which
``float_psnr.noise_from_sse`` turns into libvmaf's double; at 16 bits the
double sum itself, added in libvmaf's order by float_psnr.cu.  Then
``float_psnr.metrics_from_stats`` gives the CPU lane's double.
"""

from __future__ import annotations

import numpy as np

from ...features import float_psnr as cpu
from .float_util import GpuFloatFeature
from .launch import F32, I32, I64, U64
from .psnr import PlaneSse

__all__ = ["make"]


class GpuFloatPsnr(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        self.exact = stg.bitdepth in cpu.EXACT_BITDEPTHS
        self.stats_bytes = 8
        if self.exact:
            self._sse = PlaneSse(scorer)
        else:
            self._launch = scorer.kernels.launcher("float_psnr.cu", "vx_fpsnr_noise_seq_u16",
                                                   [U64, U64, I32, I32, I64, I64, F32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        if self.exact:
            self._sse(staging, n, 0, stats + self.stats_offset, record_bytes)
            return
        stg = self.scorer.staging
        self._launch((1, 1, n), (1,), self.scorer.stream, stg.plane_ptr(staging, 0, 0, 0),
                     stg.plane_ptr(staging, 0, 1, 0), self.width, self.height, stg.pitches[0],
                     stg.frame_stride_elems, self.div, stats + self.stats_offset, record_bytes // 8, 0)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        record = stats[:count, self.stats_offset:self.stats_offset + 8]
        if self.exact:
            noise = [cpu.noise_from_sse(int(v), self.bitdepth) for v in record.view(np.int64)[:, 0]]
        else:
            noise = [float(v) for v in record.view(np.float64)[:, 0]]
        return [(first_seq + i, cpu.metrics_from_stats(noise[i], self.width, self.height, self.bitdepth))
                for i in range(count)]


def make(instance, scorer) -> GpuFloatPsnr:
    return GpuFloatPsnr(instance, scorer)
