"""ciede on the GPU lanes (ciede.cu + the host's raster-order sum) against its CPU twin, bit for bit.

Vendored pairs: 8/10-bit, 4:2:0 with an odd size (libvmaf's reads past the
chroma plane), 4:2:2 (reads past the row), 4:4:4, identical frames (+inf).
"""

from __future__ import annotations

import pytest

import numpy as np

from vmafxd.features._ciede_color import ciede2000_scalar, lab_scalar
from vmafxd.lanes.gpu import ciede as gpu_ciede
from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from ..reference import vendored_pairs
from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu

_listed: list[int] = []
_exact: list[bool] = []


def _cut(pair, frames):
    refs, dists = pair.pictures()

    class Cut:
        width, height, bitdepth, pix_fmt, id = pair.width, pair.height, pair.bitdepth, pair.pix_fmt, pair.id

        def pictures(self):
            return refs[:frames], dists[:frames]

    return Cut()


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_equals_the_cpu_twin_on_every_frame(gpu, pair, monkeypatch):
    """The fast path: the device's exact sum plus the listed doubtful pixels."""
    rt, dev = gpu
    dev.make_current()
    original = gpu_ciede.GpuCiede._exact_total

    def counting(self, rec, entries):
        _listed.append(int(rec[2]))
        got = original(self, rec, entries)
        _exact.append(got is not None)
        return got

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_exact_total", counting)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    want = cpu_scores(plan, cut)
    got = gpu_scores(rt, dev, plan, cut, batch=2)
    assert set(got) == set(want)
    for i in want:
        assert got[i] == want[i], i


def test_the_fast_path_was_taken_and_met_doubtful_pixels():
    """The pairs above: the exact sum served (nearly) every frame, and the
    device listed pixels it could not trust (about one in 10,000)."""
    if not _exact:
        pytest.skip("runs after the pair tests")
    assert sum(_exact) >= len(_exact) - 1
    assert sum(_listed) > 0


@pytest.mark.parametrize("pair", [p for p in vendored_pairs() if p.id.startswith(("p16", "p18"))],
                         ids=lambda p: p.id)
def test_slow_path_equals_the_cpu_twin(gpu, pair, monkeypatch):
    """Every frame through the slow path (floats and samples back to the host)."""
    rt, dev = gpu
    dev.make_current()
    monkeypatch.setattr(gpu_ciede.GpuCiede, "_exact_total", lambda self, rec, entries: None)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)


def test_many_doubtful_pixels_redone_as_the_scalar_c_transcription(gpu, monkeypatch):
    """The device's doubt window widened 100-fold (a -D build knob of ciede.cu):
    hundreds of listed pixels per frame, every one redone in the batch equals
    the scalar C-library transcription of its samples, and the scores equal
    the CPU twin's."""
    rt, dev = gpu
    dev.make_current()
    monkeypatch.setattr(rt, "compile_options", (*rt.compile_options, "-DCIEDE_DEVICE_DOUBT=1e-4"))
    listed = []
    original = gpu_ciede.GpuCiede._redo_listed

    def keeping(self, recs, lists):
        redone = original(self, recs, lists)
        for rec, entries, de in zip(recs, lists, redone):
            listed.append((int(rec[2]), entries[: int(rec[2])].copy(), de))
        return redone

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_redo_listed", keeping)
    pair = next(p for p in vendored_pairs() if p.id.startswith("p16"))
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)
    assert len(listed) == 2
    for count, entries, de in listed:
        assert 300 < count <= 1024 and de is not None and de.size == count
        want = [ciede2000_scalar(lab_scalar(*e[1:4], pair.bitdepth), lab_scalar(*e[4:7], pair.bitdepth))
                for e in entries.astype(np.float64).tolist()]
        assert np.array_equal(de, np.array(want, np.float32))
