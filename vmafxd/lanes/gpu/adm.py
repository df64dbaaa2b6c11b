"""Integer ADM on the GPU: per scale a DWT kernel and a statistics kernel (features/kernels/adm.cu).

Statistics per frame: ``int64[36]`` = ``AdmStats.num``, ``.den``, ``.aim``
(each ``[scale][band]``), exact integers; the host rebuilds
:class:`~vmafxd.features.adm.AdmStats` and calls the CPU twin's
``metrics_from_stats``.  Every per-geometry constant the kernels use (shifts,
CSF weights, regions, libvmaf's AVX-512 vector columns) comes from the CPU
twin's own plan (``_adm_plan.plan_for``), packed into one int64 table per
scale that is uploaded once per scorer.  The bands of the four scales live in
the batch's scratch (memory taken from the stream's pool for each batch, R7).
"""

from __future__ import annotations

import numpy as np

from ...features import adm as cpu
from ...features._adm_core import COS_1DEG_SQ
from ...features._adm_plan import ScaleParams, plan_for
from .engine import GpuFeature, GpuUnsupported, rows_of
from .launch import I32, I64, U64, PreparedBatches, Relative

__all__ = ["make", "scale_table", "PARAM_NAMES"]

#: the per-scale parameter table's entries, in order (from the declaration, as adm.cu's P_* indices)
PARAM_NAMES = cpu.DECLARATION.kernel_param_names()

# tiles of adm.cu (AdmTile, ADM_DWT_*) and its block size
_STATS_TH = 8  # ADM_STATS_TH
_DWT_TX, _DWT_TY = 124, 8
_THREADS = 256
# (v_add, v_shift, h_add, h_shift) of scales 1..3, as _adm_dwt's _S123_* tables
_S123_ROUNDING = ((0, 0, 16384, 15), (32768, 16, 32768, 16), (32768, 16, 16384, 15))


def _true_range(mask: np.ndarray, start: int) -> tuple[int, int]:
    """[lo, hi) of a 1-D mask that is one run of True (absolute, starting at ``start``); (0, 0) if none."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return 0, 0
    lo, hi = int(idx[0]), int(idx[-1]) + 1
    if not mask[lo:hi].all():
        raise AssertionError("an AVX-512 vector mask is not one run of columns")
    return start + lo, start + hi


def _vector_ranges(p: ScaleParams) -> tuple[int, ...]:
    """The plan's AVX-512 masks as column / row ranges, checked to rebuild the masks exactly."""
    reg = p.region
    vr = _true_range(p.vec_ring, reg.ring[1].start)
    vg = p.vec_region
    if vg is None:
        cols, rows = (0, 0), (0, 0)
    elif vg.ndim == 1:
        cols, rows = _true_range(vg, reg.left), (reg.top, reg.bottom)
    else:
        cols = _true_range(vg.any(axis=0), reg.left)
        rows = _true_range(vg.any(axis=1), reg.top)
        c = np.arange(reg.left, reg.right)
        r = np.arange(reg.top, reg.bottom)
        rebuilt = ((r >= rows[0]) & (r < rows[1]))[:, None] & ((c >= cols[0]) & (c < cols[1]))[None, :]
        if not np.array_equal(rebuilt, vg):
            raise AssertionError("the AVX-512 masking mask is not a rectangle")
    return (*vr, *cols, *rows)


