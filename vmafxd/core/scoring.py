"""What a scoring session computes, and how per-frame results are assembled.

:class:`ScoringPlan` turns models and feature requests into the set of
feature *instances* to run (one per feature and set of name-changing options,
so ``vmaf_v0.6.1`` and ``vmaf_v0.6.1neg`` in one session run ADM twice: once
plain, once with ``adm_enhn_gain_limit=1``).  It is lane-independent: the CPU
lane runs each instance's CPU twin, the GPU lanes its kernel, and both hand
metric values to a :class:`FrameAssembler`, which decides when a frame is
final, predicts the models on it and pools at the end.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from vmafx.field_error import FieldError

from .. import features as feature_registry
from ..features.declaration import FeatureDeclaration, OptionError
from ..model import ModelSet, ModelSpec, RunningPool, predict_set
from ..model.predict import correction_inputs

__all__ = [
    "FeatureRequest",
    "parse_feature_spec",
    "FeatureInstance",
    "ScoringPlan",
    "FrameAssembler",
    "CpuScorer",
    "PlanError",
    "DEFAULT_MODEL",
    "default_model_name",
]

#: the model a session or a score runs when none is named
DEFAULT_MODEL = "version=vmaf_v0.6.1"


class PlanError(FieldError):
    """A session's models or features do not fit together; ``field`` names the culprit."""


def default_model_name(spec: ModelSpec, count: int) -> str:
    """The name of a model set given none: ``vmaf`` alone; among ``count`` > 1, its version or file's stem."""
    if count > 1 and spec.name is None:
        return spec.version or os.path.splitext(os.path.basename(spec.path or "model"))[0]
    return "vmaf"


@dataclass(frozen=True)
class FeatureRequest:
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    #: where the request came from, for errors (``features[2]``: ``features[2].enable_chroma``);
    #: "" names the feature itself (``feature.psnr``, ``psnr.enable_chroma``)
    label: str = field(default="", compare=False)


def parse_feature_spec(text: str) -> FeatureRequest:
    """libvmaf CLI syntax: ``NAME`` or ``NAME=opt=val:opt=val``."""
    name, sep, rest = text.partition("=")
    opts: dict[str, str] = {}
    if sep:
        for part in rest.split(":"):
            if not part:
                continue
            k, s2, v = part.partition("=")
            if not s2:
                raise PlanError(f"feature.{name}", f"expected option=value, got {part!r}")
            opts[k] = v
    if not name:
        raise PlanError("feature", "empty feature name")
    return FeatureRequest(name, opts)


@dataclass
class FeatureInstance:
    """One feature with one set of resolved options, and its output names."""

    decl: FeatureDeclaration
    values: dict[str, Any]

    @property
    def key(self) -> tuple:
        return (self.decl.name, self.decl.name_suffix(self.values))

    @property
    def names(self) -> dict[str, str]:
        return self.decl.metric_names(self.values)


