"""Pooling of per-frame scores: mean, harmonic mean, min and max, as libvmaf pools them.

Sums run frame by frame in index order (libvmaf's order), so the mean of
integer features prints exactly as libvmaf's.  ``harmonic_mean`` is
``n / sum(1 / (x + 1)) - 1``.  The arithmetic is C's doubles, infinities included: identical
frames give PSNR-HVS and CIEDE2000 an infinite score, so the sum of inverses is 0 and the
harmonic mean (like the mean) is +inf, which the logs print as null -- as libvmaf's do.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["POOLING_METHODS", "pool"]

POOLING_METHODS = ("min", "max", "mean", "harmonic_mean")


def pool(values: Iterable[float]) -> dict[str, float]:
    total = 0.0
    inv = 0.0
    lo = hi = None
    n = 0
    for v in values:
        v = float(v)
        n += 1
        total += v
        inv += 1.0 / (v + 1.0)
        if lo is None or v < lo:
            lo = v
        if hi is None or v > hi:
            hi = v
    if n == 0:
        return {}
    return {"min": lo, "max": hi, "mean": total / n, "harmonic_mean": _c_div(n, inv) - 1.0}


def _c_div(a: float, b: float) -> float:
    """``a / b`` as IEEE doubles divide (C), where Python raises on a zero divisor."""
    if b != 0.0:
        return a / b
    if a == 0.0 or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)
