"""CAMBI on the GPU (``cambi.cu``): the whole pipeline on the device, the last sums on the host.

Per batch and picture (the distorted luma; with ``full_ref`` the reference
luma too, at the source size), every launch covering all frames of the batch:
one preprocessing launch, one mask launch, then per scale one filter, one
c-value, four histogram + four select, and one sum launch (57 launches a
picture).  Per-batch scratch (images, mask, c-values, the selection state)
comes from the stream's pool and goes back at the end of the batch.

Record per picture and scale (16 bytes): the exact integer sum of 2^24 x the
c-values above the k-th largest one ``t``, then ``t``'s bits and how many
values equal to ``t`` complete the top k.  The host adds those up into the
integer the CPU twin sums (:func:`~vmafxd.features._cambi_core.spatial_pooling`)
and finishes with the same functions, so the lanes agree bit for bit.
"""

from __future__ import annotations

import numpy as np

from ...features import _cambi_core as core
from ...features import cambi as cpu
from ...features._cambi_tables import NUM_SCALES, reciprocal_lut
from .engine import GpuUnsupported
from .launch import I32, I64, U64

__all__ = ["make", "GpuCambi"]

_TILE = 16  # keep in step with cambi.cu (CB_TILE)
_THREADS = 256
_SCALE_RECORD = 16
#: the c-value kernel by num_diffs: summed-area tables up to 4 steps, else a window
#: scan with 2 nd + 1 counts packed 4 to a word
_CVALUES = {1: "vx_cambi_cvalues_sat", 2: "vx_cambi_cvalues_sat", 4: "vx_cambi_cvalues_sat",
            8: "vx_cambi_cvalues_w5", 16: "vx_cambi_cvalues_w9", 32: "vx_cambi_cvalues_w17"}

_PREP_TYPES = [U64, I64, I64, U64, U64, I32, I32, U64, I32, I32]
_MASK_TYPES = [U64, I32, I32, I32, U64]
_FILTER_TYPES = [U64, I32, I32, I32, U64, I32, I32]
_CV_TYPES = [U64, I32, I32, U64, I32, I32, I32, I32, I32, U64, U64, I32, I32, I32, U64, U64]
_HIST_TYPES = [U64, I64, U64, I32, U64]
_SELECT_TYPES = [U64, U64, I32, I64]
_SUM_TYPES = [U64, I64, U64, U64, I32, I32]


def _align(n: int, a: int = 256) -> int:
    return (n + a - 1) // a * a


class _Picture:
    """One scored picture of a frame (distorted, or the reference with full_ref): its sizes and tables."""

    def __init__(self, twin: "GpuCambi", role: int, width: int, height: int, window: int):
        s = twin.setup
        self.role = role
        self.width, self.height, self.window = width, height, window
        self.mask_index = core.mask_index(width, height)
        self.scales = core.scale_sizes(width, height, s.high_res_speedup)
        self.ks = [core.topk_count(s.topk, w * h) for w, h in self.scales]
        in_w, in_h = twin.scorer.staging.shapes[0]
        ys = core.nearest_positions(in_h, height).astype(np.int32)
        xs = core.nearest_positions(in_w, width).astype(np.int32)
        self.ys = twin.upload(ys)
        self.xs = twin.upload(xs)
        # per-frame scratch layout: image, mask, each scale's filtered image, c-values
        n0 = width * height
        self.img_off, off = 0, _align(2 * n0)
        self.mask_off, off = off, off + _align(n0)
        self.scale_offs = []
        for w, h in self.scales:
            self.scale_offs.append(off)
            off += _align(2 * w * h)
        w0, h0 = self.scales[0]
        self.cv_off, off = off, off + _align(4 * w0 * h0)
        self.frame_bytes = off


