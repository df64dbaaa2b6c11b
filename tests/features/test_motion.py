"""Integer motion against libvmaf, plus its options and temporal rules."""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.features import motion
from vmafxd.features.declaration import OptionError
from vmafxd.features.motion import (
    DECLARATION,
    FILTER,
    SAD_NAME,
    compute_stats,
    metrics_from_stats,
    motion_blend,
)

from ..reference import pair_params
from .harness import compare, run_feature

DEBUG_NAMES = [SAD_NAME, "integer_motion", "integer_motion2", "integer_motion3"]
PLAIN_NAMES = [SAD_NAME, "integer_motion2", "integer_motion3"]


# --- exactness against libvmaf ------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_debug_run_matches_libvmaf(pair):
    """The vmaf_v0.6.1 runs used motion.debug=true: all four keys, bit for bit."""
    ours = run_feature(DECLARATION, pair, {"debug": True})
    assert compare(ours, pair, "vmaf_v0.6.1", DEBUG_NAMES, exact=True) == []


@pytest.mark.parametrize("pair", pair_params())
def test_plain_run_matches_libvmaf(pair):
    """The vmaf_v0.6.1neg runs had no debug: three keys, and no integer_motion."""
    ours = run_feature(DECLARATION, pair)
    assert compare(ours, pair, "vmaf_v0.6.1neg", PLAIN_NAMES, exact=True) == []
    theirs = pair.scores("vmaf_v0.6.1neg")["frames"][0]["metrics"]
    assert "integer_motion" not in theirs
    assert all(set(m) == set(PLAIN_NAMES) for m in ours.values())


# --- the integer pipeline -------------------------------------------------------


def naive_sad(prev: np.ndarray, cur: np.ndarray, bitdepth: int) -> int:
    """A direct transcription of the arithmetic: int64 everywhere, numpy's reflect padding."""
    h, w = cur.shape
    d = prev.astype(np.int64) - cur.astype(np.int64)
    dp = np.pad(d, ((2, 2), (0, 0)), mode="reflect")
    y = sum(f * dp[k:k + h] for k, f in enumerate(FILTER))
    y = (y + (1 << (bitdepth - 1))) >> bitdepth
    yp = np.pad(y, ((0, 0), (2, 2)), mode="reflect")
    x = sum(f * yp[:, k:k + w] for k, f in enumerate(FILTER))
    x = (x + (1 << 15)) >> 16
    return int(np.abs(x).sum())


@pytest.mark.parametrize(
    "bitdepth,shape",
    [(8, (9, 7)), (8, (3, 3)), (8, (37, 64)), (10, (21, 33)), (12, (5, 6)), (16, (17, 11)),
     (8, (70, 4100))],  # the last one is processed in several strips with a short last strip
)
def test_sad_matches_naive_transcription(bitdepth, shape):
    rng = np.random.default_rng(bitdepth * 100 + shape[0])
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    top = (1 << bitdepth) - 1
    for trial in range(4):
        if trial == 0:  # extremes: the largest magnitudes the accumulators must hold
            prev = np.full(shape, top, dtype)
            prev[::2, 1::2] = 0
            cur = (top - prev).astype(dtype)
        else:
            prev = rng.integers(0, top + 1, shape, dtype=dtype)
            cur = rng.integers(0, top + 1, shape, dtype=dtype)
        assert compute_stats(prev, cur, bitdepth) == naive_sad(prev, cur, bitdepth)


def test_sad_of_identical_frames_is_zero():
    frame = np.arange(48 * 40, dtype=np.uint16).reshape(40, 48) % 1024
    assert compute_stats(frame, frame, 10) == 0


def test_tiny_planes_are_refused():
    with pytest.raises(ValueError):
        compute_stats(np.zeros((2, 8), np.uint8), np.zeros((2, 8), np.uint8), 8)


def test_score_arithmetic():
    # sad / 256 / (w * h), weighted, clipped
    assert metrics_from_stats(256 * 6, 2, 3) == 1.0
    assert metrics_from_stats(256 * 6, 2, 3, fps_weight=2.5) == 2.5
    assert metrics_from_stats(256 * 6 * 50, 2, 3, max_val=20.0) == 20.0
    assert motion_blend(50.0, 0.5, 40.0) == 45.0
    assert motion_blend(30.0, 0.5, 40.0) == 30.0


