"""Float motion against libvmaf (every frame, full precision), its temporal rules, and its options."""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.features import get
from vmafxd.features.declaration import OptionError
from vmafxd.features.float_motion import DECLARATION, FILTER_5, FloatMotion, blur, sad_score
from vmafxd.features.motion import motion_blend

from ..reference import pair_params
from .harness import compare, compare_pooled, run_feature

ALL_NAMES = list(DECLARATION.provides) + list(DECLARATION.debug_provides)
F32 = np.float32


@pytest.mark.parametrize("pair", pair_params())
def test_default_run_matches_libvmaf(pair):
    # debug is on by default in libvmaf's float_motion: "motion" is printed too
    ours = run_feature(DECLARATION, pair)
    errors = compare(ours, pair, "vmaf_v0.6.1", ALL_NAMES, exact=True)
    errors += compare_pooled(ours, pair, "vmaf_v0.6.1", ALL_NAMES)
    assert not errors, "\n".join(errors[:20])


def test_sad_is_rowwise_float():
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((5, 200)) * 50).astype(F32)
    b = (rng.standard_normal((5, 200)) * 50).astype(F32)
    acc = F32(0.0)
    for i in range(5):
        inner = F32(0.0)
        for j in range(200):
            inner = inner + abs(a[i, j] - b[i, j])
        acc = acc + inner
    assert sad_score(a, b) == float(acc / F32(1000))
    assert sad_score(a, a) == 0.0


def _frames(n, seed=1, shape=(20, 24), bitdepth=8):
    rng = np.random.default_rng(seed)
    hi = (1 << bitdepth) - 1
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    lumas = [rng.integers(0, hi + 1, shape).astype(dtype) for _ in range(n)]
    return lumas


class _Pic:
    def __init__(self, luma, *chroma):
        self.planes = (luma, *chroma)
        self.luma = luma


def _libvmaf_loop(lumas, bitdepth, fw=1.0, bf=1.0, bo=40.0, mx=10000.0):
    """float_motion.c's extract/flush as written: outputs appended per (name, index)."""
    out: dict[int, dict[str, float]] = {}
    blurs = [blur(l, bitdepth) for l in lumas]
    put = lambda i, k, v: out.setdefault(i, {}).__setitem__(k, v)
    weighted = lambda s: min(s * fw, mx) if s * fw < mx else mx
    blended = lambda s: min(motion_blend(s * fw, bf, bo), mx)
    score = 0.0
    for i in range(len(lumas)):
        if i == 0:
            put(0, "motion2", 0.0)
            put(0, "motion", 0.0)
            continue
        score = sad_score(blurs[i - 1], blurs[i])
        put(i, "motion", weighted(score))
        if i == 1:
            put(0, "motion3", blended(score))
            continue
        score2 = sad_score(blurs[i - 1], blurs[i - 2])
        score2 = score2 if score2 < score else score
        put(i - 1, "motion2", weighted(score2))
        put(i - 1, "motion3", blended(score2))
    last = len(lumas) - 1
    if last > 0:
        put(last, "motion2", weighted(score))
        put(last, "motion3", blended(score))
    else:
        put(0, "motion3", 0.0)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 6])
@pytest.mark.parametrize("bitdepth", [8, 10])
def test_timeline_matches_libvmafs_loop(n, bitdepth):
    lumas = _frames(n, seed=n, bitdepth=bitdepth)
    opts = {"motion_fps_weight": 1.5, "motion_blend_factor": 0.5, "motion_blend_offset": 3.0, "motion_max_val": 40.0}
    ext = FloatMotion(DECLARATION.resolve_options(opts), 24, 20, bitdepth)
    got: dict[int, dict[str, float]] = {}
    for i, l in enumerate(lumas):
        for idx, m in ext.extract(i, _Pic(l), None):
            got.setdefault(idx, {}).update(m)
    for idx, m in ext.flush():
        got.setdefault(idx, {}).update(m)
    assert got == _libvmaf_loop(lumas, bitdepth, 1.5, 0.5, 3.0, 40.0)


def test_force_zero_and_no_debug():
    lumas = _frames(3)
    ext = FloatMotion(DECLARATION.resolve_options({"motion_force_zero": True, "debug": False}), 24, 20, 8)
    out = [ext.extract(i, _Pic(l), None) for i, l in enumerate(lumas)]
    assert out == [[(i, {"motion2": 0.0, "motion3": 0.0})] for i in range(3)]
    assert list(ext.flush()) == []
    names = DECLARATION.metric_names(DECLARATION.resolve_options({"motion_force_zero": True, "debug": False}))
    assert names == {"motion2": "motion2_force_0", "motion3": "motion3_force_0"}


def test_filter_size_and_uv():
    lumas = _frames(2)
    ident = FloatMotion(DECLARATION.resolve_options({"motion_filter_size": 1}), 24, 20, 8)
    list(ident.extract(0, _Pic(lumas[0]), None))
    (idx, m), = ident.extract(1, _Pic(lumas[1]), None)
    raw = np.abs(lumas[0].astype(np.float64) - lumas[1]).mean()
    assert m["motion3"] == pytest.approx(raw, rel=1e-6)
    # motion_add_uv adds the chroma planes' scores
    u0, u1 = _frames(2, seed=7, shape=(10, 12))
    v0, v1 = _frames(2, seed=8, shape=(10, 12))
    uv = FloatMotion(DECLARATION.resolve_options({"motion_add_uv": True}), 24, 20, 8)
    list(uv.extract(0, _Pic(lumas[0], u0, v0), None))
    list(uv.extract(1, _Pic(lumas[1], u1, v1), None))
    (idx, m), = uv.flush()
    assert idx == 1
    parts = [sad_score(blur(a, 8), blur(b, 8)) for a, b in ((lumas[0], lumas[1]), (u0, u1), (v0, v1))]
    assert m["motion"] == parts[0] + parts[1] + parts[2]


def test_blur_taps():
    assert FILTER_5.dtype == np.float32 and abs(float(FILTER_5.sum()) - 1.0) < 1e-6


def test_options():
    assert get("float_motion") is DECLARATION
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options({"motion_add_scale1": True})
    assert e.value.field == "float_motion.motion_add_scale1"
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options({"mfw": 6})
    assert e.value.field == "float_motion.motion_fps_weight"
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options({"motion_five_frame_window": True})
    assert e.value.field == "float_motion.motion_five_frame_window"
    values = DECLARATION.resolve_options({"mmxv": 5})
    assert DECLARATION.metric_names(values)["motion2"] == "motion2_mmxv_5"
