"""Every model libvmaf compiles in: loading, the float models' wiring, and shared features computed once.

What is checked against libvmaf and what is not: the reference set holds no
float-model ``vmaf`` (only the four integer models were run).  The float
models carry the very SVM, normalisation and clip of their integer twins
(checked below), whose predictions ``test_predict.py`` compares with
libvmaf's printed ``vmaf``; and our float features equal libvmaf's float
features bit for bit (``tests/features/test_float_*.py``).  So the float
VMAF here is libvmaf's arithmetic on libvmaf's numbers, and the end-to-end
test checks that the plan feeds the model those numbers in the right order.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from vmafxd.model import BUILTIN_VERSIONS, load_model, predict_set
from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan

from ..reference import pair_params, vendored_pairs

FLOAT_TWINS = {
    "vmaf_float_v0.6.1": "vmaf_v0.6.1",
    "vmaf_float_v0.6.1neg": "vmaf_v0.6.1neg",
    "vmaf_float_4k_v0.6.1": "vmaf_4k_v0.6.1",
    "vmaf_float_b_v0.6.3": "vmaf_b_v0.6.3",
}
FLOAT_INPUTS = ["adm2", "motion2", "vif_scale0", "vif_scale1", "vif_scale2", "vif_scale3"]


def test_the_built_in_list_is_libvmafs():
    assert len(BUILTIN_VERSIONS) == 17 and len(set(BUILTIN_VERSIONS)) == 17
    for v in ("vmaf_float_v0.6.1", "vmaf_float_v0.6.1neg", "vmaf_float_b_v0.6.3", "vmaf_float_4k_v0.6.1",
              "vmaf_4k_v0.6.1neg", "vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_hfr_1d5h_2160"):
        assert v in BUILTIN_VERSIONS


@pytest.mark.parametrize("version", BUILTIN_VERSIONS)
def test_every_built_in_model_loads(version):
    ms = load_model(f"version={version}")
    assert ms.version == version and ms.primary.features
    assert ms.bootstrap == ("_b_" in version)
    if version.startswith("vmaf_v1.0.16"):
        assert ms.primary.chroma_correction == 120.0
        assert ms.primary.transform.enabled


@pytest.mark.parametrize("version", BUILTIN_VERSIONS)
def test_plans_resolve_or_refuse_with_a_field(version):
    ms = load_model(f"version={version}")
    plan = ScoringPlan.build([ms], [])
    if version.startswith("vmaf_v1.0.16"):
        assert sorted(i.decl.name for i in plan.instances) == ["adm", "cambi", "motion", "speed_chroma"]
        assert plan.model_inputs[ms.name][0][1].startswith("speed_chroma_uv_mxv_45_nnf_0.1")
        return
    inputs = plan.model_inputs[ms.name][0]
    if "float" in version:
        suffix = "_egl_1" if version.endswith("neg") else ""
        assert inputs == [n + (suffix if n != "motion2" else "") for n in FLOAT_INPUTS]
        assert sorted(i.decl.name for i in plan.instances) == ["float_adm", "float_motion", "float_vif"]


@pytest.mark.parametrize("float_version, int_version", sorted(FLOAT_TWINS.items()))
def test_float_models_are_their_integer_twins_on_other_features(float_version, int_version):
    def model_dicts(version):
        doc = json.loads(resources.files("vmafxd.model").joinpath("builtin", f"{version}.json").read_text())
        members = [doc] if "model_dict" in doc else [doc[k] for k in sorted(doc, key=int)]
        return [m["model_dict"] for m in members]

    for f, i in zip(model_dicts(float_version), model_dicts(int_version), strict=True):
        assert [n.replace("VMAF_feature_", "") for n in f["feature_names"]] == \
            [n.replace("VMAF_integer_feature_", "") for n in i["feature_names"]]
        for key in ("model", "slopes", "intercepts", "norm_type", "score_clip", "score_transform",
                    "feature_opts_dicts"):
            assert f.get(key) == i.get(key), key
    # and so, on the same numbers, the same predictions
    x = np.array([[0.93, 3.1, 0.41, 0.77, 0.86, 0.9], [0.71, 12.0, 0.2, 0.5, 0.6, 0.66]])
    a = predict_set(load_model(f"version={float_version}"), x)
    b = predict_set(load_model(f"version={int_version}"), x)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_shared_features_are_computed_once():
    models = [load_model(f"version={v}:name={v}") for v in
              ("vmaf_float_v0.6.1", "vmaf_float_b_v0.6.3", "vmaf_float_4k_v0.6.1")]
    plan = ScoringPlan.build(models, [FeatureRequest("float_vif", {"debug": "true"}), FeatureRequest("float_motion")])
    assert sorted(i.decl.name for i in plan.instances) == ["float_adm", "float_motion", "float_vif"]
    vif = next(i for i in plan.instances if i.decl.name == "float_vif")
    assert vif.values["debug"] is True  # the request's debug merged into the models' instance
    # the neg model's gain limit changes names: its ADM and VIF run again, its motion does not
    neg = load_model("version=vmaf_float_v0.6.1neg:name=neg")
    plan2 = ScoringPlan.build([*models, neg], [])
    keys = sorted(i.key for i in plan2.instances)
    assert keys == [("float_adm", ""), ("float_adm", "_egl_1"), ("float_motion", ""),
                    ("float_vif", ""), ("float_vif", "_egl_1")]
    # integer and float models side by side share nothing (different extractors)
    plan3 = ScoringPlan.build([models[0], load_model("version=vmaf_v0.6.1:name=i")], [])
    assert len(plan3.instances) == 6


@pytest.mark.parametrize("pair", pair_params(full=False)[:2])
def test_float_vmaf_end_to_end_is_the_model_on_libvmafs_float_features(pair):
    """Our float features through the plan give exactly the model's prediction on libvmaf's float features."""
    ms = load_model("version=vmaf_float_v0.6.1")
    plan = ScoringPlan.build([ms], [])
    refs, dists = pair.pictures()
    sc = CpuScorer(plan, pair.width, pair.height, pair.bitdepth)
    frames = []
    for i in range(pair.frames):
        frames += sc.push(i, refs[i], dists[i])
    frames += sc.finish()
    theirs = pair.fullprec("vmaf_v0.6.1")["frames"][: pair.scored_frames]
    x = np.array([[fr["metrics"][n] for n in FLOAT_INPUTS] for fr in theirs])
    want = predict_set(ms, x)["vmaf"]
    got = np.array([m["vmaf"] for _, m in frames[: pair.scored_frames]])
    assert np.array_equal(got, want)
    # a sanity bound against libvmaf's integer VMAF on the same frames (a mis-wired model is far off)
    int_vmaf = np.array([fr["metrics"]["vmaf"] for fr in theirs])
    assert np.max(np.abs(got - int_vmaf)) < 1.5


def test_float_vmaf_tracks_integer_vmaf_on_the_reference_features():
    for pair in vendored_pairs():
        theirs = pair.fullprec("vmaf_v0.6.1")["frames"][: pair.scored_frames]
        x = np.array([[fr["metrics"][n] for n in FLOAT_INPUTS] for fr in theirs])
        got = predict_set(load_model("version=vmaf_float_v0.6.1"), x)["vmaf"]
        want = np.array([fr["metrics"]["vmaf"] for fr in theirs])
        assert np.max(np.abs(got - want)) < 1.5, pair.id
        # swapping two inputs breaks that agreement: the test can see a mis-wiring
        swapped = x[:, [1, 0, 2, 3, 4, 5]]
        if pair.id.startswith("p01"):
            bad = predict_set(load_model("version=vmaf_float_v0.6.1"), swapped)["vmaf"]
            assert np.max(np.abs(bad - want)) > 1.5
