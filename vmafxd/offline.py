"""Scoring a pair of video files in this process on the CPU lane.

This is what ``vmafxctl score --lane cpu`` runs without a daemon, what the
daemon's tests compare against, and what the CPU benchmark times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from vmafx.field_error import FieldError
from vmafx.formats import PixelFormat
from vmafx.io.video import VideoInfo, open_video

from .core.picture import picture_from_stored
from .core.scoring import (
    DEFAULT_MODEL, CpuScorer, FeatureRequest, ScoringPlan, default_model_name, parse_feature_spec,
)
from .model import ModelSet, load_model, parse_model_spec

# parse_feature_spec is re-exported: the client's in-process scoring parses
# --feature through this module, its one way into vmafxd.
__all__ = ["Report", "score_files", "score_frames", "score_frames_on_gpu", "resolve_models", "parse_feature_spec",
           "GeometryError", "GpuUnavailable", "cpu_scorer", "check_pair"]


#: the two files disagree on a dimension or format (``field`` names it)
GeometryError = FieldError


@dataclass
class Report:
    frames: list[tuple[int, dict[str, float]]]
    pooled: dict[str, dict[str, float]]
    aggregate: dict[str, float] = field(default_factory=dict)
    width: int = 0
    height: int = 0
    fps: float | None = None
    models: list[str] = field(default_factory=list)


def resolve_models(specs: Sequence[str]) -> list[ModelSet]:
    """Load ``--model`` specifications; with several, unnamed ones are named after their version."""
    parsed = [parse_model_spec(s) for s in specs] or [parse_model_spec(DEFAULT_MODEL)]
    return [load_model(spec, default_name=default_model_name(spec, len(parsed))) for spec in parsed]


def check_pair(ref: VideoInfo, dist: VideoInfo) -> None:
    """The two inputs agree on size, bit depth and chroma subsampling (a GeometryError names the field)."""
    for attr in ("width", "height", "bitdepth"):
        if getattr(ref, attr) != getattr(dist, attr):
            raise GeometryError(
                f"distorted.{attr}", f"{getattr(dist, attr)} differs from the reference's {getattr(ref, attr)}"
            )
    if ref.pixel_format.subsampling != dist.pixel_format.subsampling:
        raise GeometryError("distorted.pixel_format", f"{dist.pixel_format.value} vs {ref.pixel_format.value}")


def score_frames(
    scorer: CpuScorer,
    reference,
    distorted,
    *,
    max_frames: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Push frame pairs from two readers (``read_frame()`` -> stored planes, ``.info``) through
    ``scorer`` until either ends or ``max_frames``, then finish it; returns how many were scored.

    A reference frame read past the distorted's end goes back to a reader that
    can take it (``pushback``: the command line's inputs, which report what
    was read from each).
    """
    n = 0
    while max_frames is None or n < max_frames:
        a = reference.read_frame()
        if a is None:
            break
        b = distorted.read_frame()
        if b is None:
            pushback = getattr(reference, "pushback", None)
            if pushback is not None:
                pushback(a)
            break
        ref = picture_from_stored(a, reference.info.pixel_format, reference.info.bitdepth)
        dist = picture_from_stored(b, distorted.info.pixel_format, distorted.info.bitdepth)
        scorer.push(n, ref, dist)
        n += 1
        if progress:
            progress(n)
    scorer.finish()
    return n


def cpu_scorer(plan: ScoringPlan, info: VideoInfo, engine: str = "auto"):
    """The CPU lane's scorer for a video of ``info``: the numpy twins, or the compiled kernels
    for the features ``engine`` asks them for (vmafxd/lanes/compiled.py make_cpu_scorer)."""
    from .lanes.compiled import make_cpu_scorer
    from .lanes.cpu_alloc import keep_heap

    keep_heap()  # the lane's allocator settings (VMAFX_CPU_KEEP_HEAP=0: off)
    return make_cpu_scorer(plan, info.width, info.height, info.bitdepth, info.pixel_format.subsampling, engine)


class GpuUnavailable(RuntimeError):
    """The GPU lane asked for cannot run in this process (no binding, driver or device)."""


def score_frames_on_gpu(lane: str, plan: ScoringPlan, reference, distorted, *, max_frames: int | None = None,
                        progress: Callable[[int], None] | None = None, device: int = 0, kit=None):
    """:func:`score_frames` on a GPU of this process (``lane``: cuda, hip, or emu, the kernels'
    CPU emulator); returns (the finished scorer: ``assembler``, ``pooled``, ``aggregate``; frames).
    ``kit``: the device's :class:`~vmafxd.lanes.gpu.scoring_kit.ScoringKit` to score with (a
    daemon's, kept between jobs), else one made for this scoring on device ``device``.
    Raises :class:`GpuUnavailable` saying what is missing."""
    from .lanes.gpu.in_process import RuntimeUnavailable, score_readers

    try:
        return score_readers(lane, plan, reference, distorted, max_frames=max_frames, progress=progress,
                             device=device, kit=kit)
    except RuntimeUnavailable as e:
        raise GpuUnavailable(str(e)) from None


def score_files(
    reference: str,
    distorted: str,
    models: Sequence[ModelSet],
    features: Sequence[FeatureRequest] = (),
    *,
    width: int | None = None,
    height: int | None = None,
    pixel_format: str | PixelFormat | None = None,
    bitdepth: int | None = None,
    max_frames: int | None = None,
    progress: Callable[[int], None] | None = None,
    engine: str = "auto",
) -> Report:
    plan = ScoringPlan.build(models, features)
    geo = dict(width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
    t0 = time.perf_counter()
    with open_video(reference, **geo) as rr, open_video(distorted, **geo) as dr:
        check_pair(rr.info, dr.info)
        info = rr.info
        scorer = cpu_scorer(plan, info, engine)
        n = score_frames(scorer, rr, dr, max_frames=max_frames, progress=progress)
    elapsed = time.perf_counter() - t0
    return Report(
        frames=scorer.assembler.frames,
        pooled=scorer.pooled(),
        aggregate=dict(scorer.aggregate),
        width=info.width,
        height=info.height,
        fps=n / elapsed if elapsed > 0 else None,
        models=[m.name for m in models],
    )
