"""Float VIF on the GPU: decimation, statistic (with the row sums) and total kernels (float_vif.cu).

At vif_kernelscale 1 (17, 9, 5 and 3 taps) one launch gives both a scale's
statistics and the next scale's pictures (``vx_fvif_stat_down_*``, scales 0
to 2); with other filters, and below a skipped scale 0, the decimation has
its own launch.

Statistics per frame: ``float32[4, 2]``, each scale's (num, den) float sums
in libvmaf's order (rows left to right, then rows top to bottom), so the
host's ``float_vif.metrics_from_stats`` gives the CPU lane's doubles.  Scale 0
is read from the staged samples (the kernels convert as they read); the
pictures of scales 1-3 and the maps live in memory taken from the stream's
pool per batch.
"""

from __future__ import annotations

import numpy as np

from ...features import float_vif as cpu
from ...features._adm_csf import powf
from ...features._float_vif_core import gaussian_filter
from .float_util import SUM_THREADS, GpuFloatFeature, Planes, upload
from .launch import F32, F64, I32, I64, U64

__all__ = ["make", "tile_width", "stat_kernel", "stat_down_kernel"]

# float_vif.cu's blocks: FV_THREADS threads (the statistics' FV_BLOCK); bands of FV_RV rows, in
# segments of FV_VCOLS columns with their halo and strips of FV_RH; the decimation's FV_DCOLS columns
_THREADS = 256
_STAT_THREADS = _THREADS + 32  # FV_BLOCK: and a warp for the row sums
_BAND_ROWS = 8
_VCOLS = 256
_STRIP = 4
_DOWN_COLS = 120
_DOWN_TILE = 240  # FV_DOWN_TW: the segments of the statistics kernels that also decimate
_MAX_TAPS = 65  # FV_MAXTAPS: libvmaf's widest filter (vif_kernelscale 3.71 at scale 0)
#: the statistics kernels compiled for a fixed filter width, per picture element
STAT_FIXED = {"u8": (17,), "u16": (17,), "f32": (9, 5, 3)}
#: the statistics kernels that also write the next scale's pictures: (a scale's taps, the next scale's)
STAT_DOWN = {"u8": ((17, 9),), "u16": ((17, 9),), "f32": ((9, 5), (5, 3))}


def tile_width(taps: int, decimating: bool = False) -> int:
    """fv_tile_width: the output columns of a statistics segment for a filter of ``taps`` taps
    (``decimating``: of a kernel that also writes the next scale's pictures, FV_DOWN_TW)."""
    return _DOWN_TILE if decimating else (_VCOLS - (taps - 1)) // _STRIP * _STRIP


def stat_kernel(elem: str, taps: int) -> str:
    """The statistics kernel for pictures of ``elem`` and a filter of ``taps`` taps."""
    return f"vx_fvif_stat_{elem}_{taps if taps in STAT_FIXED[elem] else 'any'}"


