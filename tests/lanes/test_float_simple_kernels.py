"""float_psnr, float_ansnr and float_moment kernels against their CPU twins: equal on every frame, bit for bit.

Runs on every GPU runtime with a device and on the emulator.  The vendored
pairs cover 8 and 10 bits, an odd size (641x361), 4:2:0, 4:2:2 and 4:4:4
(these features read the luma only); the 10-bit pair shifted into 12 and 16
bits, and random 12- and 16-bit frames of an odd size, cover the deeper
depths, where the 16-bit sums take the order-keeping path.  The CPU twins
equal libvmaf (tests/features/test_float_{psnr,ansnr,moment}.py), so
equality here is equality with libvmaf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.gpu.engine import GpuUnsupported

from ..reference import full_pairs, vendored_pairs
from .test_float_kernels import _check
from .test_gpu_engine import gpu_scores

FEATURES = ("float_psnr", "float_ansnr", "float_moment")
NAMES = ("float_psnr", "float_ansnr", "float_anpsnr", "float_moment_ref1st", "float_moment_dis1st",
         "float_moment_ref2nd", "float_moment_dis2nd")


def _plan(features=FEATURES):
    return ScoringPlan.build([], [FeatureRequest(f) for f in features])


@dataclass
class _Frames:
    """A pair of picture lists in memory, shaped as the reference pairs are for the scorers."""

    id: str
    refs: list
    dists: list
    bitdepth: int
    pix_fmt: str = "yuv420p"

    @property
    def width(self) -> int:
        return self.refs[0].width

    @property
    def height(self) -> int:
        return self.refs[0].height

    def pictures(self):
        return self.refs, self.dists


def _shifted(pair_id: str, bitdepth: int, shift: int) -> _Frames:
    pair = next(p for p in vendored_pairs() if p.id == pair_id)
    refs, dists = pair.pictures()

    def up(pic):
        return Picture(tuple(p << shift for p in pic.planes), bitdepth, pic.subsampling)

    return _Frames(f"{pair_id}-as{bitdepth}", [up(p) for p in refs], [up(p) for p in dists], bitdepth)


def _random(bitdepth: int, w: int = 37, h: int = 23, frames: int = 3, seed: int = 0) -> _Frames:
    rng = np.random.default_rng(seed)
    shapes = [(h, w), (h >> 1, w >> 1), (h >> 1, w >> 1)]

    def pic():
        return Picture(tuple(rng.integers(0, 1 << bitdepth, s).astype(np.uint16) for s in shapes), bitdepth,
                       Subsampling.S420)

    return _Frames(f"random{bitdepth}", [pic() for _ in range(frames)], [pic() for _ in range(frames)], bitdepth)


@pytest.mark.gpu
@pytest.mark.parametrize("pair", vendored_pairs() + full_pairs(), ids=lambda p: p.id)
def test_equal_the_cpu_lane_on_the_reference_pairs(gpu, pair):
    rt, dev = gpu
    if rt.name == "emu" and pair not in vendored_pairs():
        pytest.skip("the emulator runs the vendored pairs only")
    cpu = _check(rt, dev, _plan(), pair)
    assert set(cpu[min(cpu)]) == set(NAMES)


@pytest.mark.gpu
@pytest.mark.parametrize("frames", [
    lambda: _shifted("p15_coffee720_10bit_x264crf35", 12, 2),
    lambda: _shifted("p15_coffee720_10bit_x264crf35", 16, 6),
    lambda: _random(12),
    lambda: _random(16),
    lambda: _random(16, w=5, h=3, seed=1),
], ids=["10bit-as12", "10bit-as16", "random12", "random16", "random16-5x3"])
def test_equal_the_cpu_lane_at_12_and_16_bits(gpu, frames):
    rt, dev = gpu
    frames = frames()
    cpu = _check(rt, dev, _plan(), frames, batch=2)
    assert len(cpu) == len(frames.refs)


@pytest.mark.gpu
def test_ansnr_refuses_a_luma_its_filter_cannot_mirror(gpu):
    rt, dev = gpu
    dev.make_current()
    with pytest.raises(GpuUnsupported) as e:
        gpu_scores(rt, dev, _plan(("float_ansnr",)), _random(10, w=2, h=8))
    assert e.value.field == "format.width"
