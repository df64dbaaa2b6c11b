"""libvmaf JSON models: built-in versions, files, and ``--model`` specifications.

A model file is either one ``{"param_dict", "model_dict"}`` object or, for a
bootstrap model such as ``vmaf_b_v0.6.3``, an object with members ``"0"`` ..
``"N"``.  As in libvmaf, only ``model_dict`` is read.  Member ``"0"`` is the
primary model (its score is ``vmaf``); members 1..N form the collection
(``vmaf_0001`` ..) whose untransformed, unclipped predictions give
``vmaf_bagging``, ``vmaf_stddev`` and the 95 % interval.

libvmaf leaves a model's ``score_transform`` *disabled* unless the model says
``"enabled": true`` or the caller asks for ``enable_transform``; the four
built-in models carry a transform but do not enable it, so by default their
scores are clipped but not transformed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from vmafx.field_error import FieldError

from ..features.names import alias
from .svm import SvmModel, SvmParseError, parse_libsvm

__all__ = [
    "ModelError",
    "Transform",
    "ModelFeature",
    "Model",
    "ModelSet",
    "ModelSpec",
    "BUILTIN_VERSIONS",
    "parse_model_spec",
    "load_model",
]

#: the models libvmaf f85a8536 compiles in with -Dbuilt_in_models=true -Denable_float=true
#: (``libvmaf/src/meson.build``, ``model.c``), in model.c's order
BUILTIN_VERSIONS = (
    "vmaf_float_v0.6.1", "vmaf_float_b_v0.6.3", "vmaf_float_v0.6.1neg", "vmaf_float_4k_v0.6.1",
    "vmaf_v0.6.1", "vmaf_b_v0.6.3", "vmaf_v0.6.1neg", "vmaf_4k_v0.6.1", "vmaf_4k_v0.6.1neg",
    "vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_3d0h_2160", "vmaf_v1.0.16_5d0h", "vmaf_v1.0.16_1d5h_2160",
    "vmaf_v1.0.16_hfr_3d0h", "vmaf_v1.0.16_hfr_3d0h_2160", "vmaf_v1.0.16_hfr_5d0h", "vmaf_v1.0.16_hfr_1d5h_2160",
)


class ModelError(FieldError):
    """A model cannot be loaded; ``field`` names what is wrong (``model.version``, ``model_dict.slopes`` ...)."""


@dataclass(frozen=True)
class Transform:
    enabled: bool
    p0: float | None = None
    p1: float | None = None
    p2: float | None = None
    knots: tuple[tuple[float, float], ...] | None = None
    out_lte_in: bool = False
    out_gte_in: bool = False


@dataclass(frozen=True)
class ModelFeature:
    #: the name as the model spells it (``VMAF_integer_feature_adm2_score``)
    name: str
    #: the output base name it maps to (``integer_adm2``)
    metric: str
    #: feature options from ``feature_opts_dicts`` (``{"adm_enhn_gain_limit": 1.0}``)
    options: Mapping[str, Any]
    slope: float = 1.0
    intercept: float = 0.0


@dataclass(frozen=True)
class Model:
    name: str
    features: tuple[ModelFeature, ...]
    norm_type: str  # "linear_rescale" or "none"
    slope: float
    intercept: float
    svm: SvmModel
    transform: Transform
    clip: tuple[float, float] | None
    #: libvmaf's chroma-from-luma correction (``chroma_correction_parameter``, the
    #: v1.0.16 models), applied by ``predict.correct_chroma_from_luma``
    chroma_correction: float | None = None

    def __post_init__(self) -> None:
        # the features' slopes and intercepts as arrays (predict.normalise), made once
        object.__setattr__(self, "rescale_slopes", np.array([f.slope for f in self.features], dtype=np.float64))
        object.__setattr__(self, "rescale_intercepts",
                           np.array([f.intercept for f in self.features], dtype=np.float64))


@dataclass(frozen=True)
class ModelSet:
    """What one ``--model`` loads: a model, or a bootstrap model with its members."""

    name: str
    primary: Model
    members: tuple[Model, ...] = ()
    version: str | None = None
    #: ``feature.option=value`` overloads from the specification
    overloads: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def bootstrap(self) -> bool:
        return bool(self.members)

    def all_models(self) -> tuple[Model, ...]:
        return (self.primary, *self.members)


@dataclass(frozen=True)
class ModelSpec:
    version: str | None = None
    path: str | None = None
    name: str | None = None
    enable_transform: bool = False
    disable_clip: bool = False
    overloads: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def _truthy(field_name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ModelError(field_name, f"expected true or false, got {value!r}")


def parse_model_spec(text: str) -> ModelSpec:
    """``version=NAME`` or ``path=FILE``, then ``:key=value`` parts as libvmaf's CLI takes them.

    Keys: ``name``, ``enable_transform``, ``disable_clip`` and
    ``FEATURE.OPTION`` overloads (``motion.debug=true``).
    """
    kw: dict[str, Any] = {}
    overloads: dict[str, dict[str, str]] = {}
    for part in text.split(":"):
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise ModelError("model", f"expected key=value, got {part!r}")
        if key in ("version", "path", "name"):
            kw[key] = val
        elif key in ("enable_transform", "disable_clip"):
            kw[key] = _truthy(f"model.{key}", val)
        elif "." in key:
            feat, _, opt = key.partition(".")
            overloads.setdefault(feat, {})[opt] = val
        else:
            raise ModelError(f"model.{key}", "unknown model parameter")
    if ("version" in kw) == ("path" in kw):
        raise ModelError("model", "give exactly one of version= or path=")
    return ModelSpec(overloads=overloads, **kw)


def _number(field_name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ModelError(field_name, f"expected a number, got {v!r}")
    return float(v)


def _parse_model_dict(md: Any, name: str, spec: ModelSpec, where: str) -> Model:
    if not isinstance(md, dict):
        raise ModelError(f"{where}.model_dict", "missing or not an object")
    mtype = md.get("model_type")
    if mtype not in ("LIBSVMNUSVR", "BOOTSTRAP_LIBSVMNUSVR", "RESIDUEBOOTSTRAP_LIBSVMNUSVR"):
        raise ModelError(f"{where}.model_dict.model_type", f"unsupported model type {mtype!r}")
    norm = md.get("norm_type", "none")
    if norm not in ("linear_rescale", "none"):
        raise ModelError(f"{where}.model_dict.norm_type", f"unsupported {norm!r}")
    names = md.get("feature_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ModelError(f"{where}.model_dict.feature_names", "expected a list of names")
    slopes = md.get("slopes", [])
    intercepts = md.get("intercepts", [])
    if norm == "linear_rescale":
        for key, arr in (("slopes", slopes), ("intercepts", intercepts)):
            if not isinstance(arr, list) or len(arr) != len(names) + 1:
                raise ModelError(f"{where}.model_dict.{key}", f"expected {len(names) + 1} numbers")
    opts = md.get("feature_opts_dicts") or [{} for _ in names]
    if not isinstance(opts, list) or len(opts) != len(names):
        raise ModelError(f"{where}.model_dict.feature_opts_dicts", f"expected {len(names)} objects")
    feats = []
    for i, fname in enumerate(names):
        o = opts[i]
        if not isinstance(o, dict):
            raise ModelError(f"{where}.model_dict.feature_opts_dicts[{i}]", "expected an object")
        feats.append(
            ModelFeature(
                name=fname,
                metric=alias(fname),
                options=dict(o),
                slope=_number(f"{where}.model_dict.slopes[{i + 1}]", slopes[i + 1]) if slopes else 1.0,
                intercept=_number(f"{where}.model_dict.intercepts[{i + 1}]", intercepts[i + 1]) if intercepts else 0.0,
            )
        )
    text = md.get("model")
    if not isinstance(text, str):
        raise ModelError(f"{where}.model_dict.model", "missing libsvm model text")
    try:
        svm = parse_libsvm(text)
    except SvmParseError as e:
        raise ModelError(f"{where}.model_dict.model", str(e)) from None
    if svm.n_features > len(names):
        raise ModelError(f"{where}.model_dict.model", f"support vectors use {svm.n_features} features, model names {len(names)}")
    st = md.get("score_transform")
    transform = Transform(enabled=False)
    if isinstance(st, dict):
        knots = st.get("knots")
        transform = Transform(
            enabled=bool(st.get("enabled", False)) or spec.enable_transform,
            p0=st.get("p0"),
            p1=st.get("p1"),
            p2=st.get("p2"),
            knots=tuple((float(a), float(b)) for a, b in knots) if knots else None,
            out_lte_in=st.get("out_lte_in") == "true",
            out_gte_in=st.get("out_gte_in") == "true",
        )
    clip = None
    sc = md.get("score_clip")
    if sc is not None and not spec.disable_clip:
        if not isinstance(sc, list) or len(sc) != 2:
            raise ModelError(f"{where}.model_dict.score_clip", "expected [min, max]")
        clip = (_number(f"{where}.model_dict.score_clip[0]", sc[0]), _number(f"{where}.model_dict.score_clip[1]", sc[1]))
    chroma = md.get("chroma_correction_parameter")
    if chroma is not None:
        chroma = _number(f"{where}.model_dict.chroma_correction_parameter", chroma)
    return Model(
        name=name,
        chroma_correction=chroma,
        features=tuple(feats),
        norm_type=norm,
        slope=_number(f"{where}.model_dict.slopes[0]", slopes[0]) if slopes else 1.0,
        intercept=_number(f"{where}.model_dict.intercepts[0]", intercepts[0]) if intercepts else 0.0,
        svm=svm,
        transform=transform,
        clip=clip,
    )


def builtin_model_text(version: str) -> str:
    if version not in BUILTIN_VERSIONS:
        raise ModelError("model.version", f"no built-in model {version!r} (have: {', '.join(BUILTIN_VERSIONS)})")
    # straight from the package's folder where it is one (every pip install): asking
    # importlib.resources first imports its readers (zipfile ...), a few ms of every start
    try:
        with open(os.path.join(os.path.dirname(__file__), "builtin", f"{version}.json"), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:  # a package that is not a folder (a zip)
        from importlib import resources

        return resources.files(__package__).joinpath("builtin", f"{version}.json").read_text()


def load_model(spec: ModelSpec | str, default_name: str = "vmaf", *, text: str | None = None) -> ModelSet:
    """The model set ``spec`` names; ``text``: a ``path=`` model's contents, already read by the
    caller (a client sends what it read; the daemon reads files under its model_dirs itself,
    safely: vmafxd/model_files.py)."""
    if isinstance(spec, str):
        spec = parse_model_spec(spec)
    if text is not None:
        where = os.path.basename(spec.path or "model")
    elif spec.version is not None:
        text = builtin_model_text(spec.version)
        where = spec.version
    else:
        assert spec.path is not None
        if spec.path.endswith(".pkl"):
            raise ModelError("model.path", "pkl models are not supported; use the JSON model")
        try:
            with open(os.fspath(spec.path), encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ModelError("model.path", f"cannot read {spec.path}: {e.strerror}") from None
        where = os.path.basename(spec.path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelError("model", f"{where} is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ModelError("model", f"{where} is not a JSON object")
    name = spec.name or default_name
    if "model_dict" in doc:
        primary = _parse_model_dict(doc["model_dict"], name, spec, where)
        return ModelSet(name, primary, (), spec.version, spec.overloads)
    if "0" in doc:
        members = []
        i = 0
        while str(i) in doc:
            member = doc[str(i)]
            if not isinstance(member, dict):
                raise ModelError(f"{where}[{i}]", "expected an object")
            mname = name if i == 0 else f"{name}_{i:04d}"
            members.append(_parse_model_dict(member.get("model_dict"), mname, spec, f"{where}[{i}]"))
            i += 1
        if len(members) < 2:
            raise ModelError("model", f"{where}: a bootstrap model needs members 0..N with N >= 1")
        return ModelSet(name, members[0], tuple(members[1:]), spec.version, spec.overloads)
    raise ModelError("model", f"{where} has neither model_dict nor bootstrap members")
