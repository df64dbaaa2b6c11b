"""Float ANSNR on the GPU: filtered-luma maps and their float sums (float_ansnr.cu).

Statistics per frame: two floats, ``sig`` and ``noise``, summed in libvmaf's
order (rows left to right, then rows top to bottom), which
``float_ansnr.metrics_from_stats`` turns into the CPU lane's doubles.  The
filter kernels are the CPU twin's arrays, uploaded once.
"""

from __future__ import annotations

import numpy as np

from ...features import float_ansnr as cpu
from .engine import GpuUnsupported
from .float_util import GpuFloatFeature, Planes, upload
from .launch import F32, I32, I64, U64

__all__ = ["make"]

_COLS = 256  # FA_COLS


class GpuFloatAnsnr(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        if min(self.width, self.height) < cpu.MIN_SIZE:
            raise GpuUnsupported("format.width", f"float_ansnr needs a luma of at least {cpu.MIN_SIZE}x{cpu.MIN_SIZE}")
        self.maps = Planes(self.width, self.height, 2)
        self.stats_bytes = 8
        dev, ks = scorer.device, scorer.kernels
        self._fref = self.own(upload(dev, scorer.stream, cpu.REF_KERNEL))
        self._fdis = self.own(upload(dev, scorer.stream, cpu.DIS_KERNEL))
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._maps = ks.launcher("float_ansnr.cu", "vx_fansnr_maps" + sfx,
                                 [U64, U64, I64, I32, I32, I64, F32, U64, U64, U64, I64, I64, I64])
        self._rows = ks.launcher("float_ansnr.cu", "vx_fansnr_rows", [U64, I64, I64, I64, I32, I32, U64, I64])
        self._total = ks.launcher("float_ansnr.cu", "vx_fansnr_total", [U64, I64, I32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        w, h, lay = self.width, self.height, self.maps
        maps = dev.alloc_async(lay.nbytes(n), st)
        rows = dev.alloc_async(max(256, n * 2 * h * 4), st)
        self._maps(((w + _COLS - 1) // _COLS, h, n), (256,), st, stg.plane_ptr(staging, 0, 0, 0),
                   stg.plane_ptr(staging, 0, 1, 0), stg.frame_stride_elems, w, h, stg.pitches[0], self.div,
                   self._fref, self._fdis, maps, lay.frame, lay.pitch, lay.plane)
        self._rows(((h + _COLS - 1) // _COLS, 2, n), (256,), st, maps, lay.frame, lay.pitch, lay.plane, w, h,
                   rows, 2 * h)
        self._total((1, 2, n), (1,), st, rows, 2 * h, h, stats + self.stats_offset, record_bytes // 4, 0)
        dev.free_async(rows, st)
        dev.free_async(maps, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + 8].view(np.float32)
        return [(first_seq + i, cpu.metrics_from_stats(sums[i, 0], sums[i, 1], self.width, self.height,
                                                       self.bitdepth))
                for i in range(count)]


def make(instance, scorer) -> GpuFloatAnsnr:
    return GpuFloatAnsnr(instance, scorer)
