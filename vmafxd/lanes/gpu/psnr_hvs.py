"""PSNR-HVS on the GPU (``psnr_hvs.cu``); the host half is the CPU twin's own.

Two launches per batch: every 8x8 block's 64 errors into a scratch array
(grid: the planes' groups of 64 blocks x frames), then each plane's float sum
of them (grid: 3 planes x frames).  Record per frame: three doubles, each the
plane's float error sum as libvmaf adds it (one float, error after error; the
kernel reproduces that sequential sum to the bit, see its header).
``psnr_hvs.scores_from_sums`` (the batch at once) and ``metrics_from_stats``
turn them into the CPU lane's doubles.  The scratch holds 64 floats per
scored block, about 16 MB per 1080p 4:2:0 frame, for the batch's duration.
"""

from __future__ import annotations

import numpy as np

from ...features import psnr_hvs as cpu
from ...features.declaration import check_bitdepth, check_chroma
from .engine import GpuFeature
from .launch import I32, I64, U64

__all__ = ["make", "GpuPsnrHvs"]

_TERM_BLOCKS = 64  # 8x8 blocks a block of the terms kernel takes: HVS_TERM_BLOCKS in psnr_hvs.cu
_TERM_THREADS = 128  # HVS_TERM_THREADS
_SUM_THREADS = 1024  # HVS_SUM_THREADS
_TERMS_TYPES = [U64] * 6 + [I32] * 4 + [I64] * 3 + [U64, I64]
_SUM_TYPES = [U64, I64, I32, I32, I32, I32, U64, I32, I32]


class GpuPsnrHvs(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        check_chroma("psnr_hvs", len(stg.shapes))
        check_bitdepth("psnr_hvs", stg.bitdepth, cpu.SUPPORTED_BITDEPTHS, "8 to 12")
        self.bitdepth = stg.bitdepth
        # coefficients per plane: 64 per scored 8x8 block
        self.coefficients = [64 * ny * nx for ny, nx in (cpu.block_grid(h, w) for w, h in stg.shapes)]
        # the scratch array's part per frame: the planes' errors one after another
        self.frame_terms = sum(self.coefficients)
        self.stats_bytes = 8 * 3
        self.stats_offset = 0
        ks = scorer.kernels
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._terms = ks.launcher("psnr_hvs.cu", "vx_psnr_hvs_terms" + sfx, _TERMS_TYPES)
        self._sum = ks.launcher("psnr_hvs.cu", "vx_psnr_hvs_sum", _SUM_TYPES)

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        (w0, h0), (wc, hc) = stg.shapes[0], stg.shapes[1]
        ptrs = [stg.plane_ptr(staging, 0, role, p) for role in (0, 1) for p in range(3)]
        terms = dev.alloc_async(max(256, n * self.frame_terms * 4), st)
        # Y's groups of 8x8 blocks, then Cb's, then Cr's (a grid of at least 1 block)
        groups = sum(-(-(c // 64) // _TERM_BLOCKS) for c in self.coefficients)
        self._terms((max(1, groups), 1, n), (_TERM_THREADS,), st, *ptrs, w0, h0, wc, hc,
                    stg.pitches[0], stg.pitches[1], stg.frame_stride_elems, terms, self.frame_terms)
        self._sum((3, 1, n), (_SUM_THREADS,), st, terms, self.frame_terms, w0, h0, wc, hc,
                  stats + self.stats_offset, record_bytes // 8, 0)
        dev.free_async(terms, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float64)
        scores = cpu.scores_from_sums(sums, self.coefficients, self.bitdepth).tolist()  # the batch at once
        return [(first_seq + i, cpu.metrics_from_stats(s)) for i, s in enumerate(scores)]


def make(instance, scorer) -> GpuPsnrHvs:
    return GpuPsnrHvs(instance, scorer)
