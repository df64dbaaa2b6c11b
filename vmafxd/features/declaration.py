"""One declaration per feature, shared by its CPU twin and its GPU kernel.

libvmaf's lesson in reverse: its CUDA extractors copy the option table, the
feature names and the score-writing code of the CPU ones word for word.  Here
each feature is declared once (:class:`FeatureDeclaration`): its name, the
metric names it provides, its options with defaults and bounds, whether it is
temporal, its CPU twin class, and its GPU twin: the kernel source the GPU lanes
compile, the module under ``vmafxd/lanes/gpu/`` that drives it, and the layout
of the kernel's parameter block (whose ``#define``s are generated from here).
The registry (``vmafxd/features/__init__.py``) lists the feature modules once;
the CPU lane, the GPU engine and the kernel compiler all read these declarations.
The GPU lanes produce the same *statistics* the CPU twin produces and call the
same pure ``metrics_from_stats`` function, so the two cannot drift apart.

Metric naming follows libvmaf's ``feature_name.c``: an option flagged as a
*feature parameter* that is set to a non-default value appends
``_<alias>_<value>`` (``%g`` formatting; booleans append ``_<alias>``) to every
metric the feature provides, options sorted alphabetically by name.  That is
how ``vmaf_v0.6.1neg`` (``adm_enhn_gain_limit=1``) yields
``integer_adm2_egl_1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

from vmafx.field_error import FieldError

__all__ = [
    "Option",
    "FeatureDeclaration",
    "FeatureExtractor",
    "OptionError",
    "FrameScores",
    "PerFrameTwin",
    "check_bitdepth",
    "check_chroma",
    "debug_option",
    "gain_limit_option",
    "debug_and_gain_limit_options",
    "format_g",
    "per_frame",
]


class OptionError(FieldError):
    """A feature option is unknown, of the wrong type, or out of bounds.

    ``field`` names the offending option as ``<feature>.<option>``.
    """


def format_g(value: float) -> str:
    """C's ``%g`` for a double, as libvmaf uses it in feature names."""
    return "%g" % value


@dataclass(frozen=True)
class Option:
    """An option of a feature: name, type, default and bounds (libvmaf's ``VmafOption``)."""

    name: str
    type: type  # bool, int, float or str
    default: Any
    help: str = ""
    alias: str | None = None
    min: float | None = None
    max: float | None = None
    #: a feature parameter changes the metric names when not at its default
    feature_param: bool = False

    def parse(self, feature: str, value: Any) -> Any:
        """Coerce ``value`` (a string from a command line or a JSON value) and check bounds."""
        field_name = f"{feature}.{self.name}"
        if self.type is bool:
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s in ("true", "1", "yes"):
                return True
            if s in ("false", "0", "no"):
                return False
            raise OptionError(field_name, f"expected true or false, got {value!r}")
        try:
            if isinstance(value, bool):
                raise ValueError
            v = self.type(value) if not isinstance(value, str) else self.type(value.strip())
        except (TypeError, ValueError):
            raise OptionError(field_name, f"expected a {self.type.__name__}, got {value!r}") from None
        if self.type is float and not math.isfinite(v):
            raise OptionError(field_name, f"must be finite, got {value!r}")
        if self.min is not None and v < self.min:
            raise OptionError(field_name, f"{v!r} is below the minimum {self.min!r}")
        if self.max is not None and v > self.max:
            raise OptionError(field_name, f"{v!r} is above the maximum {self.max!r}")
        return v

    def name_suffix(self, value: Any) -> str:
        """The suffix this option adds to metric names (empty at its default)."""
        if not self.feature_param or value == self.default:
            return ""
        key = self.alias or self.name
        if self.type is bool:
            return f"_{key}"
        if self.type is float:
            return f"_{key}_{format_g(float(value))}"
        return f"_{key}_{value}"


#: per-frame output of an extractor: (frame index, {metric name: value})
FrameScores = tuple[int, dict[str, float]]


def per_frame(columns: Mapping[str, Any]) -> list[dict[str, float]]:
    """{metric name: array over frames} -> one {metric name: float} per frame (the
    shape in which a feature's arithmetic over a batch hands its scores back)."""
    names = list(columns)
    return [dict(zip(names, row)) for row in zip(*(columns[k].tolist() for k in names))]


class FeatureExtractor(Protocol):
    """The CPU twin's interface (one instance per session and feature).

    ``extract`` is called once per frame in index order.  It returns the
    scores that became final with this frame, which for temporal features may
    belong to an earlier frame (``integer_motion2`` of frame *i* is known once
    frame *i + 1* is seen); ``flush`` returns what is left after the last one.
    Metric names are the *base* names of the declaration (``provides`` and
    ``debug_provides``); the session applies option suffixes.
    """

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int) -> None: ...

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]: ...

    def flush(self) -> Iterable[FrameScores]: ...

    # Optional: ``aggregate() -> dict[str, float]``, whole-run metrics (libvmaf's
    # ``aggregate_metrics``, e.g. PSNR's ``apsnr_y``), read after ``flush``.


