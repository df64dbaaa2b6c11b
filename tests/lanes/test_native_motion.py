"""The native motion SAD (vmafxd/lanes/native/motion.cpp) against the numpy twin.

The SAD is compared with the twin's :func:`compute_stats` on synthetic pictures
(edge sizes, every depth, extreme samples, strided planes), and the extractor's
metrics with the twin's for every option, on a vendored pair.
"""

import numpy as np
import pytest

from vmafxd.features.motion import IntegerMotion, compute_stats

from ..reference import vendored_pairs
from .conftest import load_runtime


@pytest.fixture(scope="module")
def native_motion():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import motion

    return motion


@pytest.mark.parametrize("bitdepth", [8, 10, 12, 15, 16])
@pytest.mark.parametrize("size", [(3, 3), (4, 7), (37, 5), (66, 33)])
def test_sad_equals_the_twins(native_motion, bitdepth, size):
    w, h = size
    rng = np.random.default_rng(bitdepth * 1000 + w)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    top = (1 << bitdepth) - 1
    pairs = [(rng.integers(0, top + 1, (h, w)), rng.integers(0, top + 1, (h, w))),
             (np.full((h, w), top), np.zeros((h, w))),  # the largest differences, both signs
             (np.zeros((h, w)), np.full((h, w), top))]
    for a, b in pairs:
        a, b = a.astype(dtype), b.astype(dtype)
        want = compute_stats(a, b, bitdepth)
        assert native_motion.sad(a, b, bitdepth) == want
    assert want != 0


def test_sad_reads_strided_planes(native_motion):
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1024, (40, 90)).astype(np.uint16)
    b = rng.integers(0, 1024, (60, 90)).astype(np.uint16)
    view_a, view_b = a[3:30, 5:77], b[::2, 1::1][:27, :72]
    assert native_motion.sad(view_a, view_b, 10) == compute_stats(view_a, view_b, 10)


def _run(extractor, refs, dists):
    out = []
    for i, (r, d) in enumerate(zip(refs, dists)):
        out += extractor.extract(i, r, d)
    out += extractor.flush()
    return out


@pytest.mark.parametrize("options", [
    {},
    {"motion_five_frame_window": True},
    {"motion_moving_average": True, "debug": True},
    {"motion_blend_factor": 0.25, "motion_blend_offset": 2.0, "motion_fps_weight": 2.5},
    {"motion_max_val": 1.5, "motion_five_frame_window": True, "motion_moving_average": True},
    {"motion_force_zero": True},
], ids=lambda o: ",".join(o) or "defaults")
def test_extractor_equals_the_twin_for_every_option(native_motion, options):
    pair = vendored_pairs()[0]
    refs, dists = pair.pictures()
    refs, dists = refs[:5], dists[:5]
    args = (options, pair.width, pair.height, pair.bitdepth)
    want = _run(IntegerMotion(*args), refs, dists)
    got = _run(native_motion.NativeMotion(*args), refs, dists)
    assert got == want
    assert len(got) == 5 and (options.get("motion_force_zero") or any(m["integer_motion2"] > 0 for _, m in got))


def test_too_small_or_too_deep_is_left_to_the_twin(native_motion):
    from vmafxd.lanes.native import NativeUnsupported

    for args in ((2, 9, 8), (9, 2, 8), (9, 9, 17)):
        with pytest.raises(NativeUnsupported):
            native_motion.NativeMotion({}, *args)
