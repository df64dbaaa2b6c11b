"""SpEED on the GPU (``speed_chroma``, ``speed_temporal``): features/kernels/speed.cu.

Statistics per frame: each picture at the operating size (its truncated
blocks, float32) and its 325 covariance sums (float64), in the order of
:mod:`vmafxd.features._speed_core` (``speed_chroma``: Cb ref, Cb dis, Cr
ref, Cr dis; ``speed_temporal``: the reference's and the distorted's luma
difference with the previous frame).  The host finishes each frame with the
CPU twin's own functions (``covariance_from_sums``, ``finish_scores``,
``speed_chroma.metrics_from_scores``), all frames of a batch in one call: the
25 x 25 eigenvalues and linear system are sequential float code that a GPU
thread would run alone; on the host they run on the stack of the batch's
matrices (:mod:`vmafxd.features._speed_linalg_batched`), the CPU lane's
values bit for bit.  ``speed_temporal``
keeps the last frame of each batch on the device (the next batch's first
frame needs it); its frame 0 scores 0 as libvmaf's does.
"""

from __future__ import annotations

import numpy as np

from ...features import _speed_core as core
from ...features import speed_chroma, speed_temporal
from .engine import GpuFeature, GpuUnsupported
from .float_util import sample_divisor, upload
from .launch import F32, I32, I64, U64

__all__ = ["make"]

_COLS = 256  # SP_COLS


