"""The CPU lane's native kernels (vmafxd/lanes/native) against the numpy twins.

Every feature in NATIVE_FEATURES must give its twin's numbers bit for bit on the
vendored pairs (the first 8-bit pair and every odd one: odd sizes, 4:2:2, 4:4:4,
10-bit), with its default options, through the CPU lane's ``auto`` scorer; the
hook itself is checked with a stand-in extractor.  Each native feature's own
test file covers its options.
"""

import pytest

from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan

from ..reference import vendored_pairs
from .conftest import load_runtime


def _run(scorer, refs, dists):
    out = []
    for i, (r, d) in enumerate(zip(refs, dists)):
        out += scorer.push(i, r, d)
    out += scorer.finish()
    return dict(out), dict(scorer.aggregate), scorer.pooled()


def _native():
    from vmafxd.lanes.native import NATIVE_FEATURES

    return sorted(NATIVE_FEATURES)


_ODD = [p for p in vendored_pairs() if p.bitdepth > 8 or p.pix_fmt != "yuv420p" or p.width % 2]


@pytest.mark.parametrize("pair", vendored_pairs()[:1] + _ODD, ids=lambda p: p.id)
@pytest.mark.parametrize("feature", _native())
def test_each_native_feature_equals_its_twin(feature, pair):
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.compiled import make_cpu_scorer

    refs, dists = pair.pictures()
    refs, dists = refs[:3], dists[:3]
    plan = ScoringPlan.build([], [FeatureRequest(feature)])
    want = _run(CpuScorer(plan, pair.width, pair.height, pair.bitdepth), refs, dists)
    scorer = make_cpu_scorer(plan, pair.width, pair.height, pair.bitdepth, refs[0].subsampling, "auto")
    kinds = {type(e).__module__ for _, e in scorer._extractors}
    assert kinds == {f"vmafxd.lanes.native.{feature}"} or any(k.startswith("vmafxd.lanes.native.") for k in kinds)
    assert _run(scorer, refs, dists) == want


def test_the_alternative_hook_takes_an_extractor_or_falls_back_to_the_twin():
    calls = []

    class Halved:
        def __init__(self, twin):
            self.twin = twin

        def extract(self, index, ref, dist):
            return [(i, {k: v / 2 for k, v in m.items()}) for i, m in self.twin.extract(index, ref, dist)]

        def flush(self):
            return self.twin.flush()

    def alternative(decl, options, width, height, bitdepth):
        calls.append(decl.name)
        return Halved(decl.cpu(options, width, height, bitdepth)) if decl.name == "psnr" else None

    pair = vendored_pairs()[0]
    refs, dists = pair.pictures()
    plan = ScoringPlan.build([], [FeatureRequest("psnr"), FeatureRequest("float_psnr")])
    want, _, _ = _run(CpuScorer(plan, pair.width, pair.height, pair.bitdepth), refs[:2], dists[:2])
    got, _, _ = _run(CpuScorer(plan, pair.width, pair.height, pair.bitdepth, alternative), refs[:2], dists[:2])
    assert sorted(calls) == ["float_psnr", "psnr"]
    assert got[0]["psnr_y"] == want[0]["psnr_y"] / 2 and got[0]["float_psnr"] == want[0]["float_psnr"]


def test_no_compiler_means_no_native_extractor(monkeypatch):
    from vmafxd.features import get
    from vmafxd.lanes import emulated, native

    monkeypatch.setattr(emulated, "_compiler", lambda: None)
    monkeypatch.setitem(native.NATIVE_FEATURES, "psnr", "nowhere:Nothing")
    assert native.extractor(get("psnr"), {}, 64, 64, 8) is None
