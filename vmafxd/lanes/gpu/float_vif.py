"""Float VIF on the GPU: conversion, filter, statistic, decimation and row-sum kernels (float_vif.cu).

Statistics per frame: ``float32[4, 2]``, each scale's (num, den) float sums
in libvmaf's order (rows left to right, then rows top to bottom), so the
host's ``float_vif.metrics_from_stats`` gives the CPU lane's doubles.  Every
intermediate plane lives in memory taken from the stream's pool per batch.
"""

from __future__ import annotations

import numpy as np

from ...features import float_vif as cpu
from ...features._adm_csf import powf
from ...features._float_vif_core import gaussian_filter
from .float_util import SUM_THREADS, FloatConvert, GpuFloatFeature, Planes, sum_grid, upload
from .launch import F32, F64, I32, I64, U64

__all__ = ["make"]

_COLS = 256  # FV_COLS


class GpuFloatVif(GpuFloatFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION,
                         ("vif_prescale", lambda p: float(p) == 1.0, "runs on the CPU lane only"))
        w, h = self.width, self.height
        self.sizes = [(w, h)]
        for _ in range(3):
            pw, ph = self.sizes[-1]
            self.sizes.append((pw // 2, ph // 2))
        ks_ = float(self.values["vif_kernelscale"])
        self.taps = [gaussian_filter(s, ks_) for s in range(4)]
        for s, (sw, sh) in enumerate(self.sizes):
            if min(sw, sh) <= len(self.taps[s]) // 2:
                raise ValueError(f"float_vif: a {w}x{h} picture is too small for scale {s}")
        self.skip0 = bool(self.values["vif_skip_scale0"])
        self.gain = float(np.float32(self.values["vif_enhn_gain_limit"]))
        self.nsq = float(self.values["vif_sigma_nsq"])
        self.max_inv = float(np.float32(float(powf(self.nsq, 2.0)) / (255.0 * 255.0)))
        self.stats_bytes = 8 * 4
        dev = scorer.device
        flat = np.concatenate(self.taps).astype(np.float32)
        self._taps = self.own(upload(dev, scorer.stream, flat))
        self._tap_ptr = []
        off = 0
        for t in self.taps:
            self._tap_ptr.append(self._taps + 4 * off)
            off += len(t)
        ks = scorer.kernels
        self._convert = FloatConvert(scorer, self.div)
        self._vert = ks.launcher("float_vif.cu", "vx_fvif_vert",
                                 [U64, U64, I64, I32, I32, I64, U64, I32, I32, U64, I64, I64, I64])
        self._stat = ks.launcher("float_vif.cu", "vx_fvif_stat",
                                 [U64, U64, I64, I32, I32, I64, U64, I32, F32, F64, F32, U64, U64, I64, I64])
        self._dec = ks.launcher("float_vif.cu", "vx_fvif_dec",
                                [U64, I64, I32, I64, I64, U64, I32, U64, U64, I64, I64, I32])
        self._rows = ks.launcher("float_vif.cu", "vx_fvif_rows", [U64, I64, I64, I64, I32, I32, U64, I64])
        self._total = ks.launcher("float_vif.cu", "vx_fvif_total", [U64, I64, I32, U64, I32, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        st, dev = self.scorer.stream, self.scorer.device
        w0, h0 = self.sizes[0]
        vbuf = dev.alloc_async(Planes(w0, h0, 2).nbytes(n), st)  # the decimation's vertical pass
        maps = dev.alloc_async(Planes(w0, h0, 2).nbytes(n), st)
        rows = dev.alloc_async(max(256, n * 2 * h0 * 4), st)
        pics = [Planes(sw, sh, 2) for sw, sh in self.sizes]
        pic_bufs = [dev.alloc_async(p.nbytes(n), st) for p in pics]
        lay = pics[0]
        self._convert(staging, n, lay, pic_bufs[0])
        out = stats + self.stats_offset
        for s, (sw, sh) in enumerate(self.sizes):
            taps, fw = self._tap_ptr[s], len(self.taps[s])
            if s > 0:
                prev = pics[s - 1]
                v2 = Planes(prev.w, prev.h, 2)
                self._vert(((prev.w + _COLS - 1) // _COLS, prev.h, n), (256,), st,
                           prev.ptr(pic_bufs[s - 1], 0, 0), prev.ptr(pic_bufs[s - 1], 0, 1), prev.frame,
                           prev.w, prev.h, prev.pitch, taps, fw, 0, vbuf, v2.frame, v2.pitch, v2.plane)
                cur = pics[s]
                self._dec(((sw + _COLS - 1) // _COLS, sh, n), (256,), st, vbuf, v2.frame, prev.w, v2.pitch,
                          v2.plane, taps, fw, cur.ptr(pic_bufs[s], 0, 0), cur.ptr(pic_bufs[s], 0, 1), cur.frame,
                          cur.pitch, sw)
            if s == 0 and self.skip0:
                continue
            cur = pics[s]
            m2 = Planes(sw, sh, 2)
            # both passes and the statistic in one kernel (the five filtered planes in shared memory)
            self._stat(((sw + _COLS - 1) // _COLS, sh, n), (256,), st, cur.ptr(pic_bufs[s], 0, 0),
                       cur.ptr(pic_bufs[s], 0, 1), cur.frame, sw, sh, cur.pitch, taps, fw, self.gain, self.nsq,
                       self.max_inv, m2.ptr(maps, 0, 0), m2.ptr(maps, 0, 1), m2.frame, m2.pitch)
            self._rows(sum_grid(sh, 2, n), (SUM_THREADS,), st, maps, m2.frame, m2.pitch, m2.plane, sw, sh,
                       rows, 2 * sh)
            self._total((1, 2, n), (SUM_THREADS,), st, rows, 2 * sh, sh, out, record_bytes // 4, 2 * s)
        for p in (*pic_bufs, rows, maps, vbuf):
            dev.free_async(p, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float32)
        records = sums.astype(np.float64).reshape(count, 4, 2)  # the batch converted at once
        return [(first_seq + i, cpu.metrics_from_stats(records[i], self.values)) for i in range(count)]


def make(instance, scorer) -> GpuFloatVif:
    return GpuFloatVif(instance, scorer)