def scale_table(params, egl: float, skip_aim: bool) -> np.ndarray:
    """``int64[4, len(PARAM_NAMES)]``: the kernels' constants of each scale, from the twin's plan,
    packed by name in the declaration's order (``DECLARATION.kernel_params``)."""
    egl = float(egl)
    egl_int = int(egl) if egl.is_integer() else -1
    egl_bits = int(np.float64(egl).view(np.int64))
    cos_bits = int(np.float64(COS_1DEG_SQ).view(np.int64))
    rows = []
    for p in params:
        reg = p.region
        vr_lo, vr_hi, vg_lo, vg_hi, vg_rlo, vg_rhi = _vector_ranges(p)
        rows.append(cpu.DECLARATION.pack_kernel_params({
            "w": reg.w, "h": reg.h, "top": reg.top, "bottom": reg.bottom, "left": reg.left, "right": reg.right,
            "irf": p.irf, "sub": p.sub_shift, "sq_add": p.sq_add, "sq_shift": p.sq_shift,
            "cub_add": p.cub_add, "cub_shift": p.cub_shift, "row_add": p.row_add, "row_shift": p.row_shift,
            "den_sq_add": p.den_sq_add, "den_sq_shift": p.den_sq_shift, "den_cub_add": p.den_cub_add,
            "den_cub_shift": p.den_cub_shift, "den_row_add": p.den_row_add, "den_row_shift": p.den_row_shift,
            "vr_lo": vr_lo, "vr_hi": vr_hi, "vg_lo": vg_lo, "vg_hi": vg_hi, "vg_rlo": vg_rlo, "vg_rhi": vg_rhi,
            "egl_int": egl_int, "egl_bits": egl_bits, "cos_bits": cos_bits, "skip_aim": int(skip_aim),
        }))
    return np.asarray(rows, dtype=np.int64)


