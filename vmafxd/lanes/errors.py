"""What a lane raises, and reports for a frame, when it will not or cannot go on.

Lanes know nothing of the wire: they raise these, naming the field, and the
daemon turns each class into the protocol's error code at its one boundary
with the lanes (:mod:`vmafxd.lane_errors`).  A plan a lane cannot run is a
:class:`~vmafxd.core.scoring.PlanError` (also a :class:`FieldError`), and a
fd that cannot even be inspected a plain :class:`FieldError` from
:mod:`vmafxd.core.fdkinds`; both are invalid input.

:class:`RuntimeCallError` is the one error of the GPU runtime layer
(``vmafxd/lanes/runtime.py`` and its bindings): a driver or runtime call that
failed, with the runtime's name, the call and the driver's error name and
code; :class:`CompileError` is the same for the kernel compiler and carries
its log.  Both are lane failures (``E_INTERNAL``) unless a lane re-raises a
``not_supported`` one as :class:`Unsupported`.
"""

from __future__ import annotations

from vmafx.field_error import FieldError

__all__ = [
    "LaneError", "InvalidInput", "Unsupported", "OutOfMemory", "LaneFailure", "LaneStopped",
    "RuntimeCallError", "CompileError",
]


class LaneError(FieldError):
    """A lane refuses a request or fails a frame; ``field`` names the culprit ("" for none)."""


class InvalidInput(LaneError):
    """What the client sent is wrong: the fd is not what it says, the sizes disagree, no such device."""


class Unsupported(LaneError):
    """Well formed, but not something this lane does: a buffer kind, a modifier, a fence kind."""


class OutOfMemory(LaneError):
    """The lane could not get the memory (a mapping refused with ENOMEM)."""


class LaneFailure(LaneError):
    """The lane itself failed (a device error while scoring, a session it could not open)."""


class LaneStopped(LaneError):
    """The lane stopped (shutdown) before it scored the frame."""


class RuntimeCallError(LaneFailure):
    """A driver/runtime call failed: ``runtime`` ("cuda", "hip", "emu"), ``call``, the driver's
    ``error`` name (``CUDA_ERROR_NOT_SUPPORTED``) and numeric ``code`` (None when unknown)."""

    def __init__(self, runtime: str, call: str, error: str, code: int | None = None, detail: str = "",
                 *, field: str | None = None):
        msg = f"{runtime}: {call} failed with {error}"
        if detail:
            msg += f": {detail}"
        super().__init__(field or "", msg)
        self.runtime = runtime
        self.call = call
        self.error = error
        self.code = code

    @property
    def message(self) -> str:
        return self.reason

    @property
    def not_supported(self) -> bool:
        """The driver cannot do this at all (CUDA's ``..._NOT_SUPPORTED``, HIP's ``...NotSupported``)."""
        return self.error.endswith("NOT_SUPPORTED") or self.error.endswith("NotSupported")


class CompileError(RuntimeCallError):
    """The kernel compiler refused ``source``; ``log`` is its log."""

    def __init__(self, runtime: str, source: str, log: str, call: str = "compile"):
        super().__init__(runtime, call, "COMPILE_FAILED", None, f"compiling {source}:\n{log}")
        self.source = source
        self.log = log
