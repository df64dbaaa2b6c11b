"""CAMBI's constant tables: EOTFs, contrast thresholds, weights, the reciprocal LUT.

Everything here is fixed at init from the options (libvmaf's ``cambi.c``
``init`` and ``luminance_tools.c``) and shared by the CPU twin and the GPU
kernel, which receives these tables as launch arguments.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "CONTRAST_WEIGHTS",
    "SCALE_WEIGHTS",
    "NUM_SCALES",
    "RECIPROCAL_LUT_SIZE",
    "EOTFS",
    "ContrastTables",
    "contrast_tables",
    "reciprocal_lut",
]

NUM_SCALES = 5
#: the per-scale weights of the final inner product (finest scale first)
SCALE_WEIGHTS = (16, 8, 4, 2, 1)
#: supra-threshold contrast response, by contrast step d = 1..32
CONTRAST_WEIGHTS = (1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8,
                    8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9)
#: entries of libvmaf's reciprocal table (so windows up to 65x65 pixels)
RECIPROCAL_LUT_SIZE = 4226

# BT.1886 display: gamma 2.4, white 300 cd/m2, black 0.01 cd/m2
_BT1886_GAMMA = 2.4
_BT1886_LW = 300.0
_BT1886_LB = 0.01


def _bt1886(v: float) -> float:
    # Same expression and evaluation order as luminance_tools.c; math.pow is C's pow.
    g = _BT1886_GAMMA
    lw_g = math.pow(_BT1886_LW, 1.0 / g)
    lb_g = math.pow(_BT1886_LB, 1.0 / g)
    a = math.pow(lw_g - lb_g, g)
    b = lb_g / (lw_g - lb_g)
    x = v + b
    return a * math.pow(x if x > 0 else 0, g)


def _pq(v: float) -> float:
    m_1 = 0.1593017578125
    m_2 = 78.84375
    c_1 = 0.8359375
    c_2 = 18.8515625
    c_3 = 18.6875
    num = math.pow(v, 1.0 / m_2) - c_1
    num_clipped = num if num > 0 else 0
    den = c_2 - c_3 * math.pow(v, 1.0 / m_2)
    return 10000 * math.pow(num_clipped / den, 1.0 / m_1)


EOTFS = {"bt1886": _bt1886, "pq": _pq}

# CAMBI works on 10-bit limited-range luma: foot 64, head 940.
_FOOT = 64
_HEAD = 940


def _luminance(sample: int, eotf) -> float:
    clipped = min(max(sample, _FOOT), _HEAD)
    return eotf(float(clipped - _FOOT) / (_HEAD - _FOOT))


def _tvi_condition(sample: int, diff: int, tvi: float, eotf) -> bool:
    mean = _luminance(sample, eotf)
    return _luminance(sample + diff, eotf) - mean > tvi * mean


_TOO_SMALL, _CORRECT, _TOO_BIG = 0, 1, 2


def _bisect_flag(sample: int, diff: int, tvi: float, eotf) -> int:
    if not _tvi_condition(sample, diff, tvi, eotf):
        return _TOO_BIG
    if _tvi_condition(sample + 1, diff, tvi, eotf):
        return _TOO_SMALL
    return _CORRECT


def _tvi_for_diff(diff: int, tvi: float, eotf) -> int:
    """The largest 10-bit sample at which a step of ``diff`` codes is still
    below visibility (cambi.c ``get_tvi_for_diff``: the same bisection)."""
    foot, head = _FOOT, _HEAD - diff - 1
    flag = _bisect_flag(foot, diff, tvi, eotf)
    if flag == _TOO_BIG:
        return 0
    if flag == _CORRECT:
        return foot
    flag = _bisect_flag(head, diff, tvi, eotf)
    if flag == _TOO_SMALL:
        return (1 << 10) - 1
    if flag == _CORRECT:
        return head
    while True:
        mid = foot + (head - foot) // 2
        flag = _bisect_flag(mid, diff, tvi, eotf)
        if flag == _TOO_BIG:
            head = mid
        elif flag == _TOO_SMALL:
            foot = mid
        else:
            return mid


def _vlt_luma(threshold: float, eotf) -> int:
    """The smallest sample whose luminance reaches ``threshold`` (0 when the foot does)."""
    sample = _FOOT
    while _luminance(sample, eotf) < threshold:
        sample += 1
        if sample > _HEAD:
            # libvmaf would loop forever here (the luminance saturates at the head)
            raise ValueError(f"cambi_vis_lum_threshold {threshold!r} is above the display's peak luminance")
    return 0 if sample == _FOOT else sample


@dataclass(frozen=True)
class ContrastTables:
    """What ``init`` derives from max_log_contrast, tvi_threshold, eotf and the VLT."""

    num_diffs: int
    #: per d: the highest (sample + num_diffs) at which step d + 1 is evaluated
    tvi_for_diff: tuple[int, ...]
    #: per d: the contrast weight
    weights: tuple[int, ...]
    vlt_luma: int
    #: histogram values counted: [band_base, band_base + band_size)
    band_base: int
    band_size: int


@functools.lru_cache(maxsize=32)
def contrast_tables(max_log_contrast: int, tvi_threshold: float, eotf: str, vis_lum_threshold: float) -> ContrastTables:
    fn = EOTFS[eotf]
    nd = 1 << max_log_contrast
    tvi = tuple(_tvi_for_diff(d + 1, tvi_threshold, fn) + nd for d in range(nd))
    vlt = _vlt_luma(vis_lum_threshold, fn)
    # cambi.c: only samples in [vlt - 3 nd + 1, tvi[nd - 1]] can reach a non-zero c-value
    base = max(0, vlt - 3 * nd + 1)
    size = (tvi[nd - 1] + 1 - base) & 0xFFFF
    return ContrastTables(nd, tvi, CONTRAST_WEIGHTS[:nd], vlt, base, size)


@functools.lru_cache(maxsize=1)
def reciprocal_lut() -> np.ndarray:
    """libvmaf's float table of 1/i: each entry is 1/i printed with 9 significant
    digits and read back as a float literal, which for 42 entries is one ulp
    away from the float division 1.0f/i.  Reproduced the same way: the decimal
    string, rounded once (exactly, via Fraction) to the nearest float32."""
    out = np.zeros(RECIPROCAL_LUT_SIZE, dtype=np.float32)
    for i in range(1, RECIPROCAL_LUT_SIZE):
        out[i] = _nearest_float32(Fraction("%.9g" % (1.0 / i)))
    return out


def _nearest_float32(x: Fraction) -> np.float32:
    """Round a positive rational to the nearest float32, ties to even (a C compiler's literal)."""
    # candidates around the double approximation; pick the exactly nearest
    f = np.float32(float(x))
    best = f
    for cand in (np.nextafter(f, np.float32(0)), f, np.nextafter(f, np.float32(np.inf))):
        d_c, d_b = abs(Fraction(float(cand)) - x), abs(Fraction(float(best)) - x)
        if d_c < d_b or (d_c == d_b and (int(cand.view(np.uint32)) & 1) == 0):
            best = cand
    return best
