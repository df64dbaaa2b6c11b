"""Float ADM and float motion kernels on the inputs the vendored pairs do not cover, against their CPU twins.

Both read the staged luma themselves (ADM's scale-0 bands and motion's blur
convert each sample as libvmaf's picture_copy does), so every staging element
size and divisor matters: 8-bit (u8), 10-, 12- and 16-bit (u16) samples.
Sizes: ADM's smallest (17x17: a 2x2 scale-3 band whose scored region is the
whole band, so the masking window's mirrored halo is read), odd sizes whose
band rows and region columns end inside a block, and a width whose bands
cross several column blocks.  4:2:2 and 4:4:4 luma are the same plane; the
vendored pairs cover them (tests/lanes/test_float_kernels.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.model import load_model

from .test_float_kernels import _check
from .test_float_simple_kernels import _Frames, _shifted


def _random(bitdepth: int, w: int, h: int, frames: int = 3, seed: int = 0,
            subsampling: Subsampling = Subsampling.S420) -> _Frames:
    """Random frames; the distorted ones are the references plus noise (so ADM's decoupling meets
    both correlated and uncorrelated detail, and motion sees change between frames)."""
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    top = (1 << bitdepth) - 1
    cw, ch = {Subsampling.S420: (w >> 1, h >> 1), Subsampling.S422: (w >> 1, h),
              Subsampling.S444: (w, h)}[subsampling]
    shapes = [(h, w), (ch, cw), (ch, cw)]

    def pair():
        ref = [rng.integers(0, top + 1, s) for s in shapes]
        dist = [np.clip(p + rng.integers(-top // 16, top // 16 + 1, p.shape), 0, top) for p in ref]
        return (Picture(tuple(p.astype(dtype) for p in ref), bitdepth, subsampling),
                Picture(tuple(p.astype(dtype) for p in dist), bitdepth, subsampling))

    pairs = [pair() for _ in range(frames)]
    return _Frames(f"random{bitdepth}-{w}x{h}", [r for r, _ in pairs], [d for _, d in pairs], bitdepth,
                   {Subsampling.S420: "yuv420p", Subsampling.S422: "yuv422p", Subsampling.S444: "yuv444p"}[subsampling])


def _plan(*features, model=False):
    models = [load_model("version=vmaf_float_v0.6.1")] if model else []
    return ScoringPlan.build(models, [FeatureRequest(f, {"debug": "true"}) for f in features])


@pytest.mark.gpu
@pytest.mark.parametrize("frames", [
    lambda: _random(8, 17, 17),
    lambda: _random(8, 19, 18, seed=1),
    lambda: _random(8, 600, 41, seed=2),
    lambda: _random(10, 17, 17, seed=3),
    lambda: _random(10, 37, 23, seed=4, subsampling=Subsampling.S444),
    lambda: _random(12, 45, 29, seed=5, subsampling=Subsampling.S422),
    lambda: _random(16, 33, 21, seed=6),
    lambda: _shifted("p15_coffee720_10bit_x264crf35", 12, 2),
    lambda: _shifted("p15_coffee720_10bit_x264crf35", 16, 6),
], ids=["8bit-17x17", "8bit-19x18", "8bit-600x41", "10bit-17x17", "10bit-444", "12bit-422", "16bit",
        "10bit-as12", "10bit-as16"])
def test_adm_and_motion_equal_the_cpu_lane(gpu, frames):
    rt, dev = gpu
    frames = frames()
    cpu = _check(rt, dev, _plan("float_adm", "float_motion"), frames, batch=2)
    assert len(cpu) == len(frames.refs)


@pytest.mark.gpu
@pytest.mark.parametrize("options", [
    {"adm_skip_scale0": "true"},
    {"adm_bypass_cm": "1"},
    {"adm_enhn_gain_limit": "1.2", "adm_csf_mode": "2"},
])
def test_adm_options_at_the_smallest_size(gpu, options):
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest("float_adm", {**options, "debug": "true"})])
    _check(rt, dev, plan, _random(8, 17, 17, seed=7), batch=2)


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth", [8, 10])
def test_float_model_on_random_frames(gpu, bitdepth):
    rt, dev = gpu
    frames = _random(bitdepth, 65, 37, frames=4, seed=8)
    cpu = _check(rt, dev, _plan("float_vif", "float_adm", "float_motion", model=True), frames, batch=3)
    assert "vmaf" in cpu[min(cpu)]


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth", [8, 10])
@pytest.mark.parametrize("filter_size", ["5", "3"])
@pytest.mark.parametrize("w, h", [(3, 3), (64, 32), (65, 33), (66, 65), (130, 97), (129, 128)])
def test_float_motion_chunk_and_block_edges(gpu, bitdepth, filter_size, w, h):
    """float_motion's kernel walks 64-column chunks of 64-row blocks, whose vertical pass takes
    32-row halves: widths that end a column past a chunk (the right edge's mirrored columns then
    come from the window kept from the chunk before) or two past it, heights whose last block
    has one row or less than a half, and the smallest picture the 5-tap mirror allows."""
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest("float_motion", {"motion_filter_size": filter_size,
                                                                   "debug": "true"})])
    cpu = _check(rt, dev, plan, _random(bitdepth, w, h, frames=4, seed=w * h), batch=3)
    assert len(cpu) == 4
