"""CIEDE2000 on the GPU (``ciede.cu``): per-pixel differences on the device,
the raster-order double sum on the host.

One launch per batch (one thread per pixel, all frames).  The kernel writes
every pixel's float difference, or -1 where a transcendental function's
double lies too close to a float rounding midpoint for the device's libm to
be trusted (see the kernel's header); those pixels are redone here with the
CPU twin's C-library transcription, from a copy of the batch's samples.
Then ``ciede.compute_stats`` (libvmaf's sequential double sum) and
``metrics_from_stats`` give the CPU lane's doubles.

Cost: the per-pixel floats (4 bytes a pixel) and the samples come back to
the host, and the sum runs there: exact, but short of the 60 µs a 1080p
frame the design aims at.  The way there keeps the bits: an exact
fixed-point sum on the device (the sequential double sum is exact whenever
no float's lowest bit lies below the running sum's ulp, which the device can
check) and a compacted list of the doubtful pixels instead of the arrays.
"""

from __future__ import annotations

import numpy as np

from vmafx.formats import Subsampling

from ...features import ciede as cpu
from ...features._ciede_color import ciede2000_scalar, lab_scalar
from ...picture import Picture
from .launch import I32, I64, U64

__all__ = ["make", "GpuCiede"]

_THREADS = 256
_TYPES = [U64] * 6 + [I32] * 4 + [I64] * 3 + [I32, I32, U64]
_MODES = {Subsampling.S444: 0, Subsampling.S420: 1, Subsampling.S422: 2}


class GpuCiede:
    def __init__(self, instance, scorer):
        self.instance = instance
        self.scorer = scorer
        stg = scorer.staging
        if len(stg.shapes) != 3:
            raise ValueError("ciede needs chroma: libvmaf refuses 4:0:0 pictures")
        if stg.bitdepth not in cpu.SUPPORTED_BITDEPTHS:
            raise ValueError(f"ciede supports bit depths {cpu.SUPPORTED_BITDEPTHS}, not {stg.bitdepth}")
        self.width, self.height = stg.shapes[0]
        cw, ch = stg.shapes[1]
        self.mode = _MODES[stg.subsampling]
        self.upsample = cpu._Upsampler(stg.subsampling, self.width, self.height, (ch, cw))
        self.stats_bytes = 0  # the results come back through the twin's own copies
        self.stats_offset = 0
        kernel = "vx_ciede_u8" if stg.elem == 1 else "vx_ciede_u16"
        self._launch = scorer.kernels.launcher("ciede.cu", kernel, _TYPES)
        self._pending: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        # pinned buffers for a whole batch, reused (one pair per batch in flight)
        self._free: list[tuple[np.ndarray, np.ndarray]] = []

    def _buffers(self) -> tuple[np.ndarray, np.ndarray]:
        if self._free:
            return self._free.pop()
        dev, stg, most = self.scorer.device, self.scorer.staging, self.scorer.max_batch
        return dev.alloc_host(most * self.width * self.height * 4), dev.alloc_host(most * stg.frame_bytes)

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        dev, st, stg = self.scorer.device, self.scorer.stream, self.scorer.staging
        w, h = self.width, self.height
        cw, ch = stg.shapes[1]
        nbytes = n * w * h * 4
        out = dev.alloc_async(nbytes, st)
        ptrs = [stg.plane_ptr(staging, 0, role, p) for role in (0, 1) for p in range(3)]
        self._launch(((w + _THREADS - 1) // _THREADS, h, n), (_THREADS,), st, *ptrs, w, h, cw, ch,
                     stg.pitches[0], stg.pitches[1], stg.frame_stride_elems, self.mode, stg.bitdepth, out)
        diffs, samples = self._buffers()
        dev.copy_dtoh_async(diffs, out, nbytes, st)
        dev.copy_dtoh_async(samples, staging, n * stg.frame_bytes, st)
        dev.free_async(out, st)
        self._pending[first_seq] = (diffs, samples, n)

    def _picture(self, samples: np.ndarray, frame: int, role: int) -> Picture:
        stg = self.scorer.staging
        dtype = np.uint8 if stg.elem == 1 else np.dtype("<u2")
        planes = []
        for p, (w, h) in enumerate(stg.shapes):
            start = frame * stg.frame_bytes + role * stg.role_bytes + stg.offsets[p]
            rows = samples[start:start + stg.pitches[p] * stg.elem * h].view(dtype).reshape(h, stg.pitches[p])
            planes.append(rows[:, :w])
        return Picture(tuple(planes), stg.bitdepth, stg.subsampling)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        diffs, samples, n = self._pending.pop(first_seq)
        try:
            w, h = self.width, self.height
            per_frame = diffs[: n * w * h * 4].view(np.float32).reshape(n, h, w)
            out = []
            for i in range(count):
                de = per_frame[i].copy()
                redo = np.nonzero(de < 0)
                if redo[0].size:
                    self._redo(de, redo, samples, i)
                out.append((first_seq + i, cpu.metrics_from_stats(cpu.compute_stats(de), w, h)))
            return out
        finally:
            self._free.append((diffs, samples))

    def _redo(self, de: np.ndarray, where, samples: np.ndarray, frame: int) -> None:
        """The doubtful pixels with the C library, as the CPU twin does them."""
        bd = self.scorer.staging.bitdepth
        ref, dist = self._picture(samples, frame, 0), self._picture(samples, frame, 1)
        ru, rv = self.upsample(ref)
        du, dv = self.upsample(dist)
        ry, dy = ref.planes[0], dist.planes[0]
        for i, j in zip(*where):
            c1 = lab_scalar(float(ry[i, j]), float(ru[i, j]), float(rv[i, j]), bd)
            c2 = lab_scalar(float(dy[i, j]), float(du[i, j]), float(dv[i, j]), bd)
            de[i, j] = ciede2000_scalar(c1, c2)

    def flush(self):
        return []

    def close(self) -> None:
        dev = self.scorer.device
        for diffs, samples, _ in self._pending.values():
            self._free.append((diffs, samples))
        self._pending.clear()
        for diffs, samples in self._free:
            dev.free_host(diffs)
            dev.free_host(samples)
        self._free.clear()


def make(instance, scorer) -> GpuCiede:
    return GpuCiede(instance, scorer)
