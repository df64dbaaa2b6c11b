"""The client's one door into the scoring core (vmafxd): scoring in this process, and what
the command line needs to know about models and features.

No other module of ``vmafx`` imports ``vmafxd``: the client library stays usable
without the core's import cost, and when the core's modules move only the imports
below change.  Every name is taken through ``vmafxd.offline`` where it offers it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

__all__ = ["InProcessReport", "LaneUnavailableHere", "score_in_process", "metric_order", "check_models", "check_features",
           "pool", "computed_metric_names", "start_gpu"]


def _core():
    """The core's names, imported on first use (a private daemon or ``--help`` never pays for them)."""
    from vmafxd import offline

    return offline, offline.parse_feature_spec


@dataclass
class InProcessReport:
    frames: list[tuple[int, dict[str, float]]]
    pooled: dict[str, dict[str, float]]
    aggregate: dict = field(default_factory=dict)
    width: int = 0
    height: int = 0
    fps: float | None = None
    models: list[str] = field(default_factory=list)
    failed: list = field(default_factory=list)
    frames_read: int = 0


def check_models(specs: Sequence[str]):
    """Parse and load ``--model`` specs (reads ``path=`` files); raises ValueError naming the field."""
    offline, _ = _core()
    # no specs: no model (-n/--no_prediction); resolve_models would give its default
    return offline.resolve_models(specs) if specs else []


def check_features(specs: Sequence[str]):
    _, parse_feature_spec = _core()
    return [parse_feature_spec(s) for s in specs]


def _plan(models: Sequence[str], features: Sequence[str]):
    offline, _ = _core()
    return offline.ScoringPlan.build(check_models(models), check_features(features))


def metric_order(models: Sequence[str], features: Sequence[str]) -> list[str]:
    """Metric names in the order libvmaf's feature collector first sees them.

    libvmaf (``feature_collector.c``) keeps one vector per metric name, appended
    when a name is first written, and ``output.c`` prints every frame's metrics
    and the pooled ones in that order.  Extractors run in registration order (the
    models' features in each model's ``feature_names`` order, then ``--feature``
    ones in command-line order: ``tools/vmaf.c``) for frame 0, then frame 1, ...,
    then ``flush``.  So a name's rank is (when its extractor first writes it,
    the extractor's rank, its place in the extractor's list).  A declaration
    says which of its names are first written later than frame 0
    (``written_late``: ``"next"`` = while frame 1 is extracted, ``"flush"``);
    model outputs follow all features (libvmaf predicts after extraction).
    """
    plan = _plan(models, features)
    phases = {None: 0, "next": 1, "flush": 2}
    ranked = []
    for ei, inst in enumerate(plan.instances):
        late = getattr(inst.decl, "written_late", None) or {}
        for ni, (base, out) in enumerate(inst.names.items()):
            ranked.append(((phases.get(late.get(base), 0), ei, ni), out))
    order: list[str] = []
    for _, name in sorted(ranked):
        if name not in order:
            order.append(name)
    return order


def pool(values: Iterable[float]) -> dict[str, float]:
    """libvmaf's pooled min, max, mean and harmonic mean."""
    from vmafxd.model import pool as model_pool

    return model_pool(values)


def computed_metric_names() -> set[str]:
    """Every metric base name some feature of the registry provides (what we compute today)."""
    from vmafxd import features as registry

    names: set[str] = set()
    for decl in registry.all_declarations():
        names.update(decl.provides)
        names.update(decl.debug_provides)
        for _opt, extra in decl.option_provides:
            names.update(extra)
    return names


def start_gpu(lane: str) -> None:
    """Start the GPU of ``lane`` (cuda, hip, emu) on a thread now, for :func:`score_in_process`
    to take later; a lane that cannot run says so there.

    Not through ``vmafxd.offline``: importing the core is part of what the driver's start is
    to overlap, so this takes the one module that imports only the standard library."""
    from vmafxd.lanes.gpu.device_start import start_device

    start_device(lane)


class LaneUnavailableHere(RuntimeError):
    """The GPU lane asked for cannot run in this process; the message says what is missing."""


def score_in_process(
    reference,
    distorted,
    models: Sequence[str],
    features: Sequence[str],
    *,
    max_frames: int | None = None,
    progress: Callable[[int], None] | None = None,
    lane: str = "cpu",
    cpu_engine: str = "auto",
) -> tuple[InProcessReport, int]:
    """Score two open inputs (``read_frame()`` -> stored planes, ``read_frame_into`` where
    they can, ``.info``) here: on the CPU lane, or on a GPU (``lane`` cuda, hip; emu, the
    kernels' CPU emulator) with no daemon in between.  ``cpu_engine``: the CPU lane's scorer
    (auto | compiled | numpy, as the daemon's ``cpu_engine``).

    Returns the report and how many frames were read from both.
    """
    offline, _ = _core()
    model_sets = check_models(models)
    plan = offline.ScoringPlan.build(model_sets, check_features(features))
    info = reference.info
    t0 = time.perf_counter()
    if lane in ("auto", "cpu"):
        scorer = offline.cpu_scorer(plan, info, cpu_engine)
        n = offline.score_frames(scorer, reference, distorted, max_frames=max_frames, progress=progress)
    else:
        try:
            scorer, n = offline.score_frames_on_gpu(lane, plan, reference, distorted, max_frames=max_frames,
                                                    progress=progress)
        except offline.GpuUnavailable as e:
            raise LaneUnavailableHere(str(e)) from None
    elapsed = time.perf_counter() - t0
    report = InProcessReport(
        frames=scorer.assembler.frames, pooled=scorer.assembler.pooled(), aggregate=dict(scorer.aggregate),
        width=info.width, height=info.height, fps=n / elapsed if elapsed > 0 and n else None,
        models=[m.name for m in model_sets])
    return report, n
