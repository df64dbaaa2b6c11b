"""MotionTimeline.push_batch (the GPU twin's columns) against push frame by frame: the same frames
final at the same points, the same values to the bit, for every temporal option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vmafxd.features import motion

OPTION_SETS = [
    dict(zip(("motion_five_frame_window", "motion_moving_average", "debug"), flags))
    for flags in itertools.product((False, True), repeat=3)
] + [
    {"motion_blend_factor": 0.5, "motion_blend_offset": 3.0},
    {"motion_max_val": 4.0, "motion_moving_average": True},
    {"motion_blend_factor": 0.25, "motion_blend_offset": 2.5, "motion_five_frame_window": True,
     "motion_max_val": 6.0, "motion_moving_average": True},
]


def _timeline(options):
    values = motion.DECLARATION.with_defaults(motion.DECLARATION.resolve_options(options))
    return motion.MotionTimeline(values, debug=bool(values["debug"]))


@pytest.mark.parametrize("options", OPTION_SETS)
@pytest.mark.parametrize("frames", [1, 2, 3, 4, 70])
def test_push_batch_is_push_frame_by_frame(options, frames):
    rng = np.random.default_rng(frames)
    scores = rng.uniform(0.0, 8.0, frames)
    scores[rng.integers(0, frames, frames // 5)] = 0.0  # still frames
    if frames > 3:
        scores[3] = scores[2]  # ties: MIN's choice
    scores = scores.tolist()
    one = _timeline(options)
    want = []
    for i, s in enumerate(scores):
        want.append(one.push(i, s))
    want_flush = one.flush()

    for trial in range(3):
        many = _timeline(options)
        seq = 0
        while seq < frames:
            k = int(rng.integers(1, 9)) if trial else 1
            first, cols = many.push_batch(seq, scores[seq:seq + k])
            # what push gave over the same frames, as columns
            rows = [r for p in want[seq:seq + k] for r in p]
            assert [first + j for j in range(len(rows))] == [i for i, _ in rows]
            if rows:
                assert sorted(cols) == sorted(rows[0][1])
                for name, col in cols.items():
                    assert col.dtype == np.float64
                    assert col.tolist() == [m[name] for _, m in rows], name
            else:
                assert cols == {}
            seq += k
        assert many.flush() == want_flush


def test_push_batch_wants_the_next_frame():
    tl = _timeline({})
    tl.push_batch(0, [1.0, 2.0])
    with pytest.raises(ValueError, match="expects frame 2, got 3"):
        tl.push_batch(3, [1.0])
