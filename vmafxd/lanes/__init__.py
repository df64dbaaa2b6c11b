"""The lane registry: which lanes exist, and building the one the daemon runs.

:data:`LANE_FACTORIES` maps a lane name to the function that builds it,
``"module:function"`` (imported only when that lane is asked for, so the CPU
lane never imports a GPU binding) or a callable.  A factory is called as
``factory(config, services)`` and returns a :class:`~vmafxd.lanes.device.Lane`,
or raises :class:`LaneUnavailable` when its runtime or device is missing (an
``ImportError`` or the runtime layer's ``RuntimeUnavailable`` on the way is
reported the same way).  Adding the CUDA or HIP
lane is one line in the table (or :func:`register_lane`); ``auto`` picks the
first lane of :data:`AUTO_ORDER` that builds.

With ``lane_process = true`` in the configuration (``--lane-process``), a GPU lane
(:data:`PROCESS_LANES`) is built as :class:`vmafxd.lanes.process.proxy.ProcessLane`:
the same lane, its device work in one worker process per device.

The interface every lane implements is documented in :mod:`vmafxd.lanes.device`.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .device import Lane, LaneServices

try:  # the GPU runtime layer's "no driver / no device" error, when that layer is present
    from .runtime import RuntimeUnavailable as _RuntimeUnavailable
except ImportError:  # pragma: no cover
    _RuntimeUnavailable = ()  # type: ignore[assignment,misc]

__all__ = [
    "LANE_NAMES", "AUTO_ORDER", "LANE_FACTORIES", "LaneUnavailable", "create_lane", "register_lane",
    "Lane", "LaneServices",
]

log = logging.getLogger("vmafxd.lanes")

#: every lane the daemon can run ("emu": the GPU lane over the CPU emulator of
#: its kernels, for tests and CI -- never chosen by auto)
LANE_NAMES = ("cpu", "cuda", "hip", "emu")
#: what ``--lane auto`` tries, best first
AUTO_ORDER = ("cuda", "hip", "cpu")
#: the lanes that can run in worker processes (``lane_process``); the CPU lane is the daemon's threads
PROCESS_LANES = ("cuda", "hip", "emu")

Factory = Callable[[Any, "LaneServices"], "Lane"]


def __getattr__(name: str):
    """``Lane`` and ``LaneServices``, from :mod:`vmafxd.lanes.device` on first use.

    The lane interface imports trio (a lane's ``run`` is a trio task), which costs
    about 0.1 s; the lanes' own modules (``compiled``, ``gpu.in_process``) are
    imported through this package by the command line's in-process scoring, which
    never runs a lane and must not pay for it."""
    if name in ("Lane", "LaneServices"):
        from . import device

        return getattr(device, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: lane name -> "module:function" or a callable; lanes not listed are not built into this daemon
LANE_FACTORIES: dict[str, str | Factory] = {
    "cpu": "vmafxd.lanes.cpu:create_lane",
    "cuda": "vmafxd.lanes.gpu.lane:create_cuda_lane",
    "hip": "vmafxd.lanes.gpu.lane:create_hip_lane",
    "emu": "vmafxd.lanes.gpu.lane:create_emu_lane",
}


class LaneUnavailable(Exception):
    """A lane cannot run here; ``reason`` says why (no runtime, no device, not built in)."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"lane {name} is not available: {reason}")
        self.name = name
        self.reason = reason


def register_lane(name: str, factory: str | Factory) -> None:
    if name not in LANE_NAMES:
        raise ValueError(f"unknown lane {name!r} (the protocol knows {', '.join(LANE_NAMES)})")
    LANE_FACTORIES[name] = factory


def _factory(name: str) -> Factory:
    if name not in LANE_NAMES:
        raise LaneUnavailable(name, f"unknown lane (known: {', '.join(LANE_NAMES)})")
    spec = LANE_FACTORIES.get(name)
    if spec is None:
        raise LaneUnavailable(name, "this build of vmafxd has no such lane yet")
    if callable(spec):
        return spec
    module, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as e:
        raise LaneUnavailable(name, f"its runtime cannot be imported ({e})") from None


def create_lane(name: str, config: Any, services: LaneServices) -> Lane:
    """Build lane ``name`` (or ``auto``).  Raises :class:`LaneUnavailable`."""
    if name == "auto":
        reasons = []
        for candidate in AUTO_ORDER:
            try:
                lane = create_lane(candidate, config, services)
            except LaneUnavailable as e:
                reasons.append(str(e))
                continue
            log.info("lane auto: using %s", candidate)
            for r in reasons:
                log.info("lane auto: %s", r)
            return lane
        raise LaneUnavailable("auto", "; ".join(reasons))
    try:
        if name in PROCESS_LANES and getattr(config, "lane_process", False):
            from .process.proxy import ProcessLane

            return ProcessLane(name, config, services)
        return _factory(name)(config, services)
    except ImportError as e:
        raise LaneUnavailable(name, f"its runtime cannot be imported ({e})") from None
    except _RuntimeUnavailable as e:
        raise LaneUnavailable(name, getattr(e, "reason", str(e))) from None
