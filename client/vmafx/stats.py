"""Per-frame score summaries: what ``score --summary`` prints and ``plot`` marks."""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["percentile", "harmonic_mean", "summary"]


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation between ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")
    pos = (len(s) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def harmonic_mean(values: Sequence[float]) -> float:
    """libvmaf's harmonic mean (``vmaf_feature_score_pooled``): 1 / mean(1 / (x + 1)) - 1."""
    return len(values) / sum(1.0 / (v + 1.0) for v in values) - 1.0


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "p1": percentile(values, 1), "p5": percentile(values, 5),
            "mean": sum(values) / len(values), "harmonic_mean": harmonic_mean(values), "max": max(values)}
