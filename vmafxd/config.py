"""The daemon's configuration: defaults, a TOML file, command-line flags -- in that order.

The file (``--config FILE``, else ``/etc/vmafx/vmafxd.toml`` when it exists)::

    socket = "/run/vmafx/vmafxd.sock"
    lane = "auto"                 # auto | cpu | cuda | hip  (emu: the GPU lane on the CPU emulator, tests)
    gpu_batch = "auto"            # most frames a GPU lane scores in one batch (auto: by picture size)
    gpu_devices = [0, 1]          # GPU ordinals to use (default: all)
    lane_process = false          # a GPU lane's device work in one worker process per device
    cpu_workers = 8
    cpu_engine = "auto"           # auto | compiled | numpy  (the CPU lane's scorer; docs/lanes.md)
    cpu_keep_heap = true          # the CPU lane keeps its freed heap (faster twins; vmafxd/lanes/cpu_alloc.py)
    log_level = "info"            # debug | info | warning | error
    shutdown_timeout_s = 10.0     # SIGTERM: how long in-flight frames may take
    files_keep_s = 60.0           # a GPU's score_files kernels and pinned slots kept this long unused
    socket_mode = "0660"
    model_dirs = ["/etc/vmafx/models"]   # where clients' path= models may live
    allow_users = ["root"]        # who may connect (names or uids), besides the daemon's own user
    allow_groups = ["vmafx"]      # ... or members of these groups (names or gids)
    admin_groups = []             # members see every user's sessions (root and the daemon's user do)
    fence_timeout_ms = 5000       # shorthand for limits.fence_timeout_ms

    [limits]                      # any field of vmafx.protocol.Limits
    max_clients = 256
    max_clients_per_uid = 32
    max_frames_in_flight = 64
    max_frame_bytes = 4294967296

Unknown keys and values of the wrong type are errors naming the key
(:class:`ConfigError`, exit status 2): a typo in a limit must not silently
leave the default in force.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from vmafx.field_error import FieldError
from vmafx.protocol import Limits
from vmafx.protocol.limits import MAX_FDS_PER_PACKET, MAX_FRAMES_PER_SUBMIT

from .core.batch_size import check_batch_setting

__all__ = ["Config", "ConfigError", "DEFAULT_CONFIG_PATH", "DEFAULT_SOCKET", "load_config", "LOG_LEVELS"]

DEFAULT_CONFIG_PATH = "/etc/vmafx/vmafxd.toml"
DEFAULT_SOCKET = "/run/vmafx/vmafxd.sock"
LOG_LEVELS = ("debug", "info", "warning", "error")
LANES = ("auto", "cpu", "cuda", "hip", "emu")
#: the CPU lane's engines (vmafxd/lanes/compiled.py ENGINES)
CPU_ENGINES = ("auto", "compiled", "numpy")


class ConfigError(FieldError):
    """A configuration value is wrong; ``field`` names it (``limits.max_clients``, ``--cpu-workers``)."""


def default_cpu_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class Config:
    socket: str = DEFAULT_SOCKET
    lane: str = "auto"
    cpu_workers: int = field(default_factory=default_cpu_workers)
    #: auto: the compiled kernels where they are faster, when a host C++ compiler is found
    cpu_engine: str = "auto"
    #: the CPU lane's allocator keeps freed memory (mallopt; vmafxd/lanes/cpu_alloc.py)
    cpu_keep_heap: bool = True
    #: an int, or "auto": 32 at 1080p and above, more for smaller pictures (vmafxd/lanes/gpu/lane.py)
    gpu_batch: int | str = "auto"
    gpu_devices: tuple[int, ...] | None = None
    #: run a GPU lane's device work in one worker process per device (vmafxd/lanes/process/)
    lane_process: bool = False
    log_level: str = "info"
    shutdown_timeout_s: float = 10.0
    #: how long a GPU's kit for score_files (kernels loaded, 4 x 64 MiB pinned host memory and
    #: their device twins) stays ready unused after a job; 0 frees it after every job
    files_keep_s: float = 60.0
    socket_mode: int = 0o660
    model_dirs: tuple[str, ...] = ("/etc/vmafx/models", "/usr/share/vmafx/models")
    limits: Limits = field(default_factory=Limits)
    #: peer-credential authorization (vmafxd/admission.py); root and the daemon's own uid always pass
    allow_users: tuple[str, ...] = ("root",)
    allow_groups: tuple[str, ...] = ("vmafx",)
    admin_groups: tuple[str, ...] = ()
    #: where the values came from, for the log
    source: str = "defaults"

    def replace(self, **kw: Any) -> "Config":
        return dataclasses.replace(self, **kw)


_LIMIT_FIELDS = {f.name for f in dataclasses.fields(Limits)}
#: limits the wire itself bounds (SCM_MAX_FD; the frames one submit_many may carry)
_LIMIT_MAXIMA = {"max_fds_per_message": MAX_FDS_PER_PACKET, "max_frames_per_submit": MAX_FRAMES_PER_SUBMIT}


def _int(key: str, v: Any, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(key, f"expected an integer, got {v!r}")
    if v < minimum:
        raise ConfigError(key, f"{v} is below the minimum {minimum}")
    return v


def _choice(key: str, v: Any, options) -> str:
    if not isinstance(v, str) or v.lower() not in options:
        raise ConfigError(key, f"{v!r} is not one of {', '.join(options)}")
    return v.lower()


def _mode(key: str, v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        m = v
    elif isinstance(v, str):
        try:
            m = int(v, 8)
        except ValueError:
            raise ConfigError(key, f"expected an octal mode such as \"0660\", got {v!r}") from None
    else:
        raise ConfigError(key, f"expected an octal mode such as \"0660\", got {v!r}")
    if not 0 <= m <= 0o777:
        raise ConfigError(key, f"{oct(m)} is not a permission mode")
    return m


def limits_with(base: Limits, overrides: Mapping[str, Any], where: str) -> Limits:
    values = dataclasses.asdict(base)
    for k, v in overrides.items():
        if k not in _LIMIT_FIELDS:
            raise ConfigError(f"{where}{k}", f"unknown limit (known: {', '.join(sorted(_LIMIT_FIELDS))})")
        values[k] = _int(f"{where}{k}", v, minimum=1 if k != "fence_timeout_ms" else 0)
        top = _LIMIT_MAXIMA.get(k)
        if top is not None and values[k] > top:
            raise ConfigError(f"{where}{k}", f"{values[k]} is above the maximum {top}")
    return Limits(**values)


def apply_mapping(cfg: Config, doc: Mapping[str, Any], source: str) -> Config:
    """Overlay a parsed TOML document on ``cfg``."""
    kw: dict[str, Any] = {}
    limits = cfg.limits
    for key, v in doc.items():
        if key == "socket":
            if not isinstance(v, str) or not v:
                raise ConfigError(key, "expected a path")
            kw[key] = v
        elif key == "lane":
            kw[key] = _choice(key, v, LANES)
        elif key == "cpu_workers":
            kw[key] = _int(key, v, minimum=1)
        elif key == "cpu_engine":
            kw[key] = _choice(key, v, CPU_ENGINES)
        elif key == "gpu_batch":
            try:
                kw[key] = check_batch_setting(v)
            except ValueError:
                raise ConfigError(key, f'expected a number of frames (at least 1) or "auto", got {v!r}') from None
        elif key == "gpu_devices":
            if isinstance(v, str):
                try:
                    v = [int(x) for x in v.split(",") if x.strip()]
                except ValueError:
                    raise ConfigError(key, f"expected device ordinals such as 0,1, got {v!r}") from None
            if not isinstance(v, list) or not v or not all(isinstance(x, int) and x >= 0 for x in v):
                raise ConfigError(key, "expected a list of device ordinals")
            kw[key] = tuple(v)
        elif key in ("lane_process", "cpu_keep_heap"):
            if not isinstance(v, bool):
                raise ConfigError(key, f"expected true or false, got {v!r}")
            kw[key] = v
        elif key == "log_level":
            kw[key] = _choice(key, v, LOG_LEVELS)
        elif key in ("shutdown_timeout_s", "files_keep_s"):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(key, f"expected a non-negative number of seconds, got {v!r}")
            kw[key] = float(v)
        elif key == "socket_mode":
            kw[key] = _mode(key, v)
        elif key == "model_dirs":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(key, "expected a list of directories")
            kw[key] = tuple(v)
        elif key in ("allow_users", "allow_groups", "admin_groups"):
            if not isinstance(v, list) or not all(isinstance(x, (str, int)) and not isinstance(x, bool)
                                                  for x in v):
                raise ConfigError(key, "expected a list of names or numeric ids")
            kw[key] = tuple(str(x) for x in v)
        elif key == "limits":
            if not isinstance(v, dict):
                raise ConfigError(key, "expected a table")
            limits = limits_with(limits, v, "limits.")
        elif key in ("fence_timeout_ms", "implicit_fence_timeout_ms"):
            limits = limits_with(limits, {key: v}, "")
        else:
            raise ConfigError(key, "unknown key")
    return cfg.replace(limits=limits, source=source, **kw)


def load_file(path: str) -> Mapping[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError("--config", f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("--config", f"{path} is not valid TOML: {e}") from None


def load_config(path: str | None, flags: Mapping[str, Any]) -> Config:
    """Defaults, then the file (``path``, or the default path if it exists), then ``flags`` (non-None values)."""
    cfg = Config()
    if path is None and os.path.exists(DEFAULT_CONFIG_PATH):
        path = DEFAULT_CONFIG_PATH
    if path is not None:
        cfg = apply_mapping(cfg, load_file(path), path)
    doc: dict[str, Any] = {}
    limit_overrides: dict[str, Any] = {}
    for key, v in flags.items():
        if v is None:
            continue
        if key == "limit":
            for item in v:
                name, sep, value = item.partition("=")
                if not sep:
                    raise ConfigError("--limit", f"expected NAME=VALUE, got {item!r}")
                try:
                    limit_overrides[name.strip()] = int(value)
                except ValueError:
                    raise ConfigError(f"--limit {name}", f"expected an integer, got {value!r}") from None
        else:
            doc[key] = v
    if doc or limit_overrides:
        if limit_overrides:
            doc["limits"] = limit_overrides
        cfg = apply_mapping(cfg, doc, cfg.source + " + flags")
    return cfg
