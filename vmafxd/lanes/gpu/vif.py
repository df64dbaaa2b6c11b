"""Integer VIF on the GPU: per scale a statistics kernel that also decimates to the next scale.

Statistics per frame: ``int64[4, 4]`` (scale x num_log, den_log, num_non_log,
den_non_log), exact integers; the host calls the CPU twin's
``metrics_from_stats`` on them.  The decimated pictures of scales 1..3 live in
the batch's scratch (memory taken from the stream's pool for each batch, R7).
"""

from __future__ import annotations

import numpy as np

from ...features import vif as cpu
from .engine import GpuFeature, rows_of
from .launch import F64, I32, I64, U64, PreparedBatches, Relative

__all__ = ["make"]

#: the statistics kernels' output tile (VIF_TW x VIF_TH in vif.cu)
_TILE_W, _TILE_H = 48, 32
#: the decimation kernels' output tile (VD_TW x VD_TH)
_DOWN_W, _DOWN_H = 32, 16


class _Log2Table:
    """The log2 table on a device, uploaded once per device."""

    _per_device: dict[int, int] = {}

    @classmethod
    def pointer(cls, device, stream) -> int:
        key = id(device)
        ptr = cls._per_device.get(key)
        if ptr is None:
            table = np.ascontiguousarray(cpu.LOG2_TABLE, dtype=np.uint16)
            ptr = device.alloc(table.nbytes)
            host = device.alloc_host(table.nbytes)
            host[:] = table.view(np.uint8)
            device.copy_htod_async(ptr, host, table.nbytes, stream)
            stream.synchronize()
            device.free_host(host)
            cls._per_device[key] = ptr
        return ptr


class GpuVif(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        w, h = stg.shapes[0]
        cpu.check_size(w, h)
        self.skip0 = bool(self.values["vif_skip_scale0"])
        self.gain = float(self.values["vif_enhn_gain_limit"])
        self.sizes = [(w >> s, h >> s) for s in range(4)]
        # pitches of the scale 1..3 pictures (u16), and their per-frame layout
        self.pitches = [0] + [((sw * 2 + 255) // 256 * 256) // 2 for sw, _ in self.sizes[1:]]
        self.offsets, off = [0], 0
        for s in range(1, 4):
            self.offsets.append(off)
            off += self.pitches[s] * 2 * self.sizes[s][1]
        self.frame_bytes = off  # per role, bytes of scales 1..3
        self.stats_bytes = 16 * 8
        self.stats_offset = 0
        ks = scorer.kernels
        sfx = "_u8" if stg.elem == 1 else "_u16"
        stats_types = [U64, U64, I64, I32, I32, I64, I32, I32, U64, F64, U64, I32, I32]
        down_types = [U64, U64, I64, I32, I32, I64, I32, U64, U64, I64, I64]
        self._stats3 = ks.launcher("vif.cu", "vx_vif_stats3", stats_types)
        # (with vif_skip_scale0: scale 0's decimation alone)
        self._down1 = ks.launcher("vif.cu", "vx_vif_down1" + sfx, down_types)
        # scale s's statistics and the decimation to scale s + 1 in one launch (s < 3; at s = 0
        # unless scale 0 is skipped)
        down_out = [U64, U64, I64, I64]
        self._stats_down = [ks.launcher("vif.cu", "vx_vif_stats0_down" + sfx, stats_types + down_out)] + \
                           [ks.launcher("vif.cu", f"vx_vif_stats{s}_down", stats_types + down_out) for s in (1, 2)]
        self._log2 = _Log2Table.pointer(scorer.device, scorer.stream)
        self._batches = PreparedBatches(self._launches)

    def scratch_bytes(self, n: int) -> int:
        """The batch's scale 1..3 pictures, references then distorted (the engine's scratch region)."""
        return 2 * n * self.frame_bytes

    def graph_key(self, n: int, first_seq: int) -> tuple:
        return ()  # enqueue: its prepared launches alone

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int, scratch: int) -> None:
        self._batches.run(self.scorer.stream, staging, n, scratch - staging, stats, record_bytes)

    def _launches(self, n: int, scratch_at: int, stats: int, record_bytes: int):
        """The batch's launches (:class:`PreparedBatches`): staging at ``Relative(0)``, the pictures
        at ``scratch_at`` bytes after it."""
        stg = self.scorer.staging
        bpc = stg.bitdepth
        staging, scratch = Relative(0), Relative(scratch_at)
        out = stats + self.stats_offset
        ostride = record_bytes // 8
        # scale 0 reads the staging luma
        src_r, src_d = stg.plane_ptr(staging, 0, 0, 0), stg.plane_ptr(staging, 0, 1, 0)
        fstride, pitch = stg.frame_stride_elems, stg.pitches[0]
        for s in range(4):
            w, h = self.sizes[s]
            s_mu, s_sq = (bpc, 2 * (bpc - 8)) if s == 0 else (16, 16)
            grid = ((w + _TILE_W - 1) // _TILE_W, (h + _TILE_H - 1) // _TILE_H, n)
            args = (src_r, src_d, fstride, w, h, pitch, s_mu, s_sq, self._log2, self.gain, out, ostride, 4 * s)
            if s == 3:
                yield self._stats3, grid, (256,), args
                break
            w2, h2 = self.sizes[s + 1]
            dst_r = scratch + self.offsets[s + 1]
            dst_d = scratch + n * self.frame_bytes + self.offsets[s + 1]
            dst_fstride = self.frame_bytes // 2
            if s == 0 and self.skip0:  # the decimation alone
                yield self._down1, ((w2 + _DOWN_W - 1) // _DOWN_W, (h2 + _DOWN_H - 1) // _DOWN_H, n), (256,), (
                    src_r, src_d, fstride, w, h, pitch, bpc, dst_r, dst_d, dst_fstride, self.pitches[1])
            else:  # the statistics and the decimation to scale s + 1, one launch
                yield self._stats_down[s], grid, (256,), (*args, dst_r, dst_d, dst_fstride, self.pitches[s + 1])
            src_r, src_d, fstride, pitch = dst_r, dst_d, dst_fstride, self.pitches[s + 1]

    def columns(self, stats: np.ndarray, first_seq: int, count: int):
        acc = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.int64)
        return first_seq, cpu.columns_from_sums(acc, self.skip0, self.values)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        return rows_of(self.columns(stats, first_seq, count))


def make(instance, scorer) -> GpuVif:
    return GpuVif(instance, scorer)
