"""ciede on the GPU lanes (ciede.cu + the host's raster-order sum) against its CPU twin, bit for bit.

Vendored pairs: 8/10-bit, 4:2:0 with an odd size (libvmaf's reads past the
chroma plane), 4:2:2 (reads past the row), 4:4:4, identical frames (+inf).
"""

from __future__ import annotations

import pytest

from vmafxd.lanes.gpu import ciede as gpu_ciede
from vmafxd.scoring import FeatureRequest, ScoringPlan

from ..reference import vendored_pairs
from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu

_redone = []


def _cut(pair, frames):
    refs, dists = pair.pictures()

    class Cut:
        width, height, bitdepth, pix_fmt, id = pair.width, pair.height, pair.bitdepth, pair.pix_fmt, pair.id

        def pictures(self):
            return refs[:frames], dists[:frames]

    return Cut()


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_equals_the_cpu_twin_on_every_frame(gpu, pair, monkeypatch):
    rt, dev = gpu
    dev.make_current()
    original = gpu_ciede.GpuCiede._redo

    def counting(self, de, where, samples, frame):
        _redone.append(len(where[0]))
        return original(self, de, where, samples, frame)

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_redo", counting)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    want = cpu_scores(plan, cut)
    got = gpu_scores(rt, dev, plan, cut, batch=2)
    assert set(got) == set(want)
    for i in want:
        assert got[i] == want[i], i


def test_doubtful_pixels_were_redone():
    """The pairs above include pixels the device flags (about one in 10,000)."""
    if not _redone:
        pytest.skip("runs after the pair tests")
    assert sum(_redone) > 0