@dataclass
class ScoringPlan:
    instances: list[FeatureInstance]
    models: list[ModelSet]
    #: per model set: the output metric names of its primary model's inputs, in order
    model_inputs: dict[str, list[list[str]]]

    @property
    def max_lag(self) -> int:
        return max((i.decl.lag_for(i.values) for i in self.instances), default=0)

    @property
    def luma_only(self) -> bool:
        """Every feature of the plan reads the luma planes alone (``FeatureDeclaration.luma_only``)."""
        return bool(self.instances) and all(i.decl.luma_only for i in self.instances)

    def metric_names(self) -> list[str]:
        names: list[str] = []
        for inst in self.instances:
            names.extend(n for n in inst.names.values() if n not in names)
        return names

    @classmethod
    def build(cls, models: Sequence[ModelSet], requests: Sequence[FeatureRequest]) -> "ScoringPlan":
        """Resolve every feature's options once, here, and merge what names the same outputs.

        The requests are resolved before the models, so a request's error is
        reported before a model's; instances keep the models' order first.
        """
        resolved = [_resolve_request(req) for req in requests]
        instances: dict[tuple, FeatureInstance] = {}

        def add(decl: FeatureDeclaration, values: dict[str, Any]) -> FeatureInstance:
            inst = FeatureInstance(decl, values)
            have = instances.get(inst.key)
            if have is None:
                instances[inst.key] = inst
                return inst
            # Same feature, same names: merge the options that change no name
            # (debug adds metrics, so the merged instance emits the union).
            for opt in decl.options:
                if not opt.feature_param and opt.type is bool and values[opt.name]:
                    have.values[opt.name] = True
            return have

        names_seen: set[str] = set()
        model_inputs: dict[str, list[list[str]]] = {}
        for ms in models:
            if ms.name in names_seen:
                raise PlanError("models", f"two models are named {ms.name!r}; give one a name=")
            names_seen.add(ms.name)
            per_model: list[list[str]] = []
            for m in ms.all_models():
                if m.chroma_correction is not None:
                    # the correction finds its two inputs by substring (model.predict); a model
                    # where that is ambiguous would fail every frame in libvmaf, so refuse it here
                    try:
                        correction_inputs(m)
                    except ValueError as e:
                        raise PlanError(f"model.{ms.name}.chroma_correction_parameter", str(e)) from None
            for mi, model in enumerate(ms.all_models()):
                inputs = []
                for fi, mf in enumerate(model.features):
                    try:
                        decl = feature_registry.provider(mf.metric)
                    except feature_registry.UnknownFeature:
                        raise PlanError(
                            f"model.{ms.name}.feature_names[{fi}]",
                            f"no feature provides {mf.name!r}",
                        ) from None
                    given = dict(mf.options)
                    given.update(ms.overloads.get(decl.name, {}))
                    try:
                        values = decl.resolve_options(given)
                    except OptionError as e:
                        raise PlanError(f"model.{ms.name}.{e.field}", e.reason) from None
                    inst = add(decl, values)
                    out = inst.names.get(mf.metric)
                    if out is None:
                        # a debug-only metric used as model input: turn debug on
                        inst.values["debug"] = True
                        out = inst.names[mf.metric]
                    inputs.append(out)
                per_model.append(inputs)
            model_inputs[ms.name] = per_model
        for decl, values in resolved:
            add(decl, values)
        return cls(list(instances.values()), list(models), model_inputs)


def _resolve_request(req: FeatureRequest) -> tuple[FeatureDeclaration, dict[str, Any]]:
    try:
        decl = feature_registry.get(req.name)
    except feature_registry.UnknownFeature as e:
        raise PlanError(req.label or f"feature.{req.name}", str(e)) from None
    try:
        return decl, decl.resolve_options(req.options)
    except OptionError as e:
        # e.field is "<feature>.<option>"; under a label the option hangs from it
        field_ = f"{req.label}.{e.field.split('.', 1)[-1]}" if req.label else e.field
        raise PlanError(field_, e.reason) from None