class GpuCambi:
    def __init__(self, instance, scorer):
        self.instance = instance
        self.scorer = scorer
        stg = scorer.staging
        values = {**{o.name: o.default for o in cpu.DECLARATION.options}, **instance.values}
        if values["heatmaps_path"]:
            raise GpuUnsupported("feature.cambi.heatmaps_path", "heatmaps are written by the CPU lane only")
        w, h = stg.shapes[0]
        self.setup = s = cpu.cambi_setup(values, w, h, stg.bitdepth)
        t = s.tables
        self._buffers: list[int] = []
        self.lut = self.upload(reciprocal_lut())
        self.tvi = self.upload(np.asarray(t.tvi_for_diff, np.int32))
        self.weights = self.upload(np.asarray(t.weights, np.int32))
        self.pictures = [_Picture(self, 1, s.enc_width, s.enc_height, s.window)]
        if s.full_ref:
            self.pictures.append(_Picture(self, 0, s.src_width, s.src_height, s.src_window))
        self.stats_bytes = _SCALE_RECORD * NUM_SCALES * len(self.pictures)
        self.stats_offset = 0
        ks = scorer.kernels
        self._prep = ks.launcher("cambi.cu", "vx_cambi_prep_u8" if stg.elem == 1 else "vx_cambi_prep_u16",
                                 _PREP_TYPES)
        self._mask = ks.launcher("cambi.cu", "vx_cambi_mask", _MASK_TYPES)
        self._filter = ks.launcher("cambi.cu", "vx_cambi_filter", _FILTER_TYPES)
        self._cvalues = ks.launcher("cambi.cu", _CVALUES[t.num_diffs], _CV_TYPES)
        self._hist = ks.launcher("cambi.cu", "vx_cambi_hist", _HIST_TYPES)
        self._select = ks.launcher("cambi.cu", "vx_cambi_select", _SELECT_TYPES)
        self._sum = ks.launcher("cambi.cu", "vx_cambi_sum", _SUM_TYPES)

    def upload(self, array: np.ndarray) -> int:
        """A constant table on the device for the session (freed by close)."""
        dev, st = self.scorer.device, self.scorer.stream
        data = np.ascontiguousarray(array)
        ptr = dev.alloc(max(8, data.nbytes))
        host = dev.alloc_host(max(8, data.nbytes))
        host[: data.nbytes] = data.view(np.uint8).ravel()
        dev.copy_htod_async(ptr, host, data.nbytes, st)
        st.synchronize()  # once per session, before the pinned copy goes
        dev.free_host(host)
        self._buffers.append(ptr)
        return ptr

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        stg, st, dev = self.scorer.staging, self.scorer.stream, self.scorer.device
        s, t = self.setup, self.setup.tables
        state_bytes = _align(8 * n)
        hist_bytes = _align(8 * 256 * n)
        for k, pic in enumerate(self.pictures):
            scratch = dev.alloc_async(pic.frame_bytes * n + state_bytes + hist_bytes, st)
            img = scratch + pic.img_off * n
            mask = scratch + pic.mask_off * n
            cv = scratch + pic.cv_off * n
            state = scratch + pic.frame_bytes * n
            hist = state + state_bytes
            dev.memset_async(hist, 0, hist_bytes, st)
            w, h = pic.width, pic.height
            self._prep((min(h, 1024), 1, n), (_THREADS,), st,
                       stg.plane_ptr(staging, 0, pic.role, 0), stg.pitches[0], stg.frame_stride_elems,
                       pic.ys, pic.xs, stg.bitdepth, int(s.enc_bitdepth < 10), img, w, h)
            self._mask(((w + 31) // 32, (h + 7) // 8, n), (_THREADS,), st, img, w, h, pic.mask_index, mask)
            src, src_w, src_h = img, w, h
            for scale, (sw, sh) in enumerate(pic.scales):
                out = scratch + pic.scale_offs[scale] * n
                step = 2 if scale > 0 or s.high_res_speedup else 1
                self._filter((min(sh, 1024), 1, n), (_THREADS,), st, src, src_w, src_h, step, out, sw, sh)
                mask_step = (1 << scale) * (2 if s.high_res_speedup else 1)
                self._cvalues(((sw + _TILE - 1) // _TILE, (sh + _TILE - 1) // _TILE, n), (_THREADS,), st,
                              out, sw, sh, mask, w, h, mask_step, pic.window >> 1, t.num_diffs, self.tvi,
                              self.weights, t.vlt_luma, t.band_base, t.band_size, self.lut, cv)
                count = sw * sh
                blocks = max(1, min(1024, (count + _THREADS * 8 - 1) // (_THREADS * 8)))
                for p in range(4):
                    self._hist((blocks, 1, n), (_THREADS,), st, cv, count, state, p, hist)
                    self._select((1, 1, n), (32,), st, hist, state, p, pic.ks[scale])
                index = (self.stats_offset + (k * NUM_SCALES + scale) * _SCALE_RECORD) // 8
                self._sum((blocks, 1, n), (_THREADS,), st, cv, count, state, stats, record_bytes // 8, index)
                src, src_w, src_h = out, sw, sh
            dev.free_async(scratch, st)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        recs = stats[:, self.stats_offset:self.stats_offset + self.stats_bytes].view(np.int64)
        out = []
        for i in range(count):
            scores = []
            for k, pic in enumerate(self.pictures):
                per_scale = []
                for scale in range(NUM_SCALES):
                    above, packed = (int(x) for x in recs[i, 2 * (k * NUM_SCALES + scale):][:2])
                    bits = packed & 0xFFFFFFFF
                    take = (packed >> 32) & 0xFFFFFFFF
                    t = float(np.uint32(bits).view(np.float32))
                    total = above + take * int(t * (1 << 24))
                    per_scale.append(core.pooled_mean(total, pic.ks[scale]))
                scores.append(core.weight_scales(per_scale, pic.window))
            src = scores[1] if len(scores) > 1 else None
            out.append((first_seq + i, cpu.metrics_from_scores(self.setup, scores[0], src)))
        return out

    def flush(self):
        return []

    def close(self) -> None:
        for p in self._buffers:
            self.scorer.device.free(p)
        self._buffers = []


def make(instance, scorer) -> GpuCambi:
    return GpuCambi(instance, scorer)
