"""C's semantics for the few scalar operations libvmaf's host code uses, where Python's differ.

``MIN``/``MAX`` are C's macros (``x < y ? x : y``: on ties and NaN they differ from Python's
``min``/``max``); ``log10`` gives -inf at 0 and NaN below, where ``math.log10`` raises.
math.log10 calls the C library's log10 for positive finite input, which is what libvmaf calls
(numpy's vectorised log10 may differ in the last bit).
"""

from __future__ import annotations

import math

__all__ = ["c_log10", "c_max", "c_min"]


def c_log10(x: float) -> float:
    """C's ``log10`` on a double."""
    if x > 0.0:
        return math.log10(x)
    return -math.inf if x == 0.0 else math.nan


def c_max(x: float, y: float) -> float:
    """C's ``MAX(x, y)``: ``x > y ? x : y``."""
    return x if x > y else y


def c_min(x: float, y: float) -> float:
    """C's ``MIN(x, y)``: ``x < y ? x : y``."""
    return x if x < y else y
