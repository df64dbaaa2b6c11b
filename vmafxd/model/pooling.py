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

import numpy as np

__all__ = ["POOLING_METHODS", "RunningPool", "pool"]

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


class RunningPool:
    """:func:`pool` of each column of a table whose rows come a block at a time, kept as running
    sums: after any number of :meth:`add` calls, :meth:`pooled` gives the doubles ``pool`` gives
    over each column's values in the order they came (rows top to bottom), with state of a few
    numbers a column, so a stream of any length is pooled without keeping its frames.

    The arithmetic is ``pool``'s, column-wise over a block: the sums by ``np.add.accumulate``
    (left to right from the running total, one rounding a value, as the loop adds), the inverses
    by IEEE division (C's, where the loop's Python would raise on ``x + 1 == 0``), and min and max
    as the loop's ``v < lo`` keeps them: the first value of a column while it is NaN, else the
    first occurrence of the smallest value below it (which tells only the signs of zeros apart).

    Blocks are kept (copied) until :attr:`FOLD_ROWS` rows have come, then folded in at once: the
    dozen numpy calls of a fold cost more than a batch's values, so a stream folds every
    thousand frames or so (a few hundred kilobytes at most held), whatever its batch size.
    """

    #: rows kept before they are folded into the sums
    FOLD_ROWS = 1024

    def __init__(self) -> None:
        self._n = np.zeros(0, dtype=np.int64)
        self._total = np.zeros(0)
        self._inv = np.zeros(0)
        self._lo = np.zeros(0)
        self._hi = np.zeros(0)
        #: the columns in the order a value first came for each (a row's columns left to right)
        self.order: list[int] = []
        self._kept: list[tuple[np.ndarray, np.ndarray]] = []
        self._kept_rows = 0

    def _grow(self, cols: int) -> None:
        have = len(self._n)
        if cols > have:
            more = cols - have
            self._n = np.concatenate([self._n, np.zeros(more, dtype=np.int64)])
            self._total, self._inv, self._lo, self._hi = (
                np.concatenate([a, np.zeros(more)]) for a in (self._total, self._inv, self._lo, self._hi))

    def add(self, values: np.ndarray, present: np.ndarray) -> None:
        """Rows of ``values`` (float64[rows, columns]); ``present`` (bool, the same shape) says which
        cells hold a value (a cell without one is not pooled).  Both are copied: the caller may
        reuse them."""
        if values.shape[0] == 0:
            return
        self._kept.append((values.copy(), present.copy()))
        self._kept_rows += values.shape[0]
        if self._kept_rows >= self.FOLD_ROWS:
            self._fold()

    def _fold(self) -> None:
        """The kept blocks into the sums: runs of blocks of one width at once, in order."""
        kept, self._kept, self._kept_rows = self._kept, [], 0
        start = 0
        while start < len(kept):
            end = start + 1
            while end < len(kept) and kept[end][0].shape[1] == kept[start][0].shape[1]:
                end += 1
            run = kept[start:end]
            if len(run) == 1:
                self._add(*run[0])
            else:
                self._add(np.concatenate([v for v, _ in run]), np.concatenate([p for _, p in run]))
            start = end

    def _add(self, values: np.ndarray, present: np.ndarray) -> None:
        rows, cols = values.shape
        self._grow(cols)
        if present.all():
            self._block(np.arange(cols), values)
            return
        # columns with a value in some rows only: each on its own, its values in row order;
        # first appearances by (row, column), as a row's columns are met left to right
        firsts = []
        for j in np.flatnonzero(present.any(axis=0)):
            rows_j = present[:, j]
            if self._n[j] == 0:
                firsts.append((int(np.argmax(rows_j)), int(j)))
            self._block(np.array([j]), values[rows_j, j][:, None], note=False)
        self.order.extend(j for _, j in sorted(firsts))

    def _block(self, cols: np.ndarray, x: np.ndarray, note: bool = True) -> None:
        """Every row of ``x`` (float64[rows, len(cols)]) holds a value of each of ``cols``."""
        new = self._n[cols] == 0
        if note and new.any():
            self.order.extend(int(j) for j in cols[new])
        lo, hi = self._lo[cols], self._hi[cols]
        lo[new], hi[new] = x[0, new], x[0, new]  # a column's first value (NaN included) starts it
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            self._total[cols] = np.add.accumulate(np.concatenate([self._total[cols][None], x]), axis=0)[-1]
            self._inv[cols] = np.add.accumulate(np.concatenate([self._inv[cols][None], 1.0 / (x + 1.0)]),
                                                axis=0)[-1]
            self._lo[cols] = _running_extreme(lo, x, np.fmin, np.less)
            self._hi[cols] = _running_extreme(hi, x, np.fmax, np.greater)
        self._n[cols] += x.shape[0]

    def pooled(self, names: list[str]) -> dict[str, dict[str, float]]:
        """``{names[j]: pool(column j)}`` for every column that has had a value, in :attr:`order`."""
        if self._kept:
            self._fold()
        out = {}
        for j in self.order:
            n = int(self._n[j])
            out[names[j]] = {"min": float(self._lo[j]), "max": float(self._hi[j]), "mean": float(self._total[j]) / n,
                             "harmonic_mean": _c_div(n, float(self._inv[j])) - 1.0}
        return out


def _running_extreme(cur: np.ndarray, x: np.ndarray, pick, beats) -> np.ndarray:
    """The loop's ``if v < cur: cur = v`` (``beats``: np.less; np.greater for max) over the rows
    of ``x`` from ``cur``, per column: ``pick`` (np.fmin / np.fmax, NaN-blind) finds the value; a
    zero is taken as the block's first zero (-0.0 and 0.0 compare equal, so the loop keeps the
    first); a NaN ``cur`` never moves."""
    best = pick.reduce(x, axis=0)
    zero = best == 0.0
    if zero.any():
        first = np.argmax(x == 0.0, axis=0)
        best = np.where(zero, x[first, np.arange(x.shape[1])], best)
    return np.where(beats(best, cur), best, cur)
