"""CIEDE2000 colour difference (libvmaf's ``ciede`` extractor).

What libvmaf computes (``libvmaf/src/feature/ciede.c``)
-------------------------------------------------------
Chroma is first upsampled to the luma size by repeating samples (with
libvmaf's quirks for 4:2:2 and odd sizes, see
:func:`._ciede_color.chroma_to_444_indices`); every pixel of reference and
distorted is converted from limited-range BT.709 YUV to CIE Lab; the
CIEDE2000 difference (kL 0.65, kC 1, kH 4) of each pixel pair is a float;
those floats are added one by one, in raster order, into a double; and the
score is ``45 - 20 * log10(sum / (w * h))`` (+inf on identical frames).

Layers
------
* :func:`compute_stats`: per-pixel differences and their raster-order double
  sum (the statistic a GPU kernel must reproduce).
* :func:`metrics_from_stats`: the score from that sum.
* :class:`Ciede`: the CPU twin.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from vmafx.formats import Subsampling

from ._ciede_color import chroma_to_444_indices, ciede2000, ciede2000_libm, lab_from_yuv
from .declaration import FeatureDeclaration, FrameScores, PerFrameTwin, check_bitdepth, check_chroma

__all__ = ["DECLARATION", "Ciede", "ChromaUpsampler", "compute_stats", "metrics_from_stats", "pixel_differences"]

#: bit depths libvmaf's ciede accepts
SUPPORTED_BITDEPTHS = (8, 10, 12, 16)


class ChromaUpsampler:
    """libvmaf's chroma upsampling for one geometry (indices built once)."""

    def __init__(self, subsampling: Subsampling, width: int, height: int,
                 chroma_shape: tuple[int, int]):
        self.identity = subsampling is Subsampling.S444
        ch, cw = chroma_shape
        self.plane = ((cw + 31) & ~31) * ch
        self.stride = (cw + 31) & ~31
        self.ch, self.cw = ch, cw
        if not self.identity:
            self.index, self.length = chroma_to_444_indices(subsampling.value, width, height, cw, ch)

    def __call__(self, picture: Any) -> tuple[np.ndarray, np.ndarray]:
        u, v = picture.planes[1], picture.planes[2]
        if self.identity:
            return u, v
        flat = np.zeros(self.length, u.dtype)
        for k, plane in enumerate((u, v)):
            rows = flat[k * self.plane:(k + 1) * self.plane].reshape(self.ch, self.stride)
            rows[:, :self.cw] = plane
        return flat[self.index], flat[self.index + self.plane]


def pixel_differences(ref: Any, dist: Any, bitdepth: int, upsample: ChromaUpsampler) -> np.ndarray:
    """The float32 CIEDE2000 difference of every pixel (luma size).

    Whole planes in numpy; the few pixels where numpy's transcendental
    functions might round differently from the C library's are redone,
    together, with the C library (see :mod:`._ciede_color`).
    """
    ru, rv = upsample(ref)
    du, dv = upsample(dist)
    ry, dy = ref.planes[0], dist.planes[0]
    doubt = np.zeros(ry.shape, bool)
    lab1 = lab_from_yuv(ry, ru, rv, bitdepth, doubt)
    lab2 = lab_from_yuv(dy, du, dv, bitdepth, doubt)
    out = ciede2000(*lab1, *lab2, doubt)
    where = np.nonzero(doubt)
    if where[0].size:
        samples = np.stack([a[where] for a in (ry, ru, rv, dy, du, dv)], axis=1)
        out[where] = ciede2000_libm(samples, bitdepth)
    return out


def compute_stats(differences: np.ndarray) -> float:
    """The double sum of the per-pixel floats, added in raster order as libvmaf does."""
    flat = differences.astype(np.float64).ravel()
    if flat.size == 0:
        return 0.0
    # cumsum adds left to right (np.sum would add pairwise and round differently)
    return float(np.cumsum(flat)[-1])


def metrics_from_stats(total: float, width: int, height: int) -> dict[str, float]:
    mean = total / float(width * height)
    if mean > 0.0:
        return {"ciede2000": 45.0 - 20.0 * math.log10(mean)}
    return {"ciede2000": math.inf if mean == 0.0 else math.nan}


class Ciede(PerFrameTwin):
    """CPU twin of libvmaf's ``ciede`` extractor."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        check_bitdepth("ciede", bitdepth, SUPPORTED_BITDEPTHS)
        self.width = width
        self.height = height
        self.bitdepth = bitdepth
        self._upsample: ChromaUpsampler | None = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        check_chroma("ciede", len(ref.planes))
        if self._upsample is None:
            self._upsample = ChromaUpsampler(ref.subsampling, ref.width, ref.height, ref.planes[1].shape)
        diffs = pixel_differences(ref, dist, self.bitdepth, self._upsample)
        return [(index, metrics_from_stats(compute_stats(diffs), ref.width, ref.height))]


DECLARATION = FeatureDeclaration(
    name="ciede",
    provides=("ciede2000",),
    kernel="ciede.cu",
    gpu="ciede",
    cpu=Ciede,
    help="CIEDE2000 colour difference as 45 - 20 log10(mean dE00) (BT.709 limited range -> Lab)",
)
