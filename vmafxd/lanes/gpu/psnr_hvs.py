"""PSNR-HVS on the GPU (``psnr_hvs.cu``); the host half is the CPU twin's own.

One launch per batch (grid: 3 planes x frames).  Record per frame: three
doubles, each the plane's float error sum as libvmaf adds it (one float,
error after error; the kernel reproduces that sequential sum to the bit, see
its header).  ``psnr_hvs.scores_from_sums`` (the batch at once) and
``metrics_from_stats`` turn them into the CPU lane's doubles.
"""

from __future__ import annotations

import numpy as np

from ...features import psnr_hvs as cpu
from ...features.declaration import check_bitdepth, check_chroma
from .engine import GpuFeature
from .launch import I32, I64, U64

__all__ = ["make", "GpuPsnrHvs"]

_THREADS = 128  # keep in step with HVS_THREADS in psnr_hvs.cu
_TYPES = [U64] * 6 + [I32] * 4 + [I64] * 3 + [U64, I32, I32]


class GpuPsnrHvs(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        check_chroma("psnr_hvs", len(stg.shapes))
        check_bitdepth("psnr_hvs", stg.bitdepth, cpu.SUPPORTED_BITDEPTHS, "8 to 12")
        self.bitdepth = stg.bitdepth
        # coefficients per plane: 64 per scored 8x8 block
        self.coefficients = [64 * ny * nx for ny, nx in (cpu.block_grid(h, w) for w, h in stg.shapes)]
        self.stats_bytes = 8 * 3
        self.stats_offset = 0
        kernel = "vx_psnr_hvs_u8" if stg.elem == 1 else "vx_psnr_hvs_u16"
        self._launch = scorer.kernels.launcher("psnr_hvs.cu", kernel, _TYPES)

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st = self.scorer.staging, self.scorer.stream
        (w0, h0), (wc, hc) = stg.shapes[0], stg.shapes[1]
        ptrs = [stg.plane_ptr(staging, 0, role, p) for role in (0, 1) for p in range(3)]
        self._launch((3, 1, n), (_THREADS,), st, *ptrs, w0, h0, wc, hc, stg.pitches[0], stg.pitches[1],
                     stg.frame_stride_elems, stats + self.stats_offset, record_bytes // 8, 0)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float64)
        scores = cpu.scores_from_sums(sums, self.coefficients, self.bitdepth).tolist()  # the batch at once
        return [(first_seq + i, cpu.metrics_from_stats(s)) for i, s in enumerate(scores)]


def make(instance, scorer) -> GpuPsnrHvs:
    return GpuPsnrHvs(instance, scorer)
