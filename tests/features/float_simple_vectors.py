"""libvmaf's float_psnr, float_ansnr and float_moment per frame, at full precision
(tests/data/scores/float_simple_libvmaf.json, made by scripts/float_simple_libvmaf_vectors.py).

Each case is a vendored pair scored as stored, or the 10-bit pair's first frame
with every sample shifted left (scored by libvmaf as 12- or 16-bit raw video).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from vmafxd.core.picture import Picture
from vmafxd.features.declaration import FeatureDeclaration

from ..reference import VENDORED, vendored_pairs

VECTORS = json.loads((VENDORED / "scores" / "float_simple_libvmaf.json").read_text())


def _case_id(case: dict) -> str:
    return case["pair"] + (f"-as{case['bitdepth']}bit" if case["shift"] else "")


def case_params():
    return [pytest.param(c, id=_case_id(c)) for c in VECTORS["cases"]]


def pictures(case: dict) -> tuple[list[Picture], list[Picture]]:
    """The pictures libvmaf scored for ``case`` (shifted into a deeper bit depth where it says so)."""
    pair = next(p for p in vendored_pairs() if p.id == case["pair"])
    refs, dists = pair.pictures()
    n = len(case["frames"])
    if not case["shift"]:
        return refs[:n], dists[:n]

    def shifted(pic: Picture) -> Picture:
        return Picture(tuple(p << case["shift"] for p in pic.planes), case["bitdepth"], pic.subsampling)

    return [shifted(p) for p in refs[:n]], [shifted(p) for p in dists[:n]]


def run_case(decl: FeatureDeclaration, case: dict, options: dict[str, Any] | None = None) -> list[dict[str, float]]:
    """The CPU twin's metrics for each frame of ``case``, by output name."""
    values = decl.resolve_options(options)
    names = decl.metric_names(values)
    refs, dists = pictures(case)
    ext = decl.cpu(values, refs[0].width, refs[0].height, case["bitdepth"])
    out: list[dict[str, float]] = [{} for _ in refs]
    for i, (r, d) in enumerate(zip(refs, dists)):
        for idx, metrics in ext.extract(i, r, d):
            out[idx].update({names[k]: v for k, v in metrics.items()})
    assert list(ext.flush()) == []
    return out


def differences(ours: list[dict[str, float]], case: dict, names: tuple[str, ...]) -> list[str]:
    """Every frame's every name against libvmaf's double (exact equality)."""
    errors = []
    for i, (mine, theirs) in enumerate(zip(ours, case["frames"], strict=True)):
        for name in names:
            if mine.get(name) != theirs[name]:
                errors.append(f"frame {i} {name}: {mine.get(name)!r} != libvmaf {theirs[name]!r}")
    return errors
