"""The lanes' own errors.  The daemon maps them to protocol codes; nothing here knows those codes.

:class:`LaneError` is the base: ``field`` (optional) names the request field
the error is about (``size``, ``planes[0].fd``), so the daemon can answer
naming it.  :class:`RuntimeCallError` is the one error of the GPU runtime
layer (``vmafxd/lanes/runtime.py`` and its bindings): a driver or runtime call
that failed, with the runtime's name, the call and the driver's error name
and code; :class:`CompileError` is the same for the kernel compiler and
carries its log.
"""

from __future__ import annotations

__all__ = ["LaneError", "RuntimeCallError", "CompileError"]


class LaneError(Exception):
    """A lane refused or failed something; ``field`` names the request field when one is to blame."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class RuntimeCallError(LaneError):
    """A driver/runtime call failed: ``runtime`` ("cuda", "hip", "emu"), ``call``, the driver's
    ``error`` name (``CUDA_ERROR_NOT_SUPPORTED``) and numeric ``code`` (None when unknown)."""

    def __init__(self, runtime: str, call: str, error: str, code: int | None = None, detail: str = "",
                 *, field: str | None = None):
        msg = f"{runtime}: {call} failed with {error}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg, field)
        self.runtime = runtime
        self.call = call
        self.error = error
        self.code = code

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
