"""FrameAssembler: values by frame (dicts) or by batch (columns), final in order, models once per call.

The assembler keeps columns, not a dict per frame; these tests check what a
lane sees: every frame final once, in order, after ``max_lag`` more frames;
its dict holds exactly the values given (later ones overwrite); the models'
outputs are what ``predict_set`` gives on all frames' inputs at once (a row's
prediction depends on that row alone, so batching must not change a bit);
rows are reused and grown over a long run without mixing frames up.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.core.scoring import FeatureRequest, FrameAssembler, ScoringPlan
from vmafxd.model import load_model, predict_set


def _plan():
    return ScoringPlan.build([load_model("version=vmaf_v0.6.1")], [FeatureRequest("psnr")])


def _values(plan, frames: int, seed: int = 3) -> dict[str, np.ndarray]:
    """Plausible values of every plan name for ``frames`` frames (random, reproducible)."""
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(0.2, 1.0, frames) * (40.0 if "psnr" in n or "motion" in n else 1.0)
            for n in plan.metric_names()}


def _expected(plan, vals: dict[str, np.ndarray]) -> list[dict[str, float]]:
    frames = len(next(iter(vals.values())))
    out = [{n: float(v[i]) for n, v in vals.items()} for i in range(frames)]
    for ms in plan.models:
        x = np.column_stack([vals[n] for n in plan.model_inputs[ms.name][0]])
        for name, pred in predict_set(ms, x).items():
            for i in range(frames):
                out[i][name] = float(pred[i])
    return out


def test_columns_and_dicts_give_the_frames_in_order_with_the_models_exact():
    plan = _plan()
    assert plan.max_lag == 1  # motion2 waits for the next frame
    frames = 301  # several reuses and growths of the 64 rows the assembler starts with
    vals = _values(plan, frames)
    motion = {n for n in vals if "motion" in n}
    asm = FrameAssembler(plan)
    got = []
    rng = np.random.default_rng(5)
    start = 0
    while start < frames:
        n = int(rng.integers(1, 90))  # batches of 1 .. 89 frames, some larger than the rows held
        end = min(frames, start + n)
        for name, v in vals.items():
            if name in motion:
                continue
            if rng.integers(2):  # some as columns, some frame by frame
                asm.add_columns(start, {name: v[start:end]})
            else:
                for i in range(start, end):
                    asm.add(i, {name: float(v[i])})
        # motion lags a frame, as the temporal rule gives it: frames start-1 .. end-2
        lo = max(0, start - 1)
        if end - 1 > lo:
            asm.add_columns(lo, {name: vals[name][lo:end - 1] for name in motion})
        got += asm.pushed(end - 1)
        start = end
    asm.add_columns(frames - 1, {name: vals[name][frames - 1:] for name in motion})
    got += asm.finish()
    assert [i for i, _ in got] == list(range(frames))
    want = _expected(plan, vals)
    for (i, m), w in zip(got, want):
        assert m == w, i
        assert all(type(v) is float for v in m.values())
    assert asm.frames == got


def test_a_later_value_overwrites_and_a_frame_holds_only_what_it_was_given():
    plan = ScoringPlan.build([], [FeatureRequest("psnr")])
    asm = FrameAssembler(plan)
    asm.add_columns(0, {"psnr_y": np.array([1.0, 2.0, 3.0])})
    asm.add(1, {"psnr_y": 5.0, "extra": -0.0})
    asm.add_columns(2, {"psnr_cb": np.array([7.0])})
    got = asm.pushed(2)
    assert got == [(0, {"psnr_y": 1.0}), (1, {"psnr_y": 5.0, "extra": -0.0}), (2, {"psnr_y": 3.0, "psnr_cb": 7.0})]
    assert np.signbit(got[1][1]["extra"])
    assert asm.pushed(4) == [(3, {}), (4, {})]  # frames never given a value are final, empty
    assert asm.add_columns(5, {}) is None and asm.finish() == []


def test_a_value_after_its_frame_is_final_is_refused():
    plan = ScoringPlan.build([], [FeatureRequest("psnr")])
    asm = FrameAssembler(plan)
    asm.add_columns(0, {"psnr_y": np.array([1.0, 2.0])})
    asm.pushed(1)
    with pytest.raises(RuntimeError, match="frame 1 arrived after it was final"):
        asm.add_columns(1, {"psnr_y": np.array([1.0, 2.0])})
    with pytest.raises(RuntimeError, match="frame 0 arrived"):
        asm.add(0, {"psnr_y": 1.0})


def test_a_missing_model_input_names_the_feature():
    plan = _plan()
    vals = _values(plan, 3)
    asm = FrameAssembler(plan)
    asm.add_columns(0, {n: v for n, v in vals.items() if n != "integer_adm2"})
    asm.add(1, {"integer_adm2": 0.5})
    with pytest.raises(RuntimeError, match="model vmaf: feature integer_adm2 missing"):
        asm.pushed(2)


def test_one_frame_values_land_in_their_row_while_new_names_grow_the_columns():
    """A one-frame batch's columns are stored element by element (and so is a frame's dict): with
    names new to the assembler among them, its arrays are replaced before the stores, and each
    value is where a many-frame batch would have put it."""
    plan = ScoringPlan.build([], [FeatureRequest("psnr")])
    one, many = FrameAssembler(plan), FrameAssembler(plan)
    names = [f"new{k}" for k in range(40)]  # several times the 16 columns it starts with
    rng = np.random.default_rng(2)
    vals = {n: rng.uniform(-1.0, 1.0, 6) for n in names}
    vals["new3"][2] = -0.0
    got, want = [], []
    for i in range(6):
        part = names[: 5 + 7 * i]  # more names each frame
        one.add_columns(i, {n: vals[n][i:i + 1] for n in part[: len(part) // 2]})
        one.add(i, {n: float(vals[n][i]) for n in part[len(part) // 2:]})
        many.add_columns(i, {n: vals[n][i:i + 2] for n in part[: len(part) // 2]})  # and frame i + 1's
        many.add_columns(i, {n: vals[n][i:i + 1] for n in part[len(part) // 2:]})
        got += one.pushed(i)
        want += many.pushed(i)
    assert [i for i, _ in got] == list(range(6))
    for (i, m), (_, w) in zip(got, want):
        assert list(m) == list(w) and set(m) == set(names[: 5 + 7 * i])
        assert all(np.float64(m[n]).tobytes() == np.float64(vals[n][i]).tobytes() for n in m), i
