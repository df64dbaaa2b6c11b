"""The CPU lane's compiled engine (vmafxd/lanes/compiled.py) against the numpy twins.

Every feature with a kernel, compiled, must give the twins' numbers bit for bit on
the vendored pairs (odd sizes, 4:4:4, 4:2:2, 10-bit), and so must the mixed scorer
``auto`` makes (some features compiled, the rest on the twins, one assembler).
"""

import logging

import pytest

from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan
from vmafxd.model import load_model

from ..reference import vendored_pairs
from .conftest import load_runtime


def _all_features_plan():
    from vmafxd.features import all_declarations

    model = load_model("version=vmaf_v0.6.1:vif.debug=true:adm.debug=true:motion.debug=true")
    reqs = [FeatureRequest(d.name) for d in sorted(all_declarations(), key=lambda d: d.name)
            if d.cpu is not None and d.name not in ("adm", "vif", "motion")]
    return ScoringPlan.build([model], reqs)


def _run(scorer, refs, dists):
    out = []
    for i, (r, d) in enumerate(zip(refs, dists)):
        out += scorer.push(i, r, d)
    out += scorer.finish()
    return dict(out), dict(scorer.aggregate), scorer.pooled()


def _same(a, b) -> list:
    """Cells that differ (NaN equals NaN: ms_ssim of some pictures)."""
    diffs = []
    for idx, m in a.items():
        for name, v in m.items():
            g = b.get(idx, {}).get(name)
            if not (g == v or (g != g and v != v)):
                diffs.append((idx, name, v, g))
    return diffs


_ODD = [p for p in vendored_pairs() if p.bitdepth > 8 or p.pix_fmt != "yuv420p" or p.width % 2]


@pytest.mark.parametrize("pair, engine", [(vendored_pairs()[0], "auto")] + [(p, "compiled") for p in
                                                                             vendored_pairs()[:1] + _ODD],
                         ids=lambda x: getattr(x, "id", x))
def test_compiled_engine_equals_the_numpy_twins(pair, engine):
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.compiled import CompiledScorer, make_cpu_scorer

    refs, dists = pair.pictures()
    refs, dists = refs[:3], dists[:3]  # motion's lag and its last frame
    plan = _all_features_plan()
    want, want_agg, want_pooled = _run(CpuScorer(plan, pair.width, pair.height, pair.bitdepth), refs, dists)
    scorer = make_cpu_scorer(plan, pair.width, pair.height, pair.bitdepth, refs[0].subsampling, engine)
    assert isinstance(scorer, CompiledScorer)
    compiled = set(scorer.compiled_features)
    if engine == "compiled":
        assert compiled == {i.decl.name for i in plan.instances}
    else:
        # adm and motion have native kernels (vmafxd/lanes/native), which auto prefers
        assert "adm" not in compiled and "vif" not in compiled
        native = {type(e).__module__ for _, e in scorer._numpy._extractors}
        assert {"vmafxd.lanes.native.adm", "vmafxd.lanes.native.motion"} <= native
    got, got_agg, got_pooled = _run(scorer, refs, dists)
    scorer.close()
    assert set(got) == set(want) and all(set(got[i]) == set(want[i]) for i in want)
    diffs = _same(want, got)
    assert not diffs, f"{len(diffs)} cells differ, e.g. {diffs[:5]}"
    assert got_agg.keys() == want_agg.keys() and not _same({0: want_agg}, {0: got_agg})
    assert not _same(want_pooled, got_pooled)


def test_numpy_engine_and_auto_without_a_compiler_are_the_twins(monkeypatch, caplog):
    from vmafxd.lanes import compiled, emulated

    plan = ScoringPlan.build([], [FeatureRequest("adm")])
    assert type(compiled.make_cpu_scorer(plan, 64, 64, 8, refs_subsampling(), "numpy")) is CpuScorer
    monkeypatch.setattr(emulated, "_compiler", lambda: None)
    monkeypatch.setattr(compiled, "_fallback_said", False)
    with caplog.at_level(logging.INFO, logger="vmafxd.lanes.compiled"):
        for _ in range(2):
            assert type(compiled.make_cpu_scorer(plan, 64, 64, 8, refs_subsampling(), "auto")) is CpuScorer
    assert sum("numpy twins" in r.getMessage() for r in caplog.records) == 1  # said once
    from vmafxd.lanes.runtime import RuntimeUnavailable

    with pytest.raises(RuntimeUnavailable):
        compiled.make_cpu_scorer(plan, 64, 64, 8, refs_subsampling(), "compiled")
    with pytest.raises(ValueError, match="engine"):
        compiled.make_cpu_scorer(plan, 64, 64, 8, refs_subsampling(), "fast")


def refs_subsampling():
    from vmafx.formats import Subsampling

    return Subsampling.S420


def test_cpu_engine_setting():
    from vmafxd.config import Config, ConfigError, apply_mapping, load_config

    assert Config().cpu_engine == "auto"
    assert load_config(None, {"cpu_engine": "numpy"}).cpu_engine == "numpy"
    with pytest.raises(ConfigError) as e:
        apply_mapping(Config(), {"cpu_engine": "gpu"}, "test")
    assert e.value.field == "cpu_engine"


def test_score_files_with_each_engine_gives_the_same_report():
    """The in-process path (``vmafxctl score --in-process --cpu-engine``) through offline.score_files."""
    load_runtime("emu")
    from vmafxd.offline import resolve_models, score_files

    pair = vendored_pairs()[0]
    reports = {e: score_files(str(pair.ref_file), str(pair.dist_file), resolve_models([]),
                              [FeatureRequest("psnr_hvs")], max_frames=3, engine=e)
               for e in ("numpy", "compiled", "auto")}
    frames = reports["numpy"].frames
    assert len(frames) == 3 and "vmaf" in frames[0][1] and "psnr_hvs" in frames[0][1]
    for e in ("compiled", "auto"):
        assert reports[e].frames == frames and reports[e].pooled == reports["numpy"].pooled


def test_a_plan_the_kernels_do_not_take_is_scored_by_the_twins(tmp_path):
    """The compiled kernels leave CAMBI's heatmaps to the CPU: the session is a CpuScorer (the
    twins, or with auto CAMBI's native kernel)."""
    load_runtime("emu")
    from vmafxd.lanes.compiled import make_cpu_scorer

    plan = ScoringPlan.build([], [FeatureRequest("cambi", {"heatmaps_path": str(tmp_path)})])
    for engine in ("compiled", "auto"):
        assert type(make_cpu_scorer(plan, 576, 324, 8, refs_subsampling(), engine)) is CpuScorer