class FrameAssembler:
    """Collects metric values per frame from any lane; predicts models once a frame is final.

    Frames become final in index order: frame *i* once frame ``i + max_lag``
    has been pushed, the rest at :meth:`finish`.  Every frame is emitted once.

    Values are kept in columns, not in a dict per frame: one float64 column per
    metric name (the plan's names first, in its order; the models' outputs after
    them), a mask of which frames have a value, rows for the frames not yet
    final.  A lane that has a batch's values as arrays hands them over whole
    (:meth:`add_columns`); one that has a dict per frame, frame by frame
    (:meth:`add`).  The models are predicted once per call on every frame made
    final by it, and each final frame's dict (its names in column order) is built
    once, there.  (Every value a feature gives is a Python float, a double: the
    float64 column holds it as it is.)
    """

    def __init__(self, plan: ScoringPlan, *, keep_frames: bool = True):
        self.plan = plan
        self._next_final = 0
        self._last_pushed = -1
        self._max_lag = plan.max_lag
        #: every final frame (index, metrics), in order, while ``keep_frames``: what offline scoring
        #: reports at the end.  A daemon's session, a stream of any length, keeps none (its frames
        #: went to the client as they became final); :meth:`pooled` needs none either way.
        self.frames: list[tuple[int, dict[str, float]]] = []
        self.keep_frames = keep_frames
        self._pool = RunningPool()
        self._names: list[str] = []
        self._col: dict[str, int] = {}
        self._vals = np.zeros((64, 16))
        self._have = np.zeros((64, 16), dtype=bool)
        self._base = 0  # the frame index of row 0
        self._end = 0  # rows in use: frames _base .. _base + _end - 1
        for name in plan.metric_names():
            self._column(name)
        #: per model set: its primary model's input columns
        self._inputs = {ms.name: np.array([self._col[n] for n in plan.model_inputs[ms.name][0]], dtype=np.intp)
                        for ms in plan.models}

    def _column(self, name: str) -> int:
        j = self._col.get(name)
        if j is None:
            j = len(self._names)
            if j == self._vals.shape[1]:
                self._vals = np.concatenate([self._vals, np.zeros_like(self._vals)], axis=1)
                self._have = np.concatenate([self._have, np.zeros_like(self._have)], axis=1)
            self._col[name] = j
            self._names.append(name)
        return j

    def _rows(self, first: int, count: int) -> int:
        """The row of frame ``first`` (not final), with rows for ``count`` frames from it."""
        if first < self._next_final:
            raise RuntimeError(f"metrics for frame {first} arrived after it was final")
        end = first + count - self._base
        if end > self._vals.shape[0]:
            # drop the final frames' rows, then grow if that is not room enough
            drop = self._next_final - self._base
            live = max(self._end - drop, 0)
            rows = self._vals.shape[0]
            while end - drop > rows:
                rows *= 2
            if rows != self._vals.shape[0]:
                vals, have = np.zeros((rows, self._vals.shape[1])), np.zeros((rows, self._vals.shape[1]), dtype=bool)
                vals[:live], have[:live] = self._vals[drop:drop + live], self._have[drop:drop + live]
                self._vals, self._have = vals, have
            else:  # live == 0 too: nothing copied, every row cleared
                self._vals[:live] = self._vals[drop:drop + live].copy()
                self._have[:live] = self._have[drop:drop + live].copy()
                self._have[live:] = False
            self._base, self._end = self._next_final, live
            end -= drop
        self._end = max(self._end, end)
        return first - self._base

    def add(self, index: int, metrics: Mapping[str, float]) -> None:
        r = self._rows(index, 1)
        self._set_row(r, metrics.items())

    def _set_row(self, r: int, items) -> None:
        """Row ``r``'s values: (name, value) pairs (a column made for a new name first)."""
        cells = [(self._column(name), v) for name, v in items]  # a new column replaces the arrays
        vals, have = self._vals[r], self._have[r]
        for j, v in cells:
            vals[j] = v
            have[j] = True

    def add_columns(self, first: int, columns: Mapping[str, np.ndarray]) -> None:
        """Frames ``first``, ``first + 1`` ...'s values: name -> float64 array over those frames."""
        count = len(next(iter(columns.values()))) if columns else 0
        if count == 0:
            return
        r = self._rows(first, count)
        if count == 1:  # one frame: element stores cost a quarter of one-element slice stores
            self._set_row(r, ((name, v[0]) for name, v in columns.items()))
            return
        for name, v in columns.items():
            j = self._column(name)
            self._vals[r:r + count, j] = v
            self._have[r:r + count, j] = True

    def pushed(self, index: int) -> list[tuple[int, dict[str, float]]]:
        """Record that frame ``index`` has been extracted; returns frames now final."""
        self._last_pushed = max(self._last_pushed, index)
        return self._finalise_upto(self._last_pushed - self._max_lag)

    def finish(self) -> list[tuple[int, dict[str, float]]]:
        return self._finalise_upto(self._last_pushed)

    def _finalise_upto(self, last: int) -> list[tuple[int, dict[str, float]]]:
        first = self._next_final
        if first > last:
            return []
        a = self._rows(first, last + 1 - first)
        b = a + last + 1 - first
        self._next_final = last + 1  # final even if a model fails on them (they are not emitted then)
        self._predict(a, b)
        names = self._names
        vals = self._vals[a:b, :len(names)].tolist()
        have = self._have[a:b, :len(names)]
        if have.all():
            dicts = [dict(zip(names, row)) for row in vals]
        else:
            dicts = [{n: v for n, v, h in zip(names, row, hrow) if h} for row, hrow in zip(vals, have.tolist())]
        ready = list(zip(range(first, last + 1), dicts))
        self._pool.add(self._vals[a:b, :len(names)], have)
        if self.keep_frames:
            self.frames.extend(ready)
        return ready

    def _predict(self, a: int, b: int) -> None:
        """The models on rows ``a:b`` (frames in order), their outputs into new columns."""
        for ms in self.plan.models:
            cols = self._inputs[ms.name]
            have = self._have[a:b, cols]
            if not have.all():
                i, k = np.argwhere(~have)[0]  # the first missing, frame by frame, input by input
                name = self.plan.model_inputs[ms.name][0][k]
                raise RuntimeError(f"model {ms.name}: feature {name} missing for a frame")
            x = self._vals[a:b, cols]
            for out_name, values in predict_set(ms, x).items():
                j = self._column(out_name)
                self._vals[a:b, j] = values
                self._have[a:b, j] = True

    def pooled(self) -> dict[str, dict[str, float]]:
        """Each metric's min, max, mean and harmonic mean over the final frames that have it (names
        in the order they first came): ``pool`` of its values in index order, from running sums."""
        return self._pool.pooled(self._names)