# --- temporal rules -------------------------------------------------------------


def libvmaf_flush(scores, opts):
    """libvmaf's batch flush over the whole list of per-frame scores (the spec for the streaming code)."""
    five = opts["motion_five_frame_window"]
    stride, min_idx = (2, 2) if five else (1, 1)
    f, o, mx = opts["motion_blend_factor"], opts["motion_blend_offset"], opts["motion_max_val"]

    def processed(v):
        b = motion_blend(v, f, o)
        return b if b < mx else mx

    n = len(scores)
    stamp = processed(scores[min_idx]) if n > min_idx else 0.0
    out, prev = [], 0.0
    for i in range(n):
        if i < min_idx:
            m2, m3, prev = 0.0, stamp, stamp
        else:
            lo_idx, hi_idx = i - (stride - 1), i + 1
            if hi_idx >= n:
                m2 = scores[i]
            elif lo_idx >= min_idx:
                m2 = min(scores[lo_idx], scores[hi_idx])
            else:
                m2 = scores[hi_idx]
            p = processed(m2)
            m3 = (p + prev) / 2.0 if opts["motion_moving_average"] else p
            prev = p
        out.append((scores[i], m2, m3))
    return out


@pytest.mark.parametrize("five", [False, True])
@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 9])
def test_timeline_streams_what_the_batch_flush_computes(five, average, n):
    opts = DECLARATION.resolve_options(
        {"motion_five_frame_window": five, "motion_moving_average": average,
         "motion_blend_factor": 0.25, "motion_blend_offset": 3.0, "motion_max_val": 7.5}
    )
    rng = np.random.default_rng(n)
    min_idx = 2 if five else 1
    scores = [0.0 if i < min_idx else float(rng.uniform(0, 10)) for i in range(n)]
    tl = motion.MotionTimeline(opts, debug=True)
    released = []
    for i, s in enumerate(scores):
        got = tl.push(i, s)
        # a frame is released once its successor (and frame min_idx) is in
        assert all(j < i and (j >= min_idx or i >= min_idx) for j, _ in got)
        released += got
    released += tl.flush()
    assert [j for j, _ in released] == list(range(n))
    want = libvmaf_flush(scores, opts)
    for (j, m), (sad, m2, m3) in zip(released, want):
        assert (m[SAD_NAME], m["integer_motion"], m["integer_motion2"], m["integer_motion3"]) == (sad, sad, m2, m3)


def synthetic_pictures(n, h=24, w=32, seed=0):
    from vmafx.formats import Subsampling
    from vmafxd.core.picture import Picture

    rng = np.random.default_rng(seed)
    return [Picture((rng.integers(0, 256, (h, w), dtype=np.uint8),), 8, Subsampling.S400) for _ in range(n)]


def test_five_frame_window_compares_two_frames_back():
    pics = synthetic_pictures(6)
    opts = DECLARATION.resolve_options({"motion_five_frame_window": True, "debug": True})
    ext = DECLARATION.cpu(opts, 32, 24, 8)
    out = {}
    for i, p in enumerate(pics):
        out.update(ext.extract(i, p, p))
    out.update(ext.flush())
    assert out[0][SAD_NAME] == out[1][SAD_NAME] == 0.0
    for i in range(2, 6):
        sad = compute_stats(pics[i - 2].luma, pics[i].luma, 8)
        assert out[i][SAD_NAME] == metrics_from_stats(sad, 32, 24)
    assert out[3]["integer_motion2"] == min(out[2][SAD_NAME], out[4][SAD_NAME])


def test_state_survives_a_reused_input_buffer():
    """Callers may hand over views of a buffer they overwrite: the previous frame must be a copy."""
    pics = synthetic_pictures(3, seed=3)
    opts = DECLARATION.resolve_options({})
    ext = DECLARATION.cpu(opts, 32, 24, 8)
    buf = pics[0].luma.copy()
    from vmafxd.core.picture import Picture

    shared = Picture((buf,), 8, pics[0].subsampling)
    out = {}
    for i, p in enumerate(pics):
        buf[...] = p.luma
        out.update(ext.extract(i, shared, shared))
    out.update(ext.flush())
    want = metrics_from_stats(compute_stats(pics[0].luma, pics[1].luma, 8), 32, 24)
    assert out[1][SAD_NAME] == want and want > 0