class GpuSpeed(GpuFeature):
    def __init__(self, instance, scorer):
        self.is_temporal = instance.decl.name == "speed_temporal"
        decl = speed_temporal.DECLARATION if self.is_temporal else speed_chroma.DECLARATION
        super().__init__(instance, scorer, decl)
        stg = scorer.staging
        role_elems = stg.role_bytes // stg.elem
        # the CPU twins are built for their checks (options, bit depth, size)
        if self.is_temporal:
            self.geometry = speed_temporal.SpeedTemporal(self.values, stg.width, stg.height, stg.bitdepth).geometry
            plane = 0
            dis_cur = 0 if self.values["speed_use_ref_diff"] else role_elems
            # (current, previous) offsets from a frame's start: ref[i-1] - ref[i], dis[i-1] - dis[i] (or - ref[i])
            table = [(0, 0), (dis_cur, role_elems)]
        else:
            speed_chroma.SpeedChroma(self.values, stg.width, stg.height, stg.bitdepth)
            if len(stg.shapes) < 3:
                raise GpuUnsupported("format.pixel_format", "speed_chroma needs chroma: libvmaf refuses 4:0:0")
            cw, ch = stg.shapes[1]
            self.geometry = core.geometry(cw, ch, float(self.values["speed_prescale"]))
            plane = 1
            table = []
            for c in (1, 2):
                for role in (0, 1):
                    table.append((role * role_elems + stg.offsets[c] // stg.elem, -1))
        self.plane = plane
        self.pics = len(table)
        self.div = sample_divisor(decl.name, stg.bitdepth)
        g = self.geometry
        th, tw = g.truncated
        self.pic_bytes = (self.pics * th * tw * 4 + 7) // 8 * 8
        self.stats_bytes = self.pic_bytes + self.pics * core.PAIRS * 8
        self.stats_offset = 0
        dev, st = scorer.device, scorer.stream
        antialias, local = core.filter_taps(self.values)
        self._antialias = self.own(upload(dev, st, antialias))
        self._local = self.own(upload(dev, st, local))
        self.n_antialias, self.n_local = len(antialias), len(local)
        self._table = self.own(upload(dev, st, np.array(table, np.int64)))
        self.mode, tables = core.resize_tables(g, self.values)
        if not tables:  # no resize: one-element placeholders (the next line gives each its type)
            tables = (np.zeros(1),) * 6
        self._resize = [self.own(upload(dev, st, np.asarray(t, np.float32 if k % 3 == 2 else np.int64)))
                        for k, t in enumerate(tables)]
        self._history = None
        if self.is_temporal:
            self._history = self.own(dev.alloc(stg.frame_bytes))
            dev.memset_async(self._history, 0, stg.frame_bytes, st)
        ks = scorer.kernels
        sfx = "_u8" if stg.elem == 1 else "_u16"
        self._vert = ks.launcher("speed.cu", "vx_speed_vert" + sfx,
                                 [U64, U64, I64, U64, I32, I64, I32, I32, F32, I32, U64, U64, U64, U64, U64, U64,
                                  U64, I32, U64, I64, I32])
        self._horiz = ks.launcher("speed.cu", "vx_speed_horiz", [U64, I64, I32, I32, I32, U64, I32, U64])
        self._local_k = ks.launcher("speed.cu", "vx_speed_local", [U64, I32, I32, I32, I32, U64, I32, I32, U64, I64])
        self._means = ks.launcher("speed.cu", "vx_speed_means", [U64, I64, I32, I32, I32, U64])
        self._lanes = ks.launcher("speed.cu", "vx_speed_lanes", [U64, I64, I32, I32, I32, U64, U64])
        self._reduce = ks.launcher("speed.cu", "vx_speed_reduce", [U64, I64, I32, I32, I32, U64, U64, U64, I64])

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st, dev, g = self.scorer.staging, self.scorer.stream, self.scorer.device, self.geometry
        z = n * self.pics
        sw, sh, ow, oh = g.scaled_width, g.scaled_height, g.operating_width, g.operating_height
        th, tw = g.truncated
        tmp = dev.alloc_async(max(256, z * oh * sw * 4), st)
        small = dev.alloc_async(max(256, z * oh * ow * 4), st)
        means = dev.alloc_async(max(256, z * 25 * 4), st)
        lanes = dev.alloc_async(max(256, z * core.PAIRS * 16 * 8), st)
        rec = stats + self.stats_offset
        base = stg.plane_ptr(staging, 0, 0, 0)
        history = self._history if self._history is not None else base
        self._vert(((sw + _COLS - 1) // _COLS, oh, z), (256,), st, base, history, stg.frame_stride_elems,
                   self._table, self.pics, stg.pitches[self.plane], sw, sh, self.div, self.mode, *self._resize,
                   self._antialias, self.n_antialias, tmp, sw, oh)
        self._horiz(((ow + _COLS - 1) // _COLS, oh, z), (256,), st, tmp, sw, sw, oh, ow, self._antialias,
                    self.n_antialias, small)
        self._local_k(((tw + _COLS - 1) // _COLS, th, z), (256,), st, small, oh, ow, th, tw, self._local,
                      self.n_local, self.pics, rec, record_bytes)
        self._means((1, 1, z), (32,), st, rec, record_bytes, self.pics, th, tw, means)
        self._lanes(((core.PAIRS * 16 + 255) // 256, 1, z), (256,), st, rec, record_bytes, self.pics, th, tw, means,
                    lanes)
        self._reduce(((core.PAIRS + 255) // 256, 1, z), (256,), st, rec, record_bytes, self.pics, th, tw, means,
                     lanes, rec, self.pic_bytes)
        if self._history is not None:
            dev.copy_dtod_async(self._history, staging + (n - 1) * stg.frame_bytes, stg.frame_bytes, st)
        for ptr in (lanes, means, small, tmp):
            dev.free_async(ptr, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        g = self.geometry
        th, tw = g.truncated
        rec = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes]
        mode = 0 if self.is_temporal else int(self.values["speed_weight_var_mode"])
        # every scored frame of the batch in one finish_scores call: its linear algebra runs on the
        # stack of all their pictures' matrices (the same values as frame by frame, fewer numpy calls)
        # only speed_temporal's frame 0 goes unscored (it has no previous frame), and it
        # can only be a batch's first: the scored frames are rec[skip:count]
        skip = 1 if self.is_temporal and first_seq == 0 else 0
        scored = count - skip
        scores = []
        if scored > 0:
            pics = rec[skip:, :self.pics * th * tw * 4].view(np.float32).reshape(scored * self.pics, th, tw)
            sums = rec[skip:, self.pic_bytes:].view(np.float64).reshape(scored * self.pics, core.PAIRS)
            scores = core.finish_scores(list(pics), core.covariance_from_sums(sums, g), g, self.values, mode)
        per_frame = self.pics // 2
        out = []
        for i in range(count):
            seq = first_seq + i
            if i < skip:
                out.append((seq, {"speed_temporal": 0.0}))
                continue
            j = (i - skip) * per_frame
            if self.is_temporal:
                out.append((seq, {"speed_temporal": float(scores[j][0])}))
            else:
                (su, eu), (sv, ev) = scores[j:j + 2]
                out.append((seq, speed_chroma.metrics_from_scores(su, eu, sv, ev,
                                                                  float(self.values["speed_max_val"]))))
        return out


def make(instance, scorer) -> GpuSpeed:
    return GpuSpeed(instance, scorer)