class PerFrameTwin:
    """Base of the CPU twins whose scores are final with their own frame: nothing to flush."""

    def flush(self) -> Iterable[FrameScores]:
        return []


class LumaTwin(PerFrameTwin):
    """Base of the per-frame twins that read the luma alone and take no option: ``FEATURE``
    (its name), ``BITDEPTHS`` (those it scores) and ``luma_metrics(ref, dist)``, a frame's metrics."""

    FEATURE: str = ""
    BITDEPTHS: tuple[int, ...] = ()

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        check_bitdepth(self.FEATURE, bitdepth, self.BITDEPTHS)
        self.width, self.height, self.bitdepth = width, height, bitdepth

    def luma_metrics(self, ref: Any, dist: Any) -> dict[str, float]:
        raise NotImplementedError

    @classmethod
    def declare(cls, provides: tuple[str, ...], help: str) -> "FeatureDeclaration":
        """The feature's declaration: no option; its kernels in ``FEATURE.cu``, its GPU half ``FEATURE``."""
        return FeatureDeclaration(name=cls.FEATURE, kernel=f"{cls.FEATURE}.cu", gpu=cls.FEATURE,
                                  provides=provides, cpu=cls, help=help)

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        return [(index, self.luma_metrics(ref.luma, dist.luma))]


def debug_option(default: bool = False) -> Option:
    """libvmaf's ``debug`` option, which adds a feature's ``debug_provides``."""
    return Option("debug", bool, default, "debug mode: enable additional output")


def gain_limit_option(feature: str) -> Option:
    """libvmaf's ``<feature>_enhn_gain_limit`` (``adm``/``vif``: the same bounds and alias)."""
    return Option(f"{feature}_enhn_gain_limit", float, 100.0,
                  f"enhancement gain imposed on {feature}, must be >= 1.0, where 1.0 means the gain is "
                  "completely disabled",
                  alias="egl", min=1.0, max=100.0, feature_param=True)


def debug_and_gain_limit_options(feature: str) -> tuple[Option, Option]:
    """The two options libvmaf's ``vif``, ``float_vif`` and ``float_adm`` extractors begin with,
    in its order: ``debug``, then ``<feature>_enhn_gain_limit``."""
    return debug_option(), gain_limit_option(feature)


def check_bitdepth(feature: str, bitdepth: int, supported: tuple[int, ...], described: str | None = None) -> None:
    """The ``ValueError`` both twins of ``feature`` raise for a bit depth it does not take."""
    if bitdepth not in supported:
        raise ValueError(f"{feature} supports bit depths {described or supported}, not {bitdepth}")


def check_chroma(feature: str, planes: int) -> None:
    """The ``ValueError`` of a feature that scores colour, for a 4:0:0 picture (as libvmaf refuses it)."""
    if planes < 3:
        raise ValueError(f"{feature} needs chroma: libvmaf refuses 4:0:0 pictures")