class CpuScorer:
    """The CPU lane's scorer: runs each instance's CPU twin frame by frame."""

    def __init__(self, plan: ScoringPlan, width: int, height: int, bitdepth: int, alternative=None, *,
                 keep_frames: bool = True):
        """``alternative(decl, options, width, height, bitdepth)``: another extractor with the twin's
        interface for an instance (the CPU lane's native kernels), or None for the twin.
        ``keep_frames``: the assembler's (False for a daemon's session)."""
        self.plan = plan
        self.assembler = FrameAssembler(plan, keep_frames=keep_frames)
        #: whole-run metrics (libvmaf's aggregate_metrics), filled by finish()
        self.aggregate: dict[str, float] = {}
        self._extractors = []
        for inst in plan.instances:
            if inst.decl.cpu is None:
                raise PlanError(f"feature.{inst.decl.name}", "has no CPU implementation")
            ext = alternative(inst.decl, dict(inst.values), width, height, bitdepth) if alternative else None
            if ext is None:
                ext = inst.decl.cpu(dict(inst.values), width, height, bitdepth)
            self._extractors.append((inst, ext))

    def _take(self, inst: FeatureInstance, items: Iterable) -> None:
        names = inst.names
        for idx, metrics in items:
            self.assembler.add(idx, {names[k]: v for k, v in metrics.items() if k in names})

    def push(self, index: int, ref, dist) -> list[tuple[int, dict[str, float]]]:
        for inst, ext in self._extractors:
            self._take(inst, ext.extract(index, ref, dist))
        return self.assembler.pushed(index)

    def finish(self) -> list[tuple[int, dict[str, float]]]:
        for inst, ext in self._extractors:
            self._take(inst, ext.flush())
            aggregate = getattr(ext, "aggregate", None)
            if aggregate is not None:
                self.aggregate.update(aggregate())
        return self.assembler.finish()

    def pooled(self) -> dict[str, dict[str, float]]:
        return self.assembler.pooled()
