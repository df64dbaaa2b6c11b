"""Helpers shared by the float features' GPU twins (float_vif, float_adm, float_motion)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .engine import GpuFeature, GpuUnsupported

__all__ = ["sample_divisor", "upload", "Planes", "GpuFloatFeature", "SUM_THREADS"]

#: threads a block of the kernels over the prelude's staged sums (vx_float_map_totals_staged)
SUM_THREADS = 128

#: picture_copy's divisor per bit depth; 0 means the sample is used as it is
_DIVISORS = {8: 0.0, 10: 4.0, 12: 16.0, 16: 256.0}


def sample_divisor(feature: str, bitdepth: int) -> float:
    """The kernels' ``div`` for libvmaf's ``picture_copy`` (``sample / div - 128``)."""
    if bitdepth not in _DIVISORS:
        raise GpuUnsupported("format.bitdepth", f"{feature} takes 8-, 10-, 12- or 16-bit pictures, not {bitdepth}")
    return _DIVISORS[bitdepth]


def upload(device, stream, array: np.ndarray) -> int:
    """A small constant array copied to new device memory (synchronously, at set-up)."""
    data = np.ascontiguousarray(array)
    ptr = device.alloc(max(8, data.nbytes))
    host = device.alloc_host(max(8, data.nbytes))
    host[: data.nbytes] = data.view(np.uint8).ravel()
    device.copy_htod_async(ptr, host, data.nbytes, stream)
    stream.synchronize()
    device.free_host(host)
    return ptr


class Planes:
    """A per-frame layout of float32 planes of ``w x h`` with a 256-byte-aligned pitch.

    ``count`` planes per frame; plane ``p`` of frame ``f`` starts at element
    ``f * frame + p * plane``.
    """

    def __init__(self, w: int, h: int, count: int):
        self.w, self.h, self.count = w, h, count
        self.pitch = (w * 4 + 255) // 256 * 256 // 4
        self.plane = self.pitch * h
        self.frame = self.plane * count

    def nbytes(self, frames: int) -> int:
        return max(256, frames * self.frame * 4)

    def ptr(self, base: int, frame: int = 0, plane: int = 0) -> int:
        return base + 4 * (frame * self.frame + plane * self.plane)


class GpuFloatFeature(GpuFeature):
    """A float feature's GPU half: one option value the kernels do not run is refused first
    (``gpu_runs``: option, test of its value, why not); then ``width``/``height`` of the luma,
    ``bitdepth``, and ``div``, the kernels' divisor for it."""

    def __init__(self, instance, scorer, declaration,
                 gpu_runs: tuple[str, Callable[[Any], bool], str] | None = None):
        super().__init__(instance, scorer, declaration)
        if gpu_runs is not None:
            option, runs, why = gpu_runs
            if not runs(self.values[option]):
                raise GpuUnsupported(f"feature.{declaration.name}.{option}", why)
        self.width, self.height = scorer.staging.shapes[0]
        self.bitdepth = scorer.staging.bitdepth
        self.div = sample_divisor(declaration.name, self.bitdepth)
        self.stats_offset = 0
