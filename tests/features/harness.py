"""Run one feature's CPU twin over a reference pair and compare with libvmaf."""

from __future__ import annotations

import math
from typing import Any, Mapping

from vmafx.io.scores import format_score
from vmafxd.features.declaration import FeatureDeclaration

from ..reference import Pair


def run_feature(
    decl: FeatureDeclaration, pair: Pair, options: Mapping[str, Any] | None = None, frames: int | None = None
) -> dict[int, dict[str, float]]:
    """{frame index: {output metric name: value}} for the pair's first ``frames`` frames."""
    values = decl.resolve_options(options)
    names = decl.metric_names(values)
    refs, dists = pair.pictures()
    n = len(refs) if frames is None else frames
    ext = decl.cpu(values, pair.width, pair.height, pair.bitdepth)
    out: dict[int, dict[str, float]] = {}

    def take(items):
        for idx, metrics in items:
            slot = out.setdefault(idx, {})
            for base, value in metrics.items():
                if base in names:
                    slot[names[base]] = value

    for i in range(n):
        take(ext.extract(i, refs[i], dists[i]))
    take(ext.flush())
    return out


def compare(
    ours: dict[int, dict[str, float]],
    pair: Pair,
    model: str,
    names: list[str],
    *,
    exact: bool,
    tol: float = 1e-4,
) -> list[str]:
    """Differences between our values and libvmaf's for ``names`` on the scored frames.

    ``exact``: equal to the full-precision double where the set has one, and
    equal as printed (``%.6f``/``%.16f``) always.  Otherwise within ``tol``.
    """
    printed = pair.scores(model)
    full = pair.fullprec(model)
    errors = []
    checked = 0
    for fi in range(pair.scored_frames):
        theirs = printed["frames"][fi]["metrics"]
        theirs_full = full["frames"][fi]["metrics"] if full else None
        for name in names:
            if name not in theirs:
                continue
            checked += 1
            mine = ours.get(fi, {}).get(name)
            want = theirs[name]
            if mine is None:
                errors.append(f"frame {fi} {name}: missing")
                continue
            if want is None:
                if math.isfinite(mine):
                    errors.append(f"frame {fi} {name}: {mine!r} where libvmaf gives null")
                continue
            if exact:
                # ours printed as libvmaf prints, read back, must be libvmaf's printed number
                # (re-printing libvmaf's already rounded value could change its format)
                if float(format_score(mine)) != want:
                    errors.append(f"frame {fi} {name}: {format_score(mine)} != printed {want!r}")
                if theirs_full is not None and theirs_full.get(name) is not None and mine != theirs_full[name]:
                    errors.append(f"frame {fi} {name}: {mine!r} != full precision {theirs_full[name]!r}")
            elif not abs(mine - want) <= tol:
                errors.append(f"frame {fi} {name}: {mine!r} vs {want!r} (tol {tol})")
    if checked == 0:
        errors.append(f"no metric of {names} found in {pair.id}.{model}")
    return errors


def compare_pooled(ours: dict[int, dict[str, float]], pair: Pair, model: str, names: list[str]) -> list[str]:
    """Our pooled values (libvmaf's min, max, mean, harmonic mean over every frame) against libvmaf's
    printed ones, for ``names``; nothing to compare for a cut pair (its log has no pooled values)."""
    from vmafxd.model import pool

    pooled = pair.scores(model).get("pooled_metrics") or {}
    errors = []
    for name in names:
        if name not in pooled:
            continue
        mine = pool([ours[i][name] for i in sorted(ours)])
        for stat, want in pooled[name].items():
            if float(format_score(mine[stat])) != want:
                errors.append(f"pooled {name}.{stat}: {format_score(mine[stat])} != printed {want!r}")
    return errors
