"""RunningPool: ``pool`` of each column from running sums, bit for bit, whatever the blocks.

The daemon's sessions keep no frames: their pooled summary comes from running sums updated
a batch at a time.  Each figure must be the double ``pool`` gives over the column's values in
order -- the sums' rounding order, the signs of zeros in min and max, NaN and infinities as
the loop treats them -- however the rows were split into blocks and whichever cells were
missing.
"""

from __future__ import annotations

import math
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vmafxd.core.scoring import FeatureRequest, FrameAssembler, ScoringPlan
from vmafxd.model import RunningPool, load_model, pool

_SPECIAL = st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, -1e-308, 5e-324, -1.0, 1e16, 1.0])
_VALUE = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), _SPECIAL,
                   st.floats(min_value=-1e3, max_value=1e3))


def _bits(x: float) -> bytes:
    return struct.pack("<d", x) if not math.isnan(x) else b"nan"


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in a:
        assert {k: _bits(v) for k, v in a[name].items()} == {k: _bits(v) for k, v in b[name].items()}, name


def _loop(values: np.ndarray, present: np.ndarray, names: list[str]) -> dict:
    """pool() over each column's present values in row order, names by first appearance."""
    order: list[int] = []
    for row in present:
        order.extend(int(j) for j in np.flatnonzero(row) if j not in order)
    with np.errstate(all="ignore"):
        return {names[j]: _pool_c(values[present[:, j], j].tolist()) for j in order}


def _pool_c(vals: list[float]) -> dict:
    """pool(), but 1 / (x + 1) at x = -1 as C divides (Python raises)."""
    if all(v + 1.0 != 0.0 for v in vals):
        return pool(vals)
    total, inv, lo, hi = 0.0, 0.0, None, None
    for v in vals:
        total += v
        inv += float(np.float64(1.0) / np.float64(v + 1.0))
        lo = v if lo is None or v < lo else lo
        hi = v if hi is None or v > hi else hi
    n = len(vals)
    return {"min": lo, "max": hi, "mean": total / n,
            "harmonic_mean": (n / inv if inv != 0.0 else math.copysign(math.inf, inv)) - 1.0}


@st.composite
def _tables(draw):
    cols = draw(st.integers(1, 4))
    rows = draw(st.integers(1, 24))
    values = np.array(draw(st.lists(st.lists(_VALUE, min_size=cols, max_size=cols), min_size=rows, max_size=rows)))
    present = np.array(draw(st.lists(st.lists(st.booleans(), min_size=cols, max_size=cols), min_size=rows,
                                     max_size=rows))) if draw(st.booleans()) else np.ones((rows, cols), dtype=bool)
    cuts = sorted(set(draw(st.lists(st.integers(1, rows), max_size=4))))
    return values, present, cuts


@settings(max_examples=400, deadline=None)
@given(_tables(), st.integers(1, 30), st.data())
def test_running_pool_is_pool_over_the_rows_in_order(table, fold_rows, data):
    """Any blocks, folded after any number of rows, and blocks that gain columns as they come
    (an assembler's models add theirs): the loop over the whole table, absent cells left out."""
    values, present, cuts = table
    names = [f"m{j}" for j in range(values.shape[1])]
    rp = RunningPool()
    rp.FOLD_ROWS = fold_rows
    present = present.copy()
    start, width = 0, 1
    for end in [*cuts, len(values)]:
        width = data.draw(st.integers(width, values.shape[1]))
        present[start:end, width:] = False  # the block has no such columns yet
        rp.add(values[start:end, :width], present[start:end, :width])
        start = end
    _same(rp.pooled(names), _loop(values, present, names))


def test_sums_keep_the_order_of_the_rows():
    """Values whose sum depends on the order: a pairwise or reordered sum gives other bits."""
    x = np.array([1e16, 1.0, 1.0, 1.0, -1e16, 3.5, 1e-3] * 5)[:, None]
    rp = RunningPool()
    rp.add(x[:9], np.ones((9, 1), dtype=bool))
    rp.add(x[9:], np.ones((len(x) - 9, 1), dtype=bool))
    got = rp.pooled(["m"])["m"]
    assert got["mean"] == pool(x[:, 0].tolist())["mean"]
    assert got["mean"] != float(np.sum(x)) / len(x)  # numpy's pairwise sum differs here


def test_first_zero_and_nan_rules():
    rp = RunningPool()
    rp.add(np.array([[3.0], [-0.0], [0.0]]), np.ones((3, 1), dtype=bool))
    rp.add(np.array([[0.0], [math.nan]]), np.ones((2, 1), dtype=bool))
    got = rp.pooled(["m"])["m"]
    assert _bits(got["min"]) == _bits(-0.0) and got["max"] == 3.0
    rp = RunningPool()
    rp.add(np.array([[math.nan], [1.0]]), np.ones((2, 1), dtype=bool))
    assert math.isnan(rp.pooled(["m"])["m"]["min"])


def test_an_assembler_that_keeps_no_frames_pools_the_same():
    plan = ScoringPlan.build([load_model("version=vmaf_v0.6.1")], [FeatureRequest("psnr")])
    rng = np.random.default_rng(11)
    keep, lean = FrameAssembler(plan), FrameAssembler(plan, keep_frames=False)
    for first in range(0, 200, 25):
        cols = {n: rng.uniform(0.0, 50.0, 25) for n in plan.metric_names()}
        for a in (keep, lean):
            a.add_columns(first, cols)
            a.pushed(first + 24)
    for a in (keep, lean):
        a.finish()
    assert len(keep.frames) == 200 and lean.frames == []
    want = {}
    for name in keep.frames[0][1]:
        want[name] = pool([m[name] for _, m in keep.frames])
    _same(lean.pooled(), want)
    _same(keep.pooled(), want)
