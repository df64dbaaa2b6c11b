"""Pooling of per-frame scores: mean, harmonic mean, min and max, as libvmaf pools them.

Sums run frame by frame in index order (libvmaf's order), so the mean of
integer features prints exactly as libvmaf's.  ``harmonic_mean`` is
``n / sum(1 / (x + 1)) - 1``.
"""

from __future__ import annotations

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
    return {"min": lo, "max": hi, "mean": total / n, "harmonic_mean": n / inv - 1.0}