# --- options --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key,value,field",
    [
        ("motion_blend_factor", 1.5, "motion.motion_blend_factor"),
        ("mbf", -0.1, "motion.motion_blend_factor"),
        ("motion_blend_offset", 1000.5, "motion.motion_blend_offset"),
        ("motion_fps_weight", 5.01, "motion.motion_fps_weight"),
        ("mmxv", 10001, "motion.motion_max_val"),
        ("motion_force_zero", "maybe", "motion.motion_force_zero"),
    ],
)
def test_option_bounds(key, value, field):
    with pytest.raises(OptionError) as exc:
        DECLARATION.resolve_options({key: value})
    assert exc.value.field == field
    assert field in str(exc.value)


def test_option_table_mirrors_libvmaf():
    table = {o.name: (o.alias, o.default, o.min, o.max, o.feature_param) for o in DECLARATION.options}
    assert table == {
        "motion_force_zero": ("force_0", False, None, None, True),
        "motion_blend_factor": ("mbf", 1.0, 0.0, 1.0, True),
        "motion_blend_offset": ("mbo", 40.0, 0.0, 1000.0, True),
        "motion_fps_weight": ("mfw", 1.0, 0.0, 5.0, True),
        "motion_max_val": ("mmxv", 10000.0, 0.0, 10000.0, True),
        "motion_five_frame_window": ("mffw", False, None, None, True),
        "motion_moving_average": ("mma", False, None, None, True),
        "debug": (None, False, None, None, False),
    }
    names = DECLARATION.metric_names(DECLARATION.resolve_options({"mbf": 0.5, "force_0": True}))
    # sorted by option name (motion_blend_factor < motion_force_zero), as libvmaf does
    assert names[SAD_NAME] == SAD_NAME + "_mbf_0.5_force_0"


@pytest.mark.parametrize("pair", pair_params(full=False)[:2])
def test_force_zero_gives_zeros(pair):
    ours = run_feature(DECLARATION, pair, {"motion_force_zero": True, "debug": True})
    assert len(ours) == pair.frames
    for metrics in ours.values():
        assert sorted(metrics) == sorted(n + "_force_0" for n in DEBUG_NAMES)
        assert all(v == 0.0 for v in metrics.values())


@pytest.mark.parametrize("pair", pair_params(full=False)[:1])
def test_fps_weight_and_max_val_scale_and_clip(pair):
    plain = run_feature(DECLARATION, pair, {"debug": True}, frames=4)
    opts = {"debug": True, "motion_fps_weight": 2.0, "motion_max_val": 3.0}
    weighted = run_feature(DECLARATION, pair, opts, frames=4)
    suffix = DECLARATION.name_suffix(DECLARATION.resolve_options(opts))
    for i in range(1, 4):
        want = min(plain[i]["integer_motion"] * 2.0, 3.0)
        assert weighted[i]["integer_motion" + suffix] == want


@pytest.mark.parametrize("spec, lag", [("motion", 1), ("motion=motion_five_frame_window=true", 2), ("psnr", 0)])
def test_a_frame_is_final_as_soon_as_its_window_is_seen(spec, lag):
    """Frame i's scores leave once frame i + 1 is seen (i + 2 for frames 0 and 1 in the
    five-frame window): a producer waiting for frame i's result is not held a frame longer."""
    from vmafx.protocol import Limits
    from vmafxd.core.picture import Picture
    from vmafxd.core.scoring import CpuScorer
    from vmafxd.session import build_plan

    plan = build_plan(["version=vmaf_v0.6.1"] if spec == "motion" else [], [spec], Limits())
    assert plan.max_lag == lag
    rng = np.random.default_rng(3)
    sc = CpuScorer(plan, 64, 48, 8)
    finals = []
    for i in range(4):
        pic = Picture((rng.integers(0, 256, (48, 64), dtype=np.uint8),), 8, None)
        finals.append([k for k, _ in sc.push(i, pic, pic)])
    assert finals == [[k - lag] if k >= lag else [] for k in range(4)]
    assert [k for k, _ in sc.finish()] == list(range(4 - lag, 4))
