"""The vmaf_v1.0.16 models end to end against libvmaf: CAMBI, SpEED on chroma, ADM3 and motion3
through the plan, the chroma-from-luma correction, the SVM, transform and clip.

The vectors (``tests/data/scores/speed_libvmaf.json``) are libvmaf's full
doubles for every model on the first frames of vendored pairs; the 2160 and
prescaled models' chroma planes are too small at 576x324 to hold a SpEED
block with data, so their ``speed_chroma`` is 0 and the correction replaces it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vmafxd.core.scoring import CpuScorer, ScoringPlan
from vmafxd.model import load_model
from vmafxd.model.predict import correct_chroma_from_luma, normalise

from ..reference import VENDORED, full_pairs, vendored_pairs

VECTORS = json.loads((VENDORED / "scores" / "speed_libvmaf.json").read_text())
FULL_VECTORS = json.loads((VENDORED / "scores" / "speed_libvmaf_full.json").read_text())
PAIRS = {p.id: p for p in vendored_pairs()}
FULL_PAIRS = {p.id: p for p in full_pairs()}


def _model_params():
    for case in VECTORS["models"]:
        yield pytest.param(case, PAIRS[case["pair"]], id=f"{case['pair']}-{case['model']}")
    for case in FULL_VECTORS["models"] if FULL_PAIRS else ():
        yield pytest.param(case, FULL_PAIRS[case["pair"]], id=f"full-{case['pair']}-{case['model']}",
                           marks=pytest.mark.reference)


def _run(version: str, pair, frames: int):
    models = [load_model(f"version={version}:name={version}")]
    plan = ScoringPlan.build(models, [])
    refs, dists = pair.pictures()
    sc = CpuScorer(plan, pair.width, pair.height, pair.bitdepth)
    out = []
    for i in range(frames):
        out += sc.push(i, refs[i], dists[i])
    out += sc.finish()
    return plan, [m for _, m in sorted(out, key=lambda t: t[0])][:frames]


@pytest.mark.parametrize("case, pair", list(_model_params()))
def test_model_scores_and_their_inputs_equal_libvmaf(case, pair):
    plan, ours = _run(case["model"], pair, len(case["frames"]))
    inputs = plan.model_inputs[case["model"]][0]
    for i, theirs in enumerate(case["frames"]):
        for name in inputs:
            assert ours[i][name] == theirs[name], (i, name)
        assert ours[i][case["model"]] == theirs["vmaf"], i


def test_all_eight_models_and_both_correction_branches_are_covered():
    models = {c["model"] for c in VECTORS["models"]}
    assert len(models) == 8
    speed = [v for c in VECTORS["models"] for f in c["frames"] for k, v in f.items() if k.startswith("speed_chroma_uv")]
    assert 0 in speed and any(v > 0 for v in speed)


def test_the_eight_models_share_one_cambi_one_motion_and_two_adm_instances():
    versions = sorted({c["model"] for c in VECTORS["models"]})
    plan = ScoringPlan.build([load_model(f"version={v}:name={v}") for v in versions], [])
    keys = sorted(i.key for i in plan.instances)
    # cambi and motion3's options are the same in all eight; ADM differs by viewing distance and
    # display height; SpEED by prescale
    assert [k for k in keys if k[0] == "cambi"] == [("cambi", "_hrs_1080_cmxv_17_vlt_0.06")]
    assert len([k for k in keys if k[0] == "motion"]) == 2  # the hfr models' five-frame window
    assert len([k for k in keys if k[0] == "speed_chroma"]) == 3  # prescale 1, 0.5, 0.6


def test_correction_replaces_only_a_zero_speed_input():
    model = load_model("version=vmaf_v1.0.16_3d0h").primary
    names = [f.name for f in model.features]
    adm3, speed = names.index("VMAF_integer_feature_adm3_score"), \
        names.index("Speed_chroma_feature_speed_chroma_uv_score")
    raw = np.array([[0.3, 0.0, 0.9, 2.0], [0.3, 1.5, 0.9, 2.0]])
    raw[:, [adm3, speed]] = [[0.9, 0.0], [0.9, 1.5]]
    x = normalise(model, raw)
    before = x.copy()
    correct_chroma_from_luma(model, x)
    assert np.array_equal(x[1], before[1])  # a non-zero SpEED is left alone
    t = model.features[speed]
    # 120 - 120 * 0.9 (adm3 denormalised from its normalised value, as libvmaf does)
    g = model.features[adm3]
    adm = (before[0, adm3] - g.intercept) / g.slope
    assert x[0, speed] == t.slope * ((-120.0 * adm) + 120.0) + t.intercept
    assert x[0, speed] != before[0, speed]


def test_the_command_line_gives_libvmafs_log_byte_for_byte(tmp_path):
    """``vmafx-vmaf`` with a v1.0.16 model and both SpEED features: libvmaf's own log
    (``tests/data/scores/speed_cli_p01.json``, printed by libvmaf f85a8536 with this very
    command line) equals ours byte for byte but the ``version`` and ``fps`` lines."""
    import lzma
    import subprocess
    import sys
    from pathlib import Path

    from ..client.test_libvmaf_commands import _normalise

    root = Path(__file__).resolve().parents[2]
    clips = {}
    for name in ("src_testsrc2_576x324", "dst_testsrc2_576x324_x264crf35"):
        clips[name] = tmp_path / f"{name}.y4m"
        clips[name].write_bytes(lzma.open(VENDORED / "clips" / f"{name}.y4m.xz").read())
    args = ["-r", str(clips["src_testsrc2_576x324"]), "-d", str(clips["dst_testsrc2_576x324_x264crf35"]),
            "--frame_cnt", "3", "-m", "version=vmaf_v1.0.16_hfr_5d0h", "--feature", "speed_temporal",
            "--feature", "speed_chroma=speed_weight_var_mode=3", "-q", "--json", "-o", str(tmp_path / "out.json")]
    r = subprocess.run([sys.executable, "-c", "import sys; from vmafx.cli import vmaf_main; sys.exit(vmaf_main())",
                        *args, "--in-process"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": f"{root}:{root / 'client'}"})
    assert r.returncode == 0, r.stderr
    ours = _normalise((tmp_path / "out.json").read_text())
    theirs = _normalise((VENDORED / "scores" / "speed_cli_p01.json").read_text())
    assert ours == theirs