class GpuAdm(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        cpu.check_options(self.values)
        if not 8 <= stg.bitdepth <= 16:
            raise GpuUnsupported("format.bitdepth", f"integer ADM supports 8 to 16 bits, got {stg.bitdepth}")
        w, h = stg.shapes[0]
        cpu.check_size(w, h)
        self.width, self.height = w, h
        self.skip0 = bool(self.values["adm_skip_scale0"])
        self.skip_aim = bool(self.values["adm_skip_aim"])
        _, self.params = plan_for(w, h, self.values)
        self._scores = cpu.BatchScorer(w, h, self.values)
        # band sizes, and the per-frame scratch layout: per scale 8 planes (ref a h v d, dist a h v d)
        self.sizes, self.pitches, self.offsets, self.plane_elems = [], [], [], []
        off, bw, bh = 0, w, h
        for s in range(4):
            bw, bh = (bw + 1) // 2, (bh + 1) // 2
            elem = 2 if s == 0 else 4
            pitch = (bw * elem + 255) // 256 * 256 // elem
            self.sizes.append((bw, bh))
            self.pitches.append(pitch)
            self.plane_elems.append(pitch * bh)
            self.offsets.append(off)
            off += (8 * pitch * bh * elem + 255) // 256 * 256
        self.frame_bytes = off
        self.stats_bytes = 36 * 8
        self.stats_offset = 0

        ks = scorer.kernels
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._dwt0 = ks.launcher("adm.cu", "vx_adm_dwt0" + sfx,
                                 [U64, U64, I64, I32, I32, I32, I32, I32, U64, I64, I32, I32])
        dwt_types = [U64, I64, I32, I32, I32, I32, I32, I32, I32, I32, U64, I64, I32, I32]
        self._dwt = [ks.launcher("adm.cu", "vx_adm_dwt_s16", dwt_types),
                     ks.launcher("adm.cu", "vx_adm_dwt_s32", dwt_types),
                     ks.launcher("adm.cu", "vx_adm_dwt_s32", dwt_types)]
        stats_types = [U64, I64, I64, I64, U64, U64, I32, I32]
        self._stats0 = ks.launcher("adm.cu", "vx_adm_stats_narrow", stats_types)
        # scales 1-3's statistics in one launch after the DWTs (vx_adm_stats_wide3)
        self._stats_wide3 = ks.launcher("adm.cu", "vx_adm_stats_wide3",
                                        [U64, I64, *[I64] * 3, *[I64] * 3, *[I64] * 3, U64, I32, U64, I32, I32, I32])

        table = scale_table(self.params, self.values["adm_enhn_gain_limit"], self.skip_aim)
        self._row_bytes = table.shape[1] * 8
        dev = scorer.device
        self._table = self.own(dev.alloc(table.nbytes))
        host = dev.alloc_host(table.nbytes)
        host[:] = table.view(np.uint8).ravel()
        dev.copy_htod_async(self._table, host, table.nbytes, scorer.stream)
        scorer.stream.synchronize()
        dev.free_host(host)
        self._batches = PreparedBatches(self._launches)

    def scratch_bytes(self, n: int) -> int:
        """The batch's bands (the engine's scratch region)."""
        return n * self.frame_bytes

    def graph_key(self, n: int, first_seq: int) -> tuple:
        return ()  # enqueue: its prepared launches alone

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int, scratch: int) -> None:
        self._batches.run(self.scorer.stream, staging, n, scratch - staging, stats, record_bytes)

    def _launches(self, n: int, scratch_at: int, stats: int, record_bytes: int):
        """The batch's launches (:class:`PreparedBatches`): staging at ``Relative(0)``, the bands at
        ``scratch_at`` bytes after it."""
        stg = self.scorer.staging
        staging, scratch = Relative(0), Relative(scratch_at)
        out = stats + self.stats_offset
        ostride = record_bytes // 8
        w, h = self.width, self.height
        for s in range(4):
            bw, bh = self.sizes[s]
            elem = 2 if s == 0 else 4
            dst = scratch + self.offsets[s]
            grid = ((bw + _DWT_TX - 1) // _DWT_TX, (bh + _DWT_TY - 1) // _DWT_TY, n)
            if s == 0:
                yield self._dwt0, grid, (_THREADS,), (
                    stg.plane_ptr(staging, 0, 0, 0), stg.plane_ptr(staging, 0, 1, 0),
                    stg.frame_stride_elems, stg.pitches[0], w, h, stg.bitdepth, int(self.skip0),
                    dst, self.frame_bytes // elem, self.pitches[0], self.plane_elems[0])
            else:
                src_elem = 2 if s == 1 else 4
                yield self._dwt[s - 1], grid, (_THREADS,), (
                    scratch + self.offsets[s - 1], self.frame_bytes // src_elem, self.pitches[s - 1],
                    self.plane_elems[s - 1], w, h, *_S123_ROUNDING[s - 1],
                    dst, self.frame_bytes // elem, self.pitches[s], self.plane_elems[s])
            w, h = bw, bh
            if s == 0 and not self.skip0:
                yield self._stats0, (self._strips(0), 1, n), (_THREADS,), (
                    dst, self.frame_bytes // elem, self.pitches[0], self.plane_elems[0],
                    self._table, out, ostride, 0)
        # scales 1-3 (int32 bands): one launch over the three scales' strips
        strips = [self._strips(s) for s in (1, 2, 3)]
        yield self._stats_wide3, (sum(strips), 1, n), (_THREADS,), (
            scratch, self.frame_bytes // 4, *[self.offsets[s] // 4 for s in (1, 2, 3)],
            *self.pitches[1:], *self.plane_elems[1:], self._table, self._row_bytes // 8,
            out, ostride, strips[0], strips[1])

    def _strips(self, s: int) -> int:
        """Blocks of scale ``s``'s statistics: strips of _STATS_TH rows of its region."""
        reg = self.params[s].region
        return (reg.bottom - reg.top + _STATS_TH - 1) // _STATS_TH

    @staticmethod
    def _sums(records: np.ndarray) -> np.ndarray:
        """int64[N, 3, 4, 3]: per frame (num, den, aim) x scale x band, from int64[N, 36] records."""
        return np.asarray(records, dtype=np.int64).reshape(-1, 3, 4, 3)

    def stats_of(self, record: np.ndarray) -> cpu.AdmStats:
        """The CPU twin's :class:`AdmStats` from one frame's record (int64[36])."""
        num, den, aim = self._sums(record)[0].copy()
        return cpu.AdmStats(self.width, self.height, num, den, aim)

    def columns(self, stats: np.ndarray, first_seq: int, count: int):
        sums = self._sums(stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.int64))
        return first_seq, self._scores.records(sums)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        return rows_of(self.columns(stats, first_seq, count))


def make(instance, scorer) -> GpuAdm:
    return GpuAdm(instance, scorer)
