"""PSNR on the GPU: per-plane SSE kernels; the host half is the CPU twin's own.

Statistics per frame: one int64 SSE per scored plane, exact, so
``psnr.metrics_from_stats`` gives the CPU lane's doubles.
"""

from __future__ import annotations

import numpy as np

from ...features import psnr as cpu
from .engine import GpuFeature, rows_of
from .launch import I32, I64, U64, PreparedBatches, Relative

__all__ = ["make", "PlaneSse"]

#: batches of this many frames and more are scored as columns (columns_from_stats: the same
#: arithmetic), smaller ones frame by frame (metrics_from_stats), whichever is cheaper
_COLUMNS_FROM = 4


class PlaneSse:
    """psnr.cu's ``vx_psnr_sse``: plane ``p``'s int64 sum of squared sample differences (exact, any
    order) per frame of a batch, into int64 ``p`` of each frame's record at ``stats`` (float_psnr's
    exact path takes the luma's)."""

    def __init__(self, scorer):
        self.scorer = scorer
        kernel = "vx_psnr_sse_u8" if scorer.staging.elem == 1 else "vx_psnr_sse_u16"
        self._launch = scorer.kernels.launcher("psnr.cu", kernel, [U64, U64, I32, I32, I64, I64, U64, I32, I32])
        self._batches = PreparedBatches(self._launches)

    def __call__(self, staging: int, n: int, p: int, stats: int, record_bytes: int) -> None:
        self._batches.run(self.scorer.stream, staging, n, p, stats, record_bytes)

    def _launches(self, n: int, p: int, stats: int, record_bytes: int):
        stg = self.scorer.staging
        w, h = stg.shapes[p]
        staging = Relative(0)
        yield self._launch, (min(h, 128), 1, n), (256,), (
            stg.plane_ptr(staging, 0, 0, p), stg.plane_ptr(staging, 0, 1, p), w, h,
            stg.pitches[p], stg.frame_stride_elems, stats, record_bytes // 8, p)


class GpuPsnr(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        chroma = bool(self.values["enable_chroma"]) and len(stg.shapes) == 3
        self.nplanes = 3 if chroma else 1
        # (height, width) as the CPU twin keeps them
        self.shapes = [(h, w) for (w, h) in stg.shapes]
        self.params = cpu.psnr_params(self.values, stg.bitdepth, self.shapes)
        self.apsnr = bool(self.values["enable_apsnr"])
        self._sse_total = [0, 0, 0]
        self._pixels_total = [0, 0, 0]
        self.stats_bytes = 8 * self.nplanes
        self.stats_offset = 0
        self._sse = PlaneSse(scorer)

    def graph_key(self, n: int, first_seq: int) -> tuple:
        return ()  # enqueue: its prepared launches alone

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        for p in range(self.nplanes):
            self._sse(staging, n, p, stats + self.stats_offset, record_bytes)

    def columns(self, stats: np.ndarray, first_seq: int, count: int):
        if count < _COLUMNS_FROM:
            return None  # a few frames: metrics(), frame by frame, costs less than the arrays
        sse = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.int64)
        shapes = self.shapes[: self.nplanes]
        if self.apsnr:
            for p, (h, w) in enumerate(shapes):
                self._sse_total[p] += sum(sse[:, p].tolist())  # Python ints: no overflow
                self._pixels_total[p] += ((h * w) & 0xFFFFFFFF) * count
        return first_seq, cpu.columns_from_stats(sse, shapes, self.params)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        if count >= _COLUMNS_FROM:
            return rows_of(self.columns(stats, first_seq, count))
        sse = stats[:, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.int64)
        shapes = self.shapes[: self.nplanes]
        out = []
        for i in range(count):
            row = sse[i].tolist()  # Python ints
            if self.apsnr:
                for p, (h, w) in enumerate(shapes):
                    self._sse_total[p] += row[p]
                    self._pixels_total[p] += (h * w) & 0xFFFFFFFF
            out.append((first_seq + i, cpu.metrics_from_stats(row, shapes, self.params)))
        return out

    def aggregate(self) -> dict[str, float]:
        if not self.apsnr:
            return {}
        return cpu.apsnr_from_totals(self.params.peak, self._sse_total, self._pixels_total)


def make(instance, scorer) -> GpuPsnr:
    return GpuPsnr(instance, scorer)
