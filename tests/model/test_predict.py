"""Model prediction against libvmaf, fed with libvmaf's own full-precision features."""

import numpy as np
import pytest

from vmafxd.model import ModelError, load_model, parse_model_spec, pool, predict_set
from vmafxd.model.predict import apply_transform

from ..reference import MODELS, pair_params


def _inputs(ms, model_version):
    suffix = "_egl_1" if model_version.endswith("neg") else ""
    names = []
    for f in ms.primary.features:
        gains = ("adm" in f.metric or "vif" in f.metric) and suffix
        names.append(f.metric + (suffix if gains else ""))
    return names


@pytest.mark.parametrize("pair", pair_params())
@pytest.mark.parametrize("version", MODELS)
def test_prediction_matches_libvmaf(pair, version):
    ms = load_model(f"version={version}")
    scores = pair.fullprec(version)
    frames = scores["frames"][: pair.scored_frames]
    names = _inputs(ms, version)
    x = np.array([[fr["metrics"][n] for n in names] for fr in frames])
    out = predict_set(ms, x)
    expected_keys = {"vmaf"} | ({"vmaf_bagging", "vmaf_stddev", "vmaf_ci_p95_lo", "vmaf_ci_p95_hi"}
                                | {f"vmaf_{i:04d}" for i in range(1, 21)} if ms.bootstrap else set())
    assert set(out) == expected_keys
    for key, values in out.items():
        want = np.array([fr["metrics"][key] for fr in frames])
        np.testing.assert_allclose(values, want, rtol=0, atol=1e-9, err_msg=key)


def test_transform_is_off_unless_enabled():
    plain = load_model("version=vmaf_v0.6.1")
    on = load_model("version=vmaf_v0.6.1:enable_transform=true")
    assert not plain.primary.transform.enabled and on.primary.transform.enabled
    y = np.array([50.0, 80.0])
    assert np.array_equal(apply_transform(plain.primary.transform, y), y)
    # p0 + p1*y + p2*y^2 with the model's coefficients, never below y (out_gte_in)
    t = on.primary.transform
    want = np.maximum(t.p0 + t.p1 * y + t.p2 * y * y, y)
    np.testing.assert_allclose(apply_transform(t, y), want)


def test_bootstrap_members_and_names():
    ms = load_model("version=vmaf_b_v0.6.3:name=b")
    assert ms.bootstrap and len(ms.members) == 20
    assert ms.primary.name == "b" and ms.members[0].name == "b_0001" and ms.members[-1].name == "b_0020"


@pytest.mark.parametrize(
    "spec, field",
    [
        ("version=vmaf_v9", "model.version"),
        ("name=x", "model"),
        ("version=vmaf_v0.6.1:path=/x", "model"),
        ("version=vmaf_v0.6.1:bogus=1", "model.bogus"),
        ("version=vmaf_v0.6.1:enable_transform=maybe", "model.enable_transform"),
        ("path=/nonexistent/model.json", "model.path"),
    ],
)
def test_bad_model_specs_name_the_field(spec, field):
    with pytest.raises(ModelError) as e:
        load_model(spec)
    assert e.value.field == field


def test_overloads_are_parsed():
    spec = parse_model_spec("version=vmaf_v0.6.1:motion.debug=true:vif.debug=true")
    assert spec.overloads == {"motion": {"debug": "true"}, "vif": {"debug": "true"}}


def test_pooling_matches_libvmaf_definitions():
    got = pool([1.0, 3.0, 2.0])
    assert got["min"] == 1.0 and got["max"] == 3.0 and got["mean"] == 2.0
    assert got["harmonic_mean"] == pytest.approx(3 / (1 / 2 + 1 / 4 + 1 / 3) - 1)


def test_pooling_infinite_scores_like_c_doubles():
    """Identical frames score PSNR-HVS/CIEDE2000 +inf: libvmaf pools them to +inf (printed null)."""
    import math

    from vmafxd.model import pool

    got = pool([math.inf, math.inf])
    assert all(math.isinf(v) and v > 0 for v in got.values()), got
    mixed = pool([30.0, math.inf])
    assert mixed["min"] == 30.0 and math.isinf(mixed["max"]) and math.isinf(mixed["mean"])
    assert mixed["harmonic_mean"] == 2.0 / (1.0 / 31.0) - 1.0  # the infinite frame adds 0 to the sum


def test_clip_of_a_few_frames_selects_as_the_arrays_do():
    """apply_clip's few-frame path (Python floats) gives np.where's bits: NaN kept, -0.0 kept,
    the bounds themselves, and a low bound above the high one (then the high one wins)."""
    import dataclasses

    from vmafxd.model.predict import apply_clip

    model = load_model("version=vmaf_v0.6.1").primary
    values = [np.nan, -0.0, 0.0, -1e-300, 100.0, 100.00000000000001, 57.3, -5.0, 1e308, -np.inf, np.inf]
    for clip in (model.clip, (0.0, 100.0), (10.0, 5.0), (-0.0, 0.0)):
        m = dataclasses.replace(model, clip=clip)
        for k in range(len(values)):
            for n in (1, 2, 3, 4):
                y = np.array((values[k:] + values[:k])[:n], dtype=np.float64)
                want = np.where(y < clip[0], clip[0], y)
                want = np.where(want > clip[1], clip[1], want)
                got = apply_clip(m, y)
                assert got.dtype == np.float64 and got.tobytes() == want.tobytes(), (clip, y)
