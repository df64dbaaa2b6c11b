"""Helpers shared by the float features' GPU twins (float_vif, float_adm, float_motion)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .engine import GpuFeature, GpuUnsupported
from .launch import F32, I32, I64, U64

__all__ = ["sample_divisor", "upload", "Planes", "FloatConvert", "GpuFloatFeature", "sum_grid", "SUM_THREADS"]

_CONVERT_COLS = 256  # VX_FLOAT_COLS in convert.cu
#: the prelude's vx_staged_row_sums: VX_SUM_ROWS rows a block of SUM_THREADS threads
_SUM_ROWS = 32
SUM_THREADS = 128


def sum_grid(rows: int, maps: int, frames: int) -> tuple[int, int, int]:
    """The grid of a kernel over vx_float_map_rows_staged (one block per VX_SUM_ROWS rows of a map)."""
    return ((rows + _SUM_ROWS - 1) // _SUM_ROWS, maps, frames)

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


class FloatConvert:
    """convert.cu's ``vx_float_convert``: both roles' luma of a batch as float pictures
    (``sample / div - 128``), into planes 0 (reference) and 1 (distorted) of a layout."""

    def __init__(self, scorer, div: float):
        self.scorer, self.div = scorer, div
        name = "vx_float_convert_u8" if scorer.staging.elem == 1 else "vx_float_convert_u16"
        self._launch = scorer.kernels.launcher("convert.cu", name, [U64, I64, I32, I64, F32, U64, I64, I64])

    def __call__(self, staging: int, n: int, layout: Planes, base: int) -> None:
        stg, st = self.scorer.staging, self.scorer.stream
        w, h = stg.shapes[0]
        for role in (0, 1):
            self._launch(((w + _CONVERT_COLS - 1) // _CONVERT_COLS, h, n), (256,), st,
                         stg.plane_ptr(staging, 0, role, 0), stg.frame_stride_elems, w, stg.pitches[0], self.div,
                         layout.ptr(base, 0, role), layout.frame, layout.pitch)


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
