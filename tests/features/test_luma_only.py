"""``FeatureDeclaration.luma_only``: a feature that says it reads the luma planes alone gives the
same scores, every metric and debug output, when the chroma planes are noise.

The GPU file path leaves chroma bytes unread for a plan of such features only
(vmafxd/lanes/gpu/in_process.py), so a wrong ``luma_only=True`` would score whatever the
slot last held there: this test is what makes the flag safe.  Scored on the CPU lane (the
twins the kernels equal), on 8-bit 4:2:0 with odd sizes, 4:2:2, 4:4:4 and 10-bit pairs.
"""

from __future__ import annotations

import lzma

import numpy as np
import pytest

from vmafx import in_process
from vmafx.io.inputs import open_input
from vmafx.io.y4m_writer import write_y4m
from vmafxd.features import all_declarations

from ..reference import vendored_pairs

LUMA_ONLY = sorted(d.name for d in all_declarations() if d.luma_only)
PAIRS = [p for p in vendored_pairs() if p.id.startswith(("p16_", "p17_", "p18_", "p15_"))]


def test_the_vmaf_models_features_say_luma_only():
    # what the flag is for: vmaf_v0.6.1's features (and their float twins) leave chroma unread
    assert {"vif", "adm", "motion", "float_vif", "float_adm", "float_motion"} <= set(LUMA_ONLY)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """Each pair's files uncompressed, and copies whose chroma planes are noise."""
    out = {}
    rng = np.random.default_rng(7)
    for pair in PAIRS:
        d = tmp_path_factory.mktemp(pair.id)
        files = {}
        for role, src in (("ref", pair.ref_file), ("dist", pair.dist_file)):
            plain = d / f"{role}.y4m"
            plain.write_bytes(lzma.decompress(src.read_bytes()))
            with open_input(str(plain)) as inp:
                info, frames = inp.info, []
                while (planes := inp.read_frame()) is not None:
                    frames.append([planes[0]] + [rng.integers(0, 1 << info.bitdepth, p.shape, dtype=p.dtype)
                                                 for p in planes[1:]])
            noise = d / f"{role}_noise.y4m"
            write_y4m(str(noise), info, frames)
            files[role], files[role + "_noise"] = str(plain), str(noise)
        out[pair.id] = files
    return out


def _score(ref, dist, feature):
    """Every output of ``feature`` (its debug ones too, where it has them) on the CPU lane."""
    from vmafxd.features import get

    debug = any(o.name == "debug" for o in get(feature).options)
    with open_input(ref) as r, open_input(dist) as d:
        report, _n = in_process.score_in_process(r, d, [], [f"{feature}=debug=true" if debug else feature],
                                                 lane="cpu")
    return report.frames


@pytest.mark.parametrize("feature", LUMA_ONLY)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_a_luma_only_feature_ignores_chroma(noisy, pair, feature):
    f = noisy[pair.id]
    clean = _score(f["ref"], f["dist"], feature)
    assert clean and all(m for _i, m in clean)
    assert _score(f["ref_noise"], f["dist_noise"], feature) == clean