def _c_initializer(values: Any) -> str:
    """A C initializer for a (nested) sequence or array of numbers, one brace level per dimension.

    A float is written as the shortest decimal that reads back as the same double
    (``repr``); a float32 value is exactly a double, so the compiler reads back the
    very float32 the CPU twin holds, whichever of float or double the table is."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return "{" + ", ".join(_c_initializer(v) for v in values) + "}"
    if isinstance(values, bool) or not isinstance(values, (int, float)) or not math.isfinite(values):
        raise TypeError(f"kernel table value {values!r} is not a finite number")
    return repr(float(values)) if isinstance(values, float) else str(values)


@dataclass(frozen=True)
class FeatureDeclaration:
    """Everything about one feature that both lanes share."""

    #: libvmaf's extractor name, as ``--feature NAME`` takes it (``vif``, ``adm``, ``motion``, ``psnr``, ...)
    name: str
    #: metric names always provided
    provides: tuple[str, ...]
    #: metric names provided only with ``debug=true``
    debug_provides: tuple[str, ...] = ()
    #: metric names provided only when a boolean option is on: ((option, names), ...)
    option_provides: tuple[tuple[str, tuple[str, ...]], ...] = ()
    options: tuple[Option, ...] = ()
    #: True when a frame's scores depend on other frames (motion)
    temporal: bool = False
    #: True when the feature reads the luma planes alone, whatever its options: a file path
    #: may then leave the chroma bytes unread (vmafxd/lanes/gpu/in_process.py).  False (the
    #: default) is always safe; tests/features/test_luma_only.py scores every feature that says
    #: True with its chroma replaced by noise and wants the same scores
    luma_only: bool = False
    #: the most frames after frame *i* that must be seen before frame *i*'s
    #: scores are final (motion2 of frame *i* needs frame *i + 1*), for any options
    max_lag: int = 0
    #: the lag for a set of resolved options, when it is less than ``max_lag`` for some
    lag: Callable[[Mapping[str, Any]], int] | None = field(default=None, compare=False)
    #: kernel source file under ``vmafxd/features/kernels/`` (None: CPU only)
    kernel: str | None = None
    #: the GPU twin: a module under ``vmafxd/lanes/gpu/`` with ``make(instance, scorer)``
    #: (None: the GPU lanes do not offer this feature)
    gpu: str | None = None
    #: the kernel's int64 parameter block, in order: (name, count) pairs.  The kernel
    #: compiler prepends ``#define P_<NAME> <index>`` for each and ``P_COUNT`` to the
    #: kernel source (:meth:`kernel_defines`); the host fills the block by the same
    #: names (:meth:`pack_kernel_params`), so neither side is matched to the other by hand.
    kernel_params: tuple[tuple[str, int], ...] = ()
    #: constant tables the kernel reads: (C declarator, values) pairs, such as
    #: ``("float hvs_csf[3][64]", CSF.reshape(3, 64))``.  The kernel compiler prepends
    #: ``__constant__ <declarator> = {...};`` with every value written exactly
    #: (:meth:`kernel_table_source`), so a table the CPU twin holds is never copied into
    #: a kernel by hand.
    kernel_tables: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    #: the CPU twin class (a :class:`FeatureExtractor`)
    cpu: Callable[..., FeatureExtractor] | None = field(default=None, compare=False)
    #: other names libvmaf accepts for this feature on the command line
    aliases: tuple[str, ...] = ()
    help: str = ""
    #: metrics libvmaf's extractor first writes later than while frame 0 is extracted:
    #: {base name: "next" (while frame 1 is) | "flush"}; the log's key order follows it
    written_late: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: a check across several resolved options (raises OptionError), run by resolve_options
    validate: Callable[[Mapping[str, Any]], None] | None = field(default=None, compare=False)
    #: metric names that never take the option suffix (libvmaf writes them without its name dict)
    unsuffixed: tuple[str, ...] = ()

    def kernel_param_names(self) -> tuple[str, ...]:
        """The parameter block's entries one by one (``irf0``, ``irf1`` ... for a group of 3)."""
        return tuple(n if count == 1 else f"{n}{i}" for n, count in self.kernel_params for i in range(count))

    def kernel_defines(self) -> str:
        """The ``#define``s of the parameter block's indices, as the kernel source uses them."""
        lines, at = [f"// generated from DECLARATION.kernel_params of feature {self.name}"], 0
        for n, count in self.kernel_params:
            lines.append(f"#define P_{n.upper()} {at}")
            at += count
        lines.append(f"#define P_COUNT {at}")
        return "\n".join(lines) + "\n"

    def kernel_table_source(self) -> str:
        """The ``__constant__`` definitions of :attr:`kernel_tables`, as the kernel source uses them."""
        if not self.kernel_tables:
            return ""
        lines = [f"// generated from DECLARATION.kernel_tables of feature {self.name}"]
        for declarator, values in self.kernel_tables:
            lines.append(f"__constant__ {declarator} = {_c_initializer(values)};")
        return "\n".join(lines) + "\n"

    def pack_kernel_params(self, values: Mapping[str, Any]) -> list[int]:
        """One parameter block from ``{name: value or sequence of count values}``, in the declared order.

        Every declared name must be given, with its count of values, and no other."""
        extra = set(values) - {n for n, _ in self.kernel_params}
        if extra:
            raise KeyError(f"{self.name}: not in kernel_params: {sorted(extra)}")
        row: list[int] = []
        for n, count in self.kernel_params:
            v = values[n]
            got = [int(x) for x in v] if count != 1 or isinstance(v, (tuple, list)) else [int(v)]
            if len(got) != count:
                raise ValueError(f"{self.name}: kernel parameter {n} takes {count} values, got {len(got)}")
            row += got
        return row

    def lag_for(self, values: Mapping[str, Any]) -> int:
        """Frames after frame *i* to see before frame *i* is final, with these options."""
        return self.max_lag if self.lag is None else min(self.max_lag, self.lag(values))

    def option(self, name: str) -> Option:
        for opt in self.options:
            if opt.name == name or (opt.alias is not None and opt.alias == name):
                return opt
        raise OptionError(f"{self.name}.{name}", f"{self.name} has no option {name!r}")

    def with_defaults(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` (already resolved, or partial) over the declaration's defaults, unparsed."""
        return {**{o.name: o.default for o in self.options}, **values}

    def resolve_options(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults overlaid with ``given`` (names or aliases), each parsed and bounded."""
        values = {opt.name: opt.default for opt in self.options}
        for key, value in (given or {}).items():
            opt = self.option(key)
            values[opt.name] = opt.parse(self.name, value)
        if self.validate is not None:
            self.validate(values)
        return values

    def name_suffix(self, values: Mapping[str, Any]) -> str:
        """libvmaf's option suffix, options sorted alphabetically by name."""
        return "".join(
            opt.name_suffix(values[opt.name])
            for opt in sorted(self.options, key=lambda o: o.name)
            if opt.name in values
        )

    def metric_names(self, values: Mapping[str, Any]) -> dict[str, str]:
        """Map base metric name -> output name for the given resolved options."""
        suffix = self.name_suffix(values)
        names = list(self.provides)
        if values.get("debug"):
            names += list(self.debug_provides)
        for option, extra in self.option_provides:
            if values.get(option):
                names += [n for n in extra if n not in names]
        return {n: n if n in self.unsuffixed else n + suffix for n in names}
