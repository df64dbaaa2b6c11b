"""Float ADM on the GPU: per scale a bands kernel (DWT and decoupling; scale 0 straight from the
staged samples) and a masking kernel that adds its nine maps' rows itself (features/kernels/float_adm.cu).

Statistics per frame: ``float32[4, 9]``, the record the CPU twin's
``float_adm.compute_stats`` returns (per scale the DLM numerator, denominator
and AIM numerator sums, each for h, v, d), summed in libvmaf's order; the
host finishes them with the CPU twin's arithmetic, the batch at once
(``scale_sums_batch``: the p-th roots by glibc's ``powf``, as on the CPU lane;
then ``metrics_from_scale_sums`` per frame).  The bands and the row sums live in memory
taken from the stream's pool per batch.
"""

from __future__ import annotations

import numpy as np

from ...features import _float_adm_core as core
from ...features import float_adm as cpu
from ...features._rcp import RCP_MANTISSA
from .float_util import SUM_THREADS, GpuFloatFeature, Planes, upload
from .launch import F32, F64, I32, I64, U64

__all__ = ["make"]

_COLS = 256  # FA_COLS
_CM_ROWS = 8  # FA_CM_ROWS
_CM_THREADS = 256  # FA_CM_THREADS


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
        bands_args = [U64, U64, I64, I32, I32, I64, F32, I32, U64, I64, I64, I64, I32, I32, I32, I32, F64, F32,
                      U64, U64, I64]
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._bands0 = ks.launcher("float_adm.cu", "vx_fadm_bands" + sfx, bands_args)  # staged samples
        self._bands = ks.launcher("float_adm.cu", "vx_fadm_bands_f32", bands_args)  # the previous scale's a
        self._cm_rows = ks.launcher("float_adm.cu", "vx_fadm_cm_rows",
                                    [U64, U64, I64, I64, I32, I32, I64, I64, F32, F32, F32, I32, I32, I32, I32, I32,
                                     U64, I64])
        self._total = ks.launcher("float_adm.cu", "vx_fadm_total", [U64, I64, I32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        # per scale 5 band planes (ref a v h d, dist a); r and a (6 planes) one scale at a time
        bands = [Planes(bw, bh, 5) for bw, bh in self.sizes]
        band_bufs = [dev.alloc_async(b.nbytes(n), st) for b in bands]
        bw0, bh0 = self.sizes[0]
        ra_buf = dev.alloc_async(Planes(bw0, bh0, 6).nbytes(n), st)
        rows_buf = dev.alloc_async(max(256, n * 9 * bh0 * 4), st)
        # scale 0 reads the staged luma of both roles, converting each sample
        launch = self._bands0
        src_r, src_d = stg.plane_ptr(staging, 0, 0, 0), stg.plane_ptr(staging, 0, 1, 0)
        fstride, sw, sh, spitch = stg.frame_stride_elems, self.width, self.height, stg.pitches[0]
        out = stats + self.stats_offset
        for s, (bw, bh) in enumerate(self.sizes):
            b, bb = bands[s], band_bufs[s]
            ra = Planes(bw, bh, 6)
            full = not (s == 0 and self.skip0)
            top, bottom, left, right = self.regions[s]
            # what the masking kernel reads: the region and its one-sample halo, inside the band
            window = (max(top - 1, 0), min(bottom + 1, bh), max(left - 1, 0), min(right + 1, bw)) if full else (0,) * 4
            launch(((bw + _COLS - 1) // _COLS, bh, n), (256,), st, src_r, src_d, fstride, sw, sh, spitch, self.div,
                   bw, bb, b.frame, b.pitch, b.plane, *window, self.egl, float(core.COS_1DEG_SQ), self._rcp,
                   ra_buf, ra.frame)
            launch = self._bands
            src_r, src_d, fstride, sw, sh, spitch = b.ptr(bb, 0, 0), b.ptr(bb, 0, 4), b.frame, bw, bh, b.pitch
            if not full:
                continue
            rw, rh = right - left, bottom - top
            rf = self.rfactors[s]
            self._cm_rows(((rh + _CM_ROWS - 1) // _CM_ROWS, 1, n), (_CM_THREADS,), st, bb, ra_buf, b.frame,
                          ra.frame, bw, bh, b.pitch, b.plane, float(rf[0]), float(rf[1]), float(rf[2]), top, left,
                          rw, rh, self.bypass, rows_buf, 9 * rh)
            self._total((1, 9, n), (SUM_THREADS,), st, rows_buf, 9 * rh, rh, out, record_bytes // 4, 9 * s)
        for p in (rows_buf, ra_buf, *band_bufs):
            dev.free_async(p, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float32)
        # the p-th roots of the whole batch in one pass (they were most of the host's time a frame)
        scales = cpu.scale_sums_batch(sums.reshape(count, 4, 9), self.width, self.height, self.values)
        return [(first_seq + i, cpu.metrics_from_scale_sums(scales[i], self.width, self.height, self.values))
                for i in range(count)]


def make(instance, scorer) -> GpuFloatAdm:
    return GpuFloatAdm(instance, scorer)
