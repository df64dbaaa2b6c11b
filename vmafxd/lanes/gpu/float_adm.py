"""Float ADM on the GPU: DWT, decoupling, masking and row-sum kernels (features/kernels/float_adm.cu).

Statistics per frame: ``float32[4, 9]``, the record the CPU twin's
``float_adm.compute_stats`` returns (per scale the DLM numerator, denominator
and AIM numerator sums, each for h, v, d), summed in libvmaf's order; the
host finishes them with the CPU twin's arithmetic, the batch at once
(``scale_sums_batch``: the p-th roots by glibc's ``powf``, as on the CPU lane;
then ``metrics_from_scale_sums`` per frame).  Every band and map lives in memory
taken from the stream's pool per batch.
"""

from __future__ import annotations

import numpy as np

from ...features import _float_adm_core as core
from ...features import float_adm as cpu
from ...features._rcp import RCP_MANTISSA
from .float_util import SUM_THREADS, FloatConvert, GpuFloatFeature, Planes, sum_grid, upload
from .launch import F32, F64, I32, I64, U64

__all__ = ["make"]

_COLS = 256  # FA_COLS


class GpuFloatAdm(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION,
                         ("adm_p_norm", lambda p: float(p) == 3.0, "only 3 runs on the GPU (powf per pixel)"))
        stg = scorer.staging
        w, h = self.width, self.height
        cpu.FloatAdm(self.values, w, h, stg.bitdepth)  # the CPU twin's checks (frame size)
        self.sizes = core.band_sizes(w, h)
        self.regions = [core.region(bw, bh) for bw, bh in self.sizes]
        self.rfactors = [core.rfactors(s, self.values) for s in range(4)]
        self.skip0 = bool(self.values["adm_skip_scale0"])
        self.egl = float(self.values["adm_enhn_gain_limit"])
        self.bypass = int(self.values["adm_bypass_cm"])
        self.stats_bytes = 36 * 4
        self._rcp = self.own(upload(scorer.device, scorer.stream, RCP_MANTISSA.astype(np.uint32)))
        ks = scorer.kernels
        self._convert = FloatConvert(scorer, self.div)
        self._dwt = ks.launcher("float_adm.cu", "vx_fadm_dwt", [U64, U64, I64, I32, I32, I64, U64, I64, I64, I64, I32])
        self._decouple = ks.launcher("float_adm.cu", "vx_fadm_decouple",
                                     [U64, I64, I32, I64, I64, F64, F32, U64, U64, I64])
        self._cm = ks.launcher("float_adm.cu", "vx_fadm_cm",
                               [U64, U64, I64, I64, I32, I32, I64, I64, F32, F32, F32, I32, I32, I32, I32,
                                U64, I64, I64, I64])
        self._rows = ks.launcher("float_adm.cu", "vx_fadm_rows", [U64, I64, I64, I64, I32, I32, U64, I64])
        self._total = ks.launcher("float_adm.cu", "vx_fadm_total", [U64, I64, I32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        st, dev = self.scorer.stream, self.scorer.device
        w, h = self.width, self.height
        pic = Planes(w, h, 2)
        pic_buf = dev.alloc_async(pic.nbytes(n), st)
        self._convert(staging, n, pic, pic_buf)
        bands = [Planes(bw, bh, 8) for bw, bh in self.sizes]
        band_bufs = [dev.alloc_async(b.nbytes(n), st) for b in bands]
        bw0, bh0 = self.sizes[0]
        ra_buf = dev.alloc_async(Planes(bw0, bh0, 6).nbytes(n), st)
        maps_buf = dev.alloc_async(Planes(bw0, bh0, 9).nbytes(n), st)
        rows_buf = dev.alloc_async(max(256, n * 9 * bh0 * 4), st)
        src_r, src_d, fstride, sw, sh, spitch = pic.ptr(pic_buf, 0, 0), pic.ptr(pic_buf, 0, 1), pic.frame, w, h, pic.pitch
        out = stats + self.stats_offset
        for s, (bw, bh) in enumerate(self.sizes):
            b, bb = bands[s], band_bufs[s]
            self._dwt(((bw + _COLS - 1) // _COLS, bh, n), (256,), st, src_r, src_d, fstride, sw, sh, spitch,
                      bb, b.frame, b.pitch, b.plane, bw)
            src_r, src_d, fstride, sw, sh, spitch = b.ptr(bb, 0, 0), b.ptr(bb, 0, 4), b.frame, bw, bh, b.pitch
            if s == 0 and self.skip0:
                continue
            ra = Planes(bw, bh, 6)
            grid = ((bw + _COLS - 1) // _COLS, bh, n)
            self._decouple(grid, (256,), st, bb, b.frame, bw, b.pitch, b.plane, self.egl,
                           float(core.COS_1DEG_SQ), self._rcp, ra_buf, ra.frame)
            top, bottom, left, right = self.regions[s]
            rw, rh = right - left, bottom - top
            maps = Planes(rw, rh, 9)
            rf = self.rfactors[s]
            self._cm(((rw + _COLS - 1) // _COLS, rh, n), (256,), st, bb, ra_buf, b.frame, ra.frame, bw, bh,
                     b.pitch, b.plane, float(rf[0]), float(rf[1]), float(rf[2]), top, left, rw, self.bypass,
                     maps_buf, maps.frame, maps.pitch, maps.plane)
            self._rows(sum_grid(rh, 9, n), (SUM_THREADS,), st, maps_buf, maps.frame, maps.pitch, maps.plane,
                       rw, rh, rows_buf, 9 * rh)
            self._total((1, 9, n), (SUM_THREADS,), st, rows_buf, 9 * rh, rh, out, record_bytes // 4, 9 * s)
        for p in (rows_buf, maps_buf, ra_buf, *band_bufs, pic_buf):
            dev.free_async(p, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float32)
        # the p-th roots of the whole batch in one pass (they were most of the host's time a frame)
        scales = cpu.scale_sums_batch(sums.reshape(count, 4, 9), self.width, self.height, self.values)
        return [(first_seq + i, cpu.metrics_from_scale_sums(scales[i], self.width, self.height, self.values))
                for i in range(count)]


def make(instance, scorer) -> GpuFloatAdm:
    return GpuFloatAdm(instance, scorer)
