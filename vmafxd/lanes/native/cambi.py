"""Native CAMBI: the twin's per-picture integer work in C++ (``cambi.cpp``).

The kernel does the preprocessing, the spatial mask, and per scale the
decimation, the mode filter, the c-values (libvmaf's sliding window
histogram) and the exact top-k sum of the c-values (times 2^24).  Everything
else is the twin's Python: option resolution (:func:`cambi_setup`), the
contrast tables, the resampling positions, the per-scale means, the weighting
of the scales and the outputs (:func:`metrics_from_scores`), so every float
operation after the c-values is the twin's own.  With ``heatmaps_path`` the kernel
also hands back every scale's c-values, which the twin's code scales and writes.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Iterable, Mapping

import numpy as np

from ...features import _cambi_core as core
from ...features._cambi_tables import NUM_SCALES, reciprocal_lut
from ...features.cambi import _check_range, _Heatmaps, cambi_setup, heatmap_frame, metrics_from_scores
from . import NativeUnsupported, library, row_samples

__all__ = ["NativeCambi"]

_c_int, _c_ptr, _c_ssize = ctypes.c_int, ctypes.c_void_p, ctypes.c_ssize_t


_SIGNATURES = {
    "cambi_context_new": (_c_ptr, []),
    "cambi_context_free": (None, [_c_ptr]),
    "cambi_plane": (_c_int, [
        _c_ptr, _c_ptr, _c_int, _c_ssize, _c_int, _c_int, _c_int,  # context, luma, bytes, stride, bd, w, h
        _c_ptr, _c_ptr, _c_int, _c_int, _c_int, _c_int,  # ys, xs, enc bd, mask index, window, speed-up
        _c_int, _c_ptr, _c_ptr, _c_int, _c_int, _c_int, _c_ptr,  # nd, tvi, weights, vlt, band, lut
        _c_ptr, _c_ptr, _c_ptr,  # top-k counts, totals, heatmaps
    ]),
}


def _lib() -> ctypes.CDLL:
    return library("cambi", _SIGNATURES)


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.ctypes.data


class _Geometry:
    """What one kind of picture (distorted or source) is scored at: size, resampling, window, top-k counts."""

    def __init__(self, in_w: int, in_h: int, w: int, h: int, window: int, topk: float, speedup: bool):
        self.w, self.h, self.window = w, h, window
        if (in_w, in_h) == (w, h):
            self.ys = self.xs = None
        else:
            self.ys = core.nearest_positions(in_h, h).astype(np.int32)
            self.xs = core.nearest_positions(in_w, w).astype(np.int32)
            if self.ys.min() < 0 or self.ys.max() >= in_h or self.xs.min() < 0 or self.xs.max() >= in_w:
                # the kernel does not check its reads (the twin's indexing would raise)
                raise NativeUnsupported(f"cambi: resampling {in_w}x{in_h} to {w}x{h} reads outside the plane")
        self.mask_index = core.mask_index(w, h)
        self.sizes = core.scale_sizes(w, h, speedup)
        self.topk_counts = np.array([core.topk_count(topk, sw * sh) for sw, sh in self.sizes], dtype=np.int64)


class NativeCambi:
    """The CAMBI extractor (the twin's interface) on the native kernel."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        s = self.setup = cambi_setup(options, width, height, bitdepth)
        self.width, self.height = width, height
        self._lib = _lib()
        t = s.tables
        self._nd = t.num_diffs
        self._tvi = np.array(t.tvi_for_diff, dtype=np.int32)
        self._weights = np.array(t.weights, dtype=np.int32)
        self._vlt, self._band = t.vlt_luma, (t.band_base, t.band_base + t.band_size)
        self._lut = np.ascontiguousarray(reciprocal_lut(), dtype=np.float32)
        self._enc = _Geometry(width, height, s.enc_width, s.enc_height, s.window, s.topk, s.high_res_speedup)
        self._src = _Geometry(width, height, s.src_width, s.src_height, s.src_window, s.topk, s.high_res_speedup)
        self._totals = np.zeros(NUM_SCALES, dtype=np.int64)
        ctx = self._lib.cambi_context_new()
        if not ctx:
            raise MemoryError("cambi: no memory for the native kernel's context")
        self._ctx = ctx
        self._finalizer = weakref.finalize(self, self._lib.cambi_context_free, ctx)
        self._heatmaps = _Heatmaps(s.heatmaps_path, s) if s.heatmaps_path else None
        self._heat = (np.empty(sum(w * h for w, h in self._enc.sizes), dtype=np.float32)
                      if self._heatmaps is not None else None)

    def score(self, luma: np.ndarray, bitdepth: int, is_src: bool = False, frame: int = 0) -> float:
        """The CAMBI score of one luma plane (unclipped), as the twin's ``Cambi.score``."""
        _check_range(luma, bitdepth)
        if luma.shape != (self.height, self.width):
            # the kernel reads the plane at the session's size (no bounds checks in C++)
            raise ValueError(f"cambi: a {luma.shape[1]}x{luma.shape[0]} luma plane in a "
                             f"{self.width}x{self.height} session")
        if not self._finalizer.alive:
            raise ValueError("cambi: the native extractor is closed")
        g = self._src if is_src else self._enc
        heat = None if is_src else self._heat
        cast = None if luma.dtype in (np.uint8, np.uint16) else np.uint16 if bitdepth > 8 else np.uint8
        luma, stride = row_samples(luma, cast)
        rc = self._lib.cambi_plane(
            self._ctx, _ptr(luma), luma.itemsize, stride, bitdepth, g.w, g.h,
            _ptr(g.ys), _ptr(g.xs), self.setup.enc_bitdepth, g.mask_index, g.window,
            int(self.setup.high_res_speedup), self._nd, _ptr(self._tvi), _ptr(self._weights), self._vlt,
            self._band[0], self._band[1], _ptr(self._lut), _ptr(g.topk_counts), _ptr(self._totals), _ptr(heat))
        if rc != 0:
            raise MemoryError("cambi: the native kernel ran out of memory")
        if heat is not None:
            at = 0
            for scale, (w, h) in enumerate(g.sizes):
                c = heat[at:at + w * h].reshape(h, w)
                self._heatmaps.write(frame, scale, heatmap_frame(c, self.setup.window, self.setup.tables))
                at += w * h
        scores = [core.pooled_mean(int(total), int(k)) for total, k in zip(self._totals, g.topk_counts)]
        return core.weight_scales(scores, g.window)

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable:
        dist_score = self.score(dist.planes[0], dist.bitdepth, False, index)
        src_score = self.score(ref.planes[0], ref.bitdepth, True) if self.setup.full_ref else None
        return [(index, metrics_from_scores(self.setup, dist_score, src_score))]

    def flush(self) -> Iterable:
        if self._heatmaps is not None:
            self._heatmaps.close()
        return []

    def close(self) -> None:
        """Free the kernel's buffers now and close the heatmap files (safe twice; garbage
        collection frees the buffers otherwise)."""
        self._finalizer()
        if self._heatmaps is not None:
            self._heatmaps.close()