def stat_down_kernel(elem: str, taps: int, next_taps: int) -> str | None:
    """The kernel of a scale's statistics and the next scale's pictures for these filters, or
    None (two launches)."""
    return f"vx_fvif_stat_down_{elem}_{taps}_{next_taps}" if (taps, next_taps) in STAT_DOWN.get(elem, ()) else None


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
        #: rows above each scale's row sums (and in all), a frame's map: the scales side by side
        #: in one buffer, in vx_fvif_totals' layout (times 2 maps and the batch's frames)
        self._rows_before = [sum(sh for _, sh in self.sizes[:s]) for s in range(5)]
        if max(len(t) for t in self.taps) > _MAX_TAPS:  # never with libvmaf's kernel scales
            raise ValueError(f"float_vif: filters wider than {_MAX_TAPS} taps")
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
        self._elem0 = "u8" if scorer.staging.elem == 1 else "u16"
        stat_types = [U64, U64, I64, I32, I32, I64, F32, U64, I32, F32, F64, F32, U64, U64, I64, I64, U64, I64]
        down_types = [U64, U64, I64, I32, I32, I64, F32, U64, I32, U64, U64, I64, I64, I32]
        self._stat = [ks.launcher("float_vif.cu", stat_kernel(self._elem0 if s == 0 else "f32", len(t)), stat_types)
                      for s, t in enumerate(self.taps)]
        self._down = [None] + [ks.launcher("float_vif.cu", f"vx_fvif_down_{self._elem0 if s == 1 else 'f32'}",
                                           down_types) for s in (1, 2, 3)]
        # scale s's statistics that write the scale-(s + 1) pictures (None: vx_fvif_down_* does)
        folds = [None if s == 0 and self.skip0 else
                 stat_down_kernel(self._elem0 if s == 0 else "f32", len(self.taps[s]), len(self.taps[s + 1]))
                 for s in range(3)]
        self._stat_down = [ks.launcher("float_vif.cu", k, [*stat_types, U64, U64, U64, I64, I64, I32, I32])
                           if k else None for k in folds] + [None]
        self._totals = ks.launcher("float_vif.cu", "vx_fvif_totals", [U64, I32, I32, U64, I32])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        st, dev, stg = self.scorer.stream, self.scorer.device, self.scorer.staging
        w0, h0 = self.sizes[0]
        maps = dev.alloc_async(Planes(w0, h0, 2).nbytes(n), st)
        # every scale's row sums, scale after scale (vx_fvif_totals adds them all at the end)
        rows = dev.alloc_async(max(256, 4 * n * 2 * self._rows_before[4]), st)
        pics = [Planes(sw, sh, 2) for sw, sh in self.sizes]
        pic_bufs = [0] + [dev.alloc_async(p.nbytes(n), st) for p in pics[1:]]
        # a scale's pictures: (ref, dist, frame stride, pitch) in elements; scale 0: the staged samples
        src = [(stg.plane_ptr(staging, 0, 0, 0), stg.plane_ptr(staging, 0, 1, 0), stg.frame_stride_elems,
                stg.pitches[0])]
        src += [(p.ptr(b, 0, 0), p.ptr(b, 0, 1), p.frame, p.pitch) for p, b in zip(pics[1:], pic_bufs[1:])]
        out = stats + self.stats_offset
        for s, (sw, sh) in enumerate(self.sizes):
            taps, fw = self._tap_ptr[s], len(self.taps[s])
            div = self.div if s == 1 else 0.0  # the staged samples' divisor where the source is scale 0
            if s > 0 and self._stat_down[s - 1] is not None:
                pass  # written by scale s - 1's statistics
            elif s > 0:
                (pw, ph), (r, d, fstride, pitch) = self.sizes[s - 1], src[s - 1]
                cur = pics[s]
                self._down[s](((sw + _DOWN_COLS - 1) // _DOWN_COLS, sh, n), (_THREADS,), st, r, d, fstride, pw, ph,
                              pitch, div, taps, fw, cur.ptr(pic_bufs[s], 0, 0), cur.ptr(pic_bufs[s], 0, 1),
                              cur.frame, cur.pitch, sw)
            if s == 0 and self.skip0:
                continue
            r, d, fstride, pitch = src[s]
            m2 = Planes(sw, sh, 2)
            # both passes, the statistic and the row sums in one kernel (a block a band of rows)
            args = (r, d, fstride, sw, sh, pitch, self.div if s == 0 else 0.0, taps, fw, self.gain, self.nsq,
                    self.max_inv, m2.ptr(maps, 0, 0), m2.ptr(maps, 0, 1), m2.frame, m2.pitch,
                    rows + 4 * n * 2 * self._rows_before[s], 2 * sh)
            grid = (1, (sh + _BAND_ROWS - 1) // _BAND_ROWS, n)
            if self._stat_down[s] is not None:  # and the scale-(s + 1) pictures
                (w1, h1), nxt = self.sizes[s + 1], pics[s + 1]
                self._stat_down[s](grid, (_STAT_THREADS,), st, *args, self._tap_ptr[s + 1],
                                   nxt.ptr(pic_bufs[s + 1], 0, 0), nxt.ptr(pic_bufs[s + 1], 0, 1), nxt.frame,
                                   nxt.pitch, w1, h1)
            else:
                self._stat[s](grid, (_STAT_THREADS,), st, *args)
        first = 1 if self.skip0 else 0
        self._totals((1, 2 * (4 - first), n), (SUM_THREADS,), st, rows, h0, first, out, record_bytes // 4)
        for p in (*pic_bufs[1:], rows, maps):
            dev.free_async(p, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        sums = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.float32)
        records = sums.astype(np.float64).reshape(count, 4, 2)  # the batch converted at once
        return [(first_seq + i, cpu.metrics_from_stats(records[i], self.values)) for i in range(count)]


def make(instance, scorer) -> GpuFloatVif:
    return GpuFloatVif(instance, scorer)
