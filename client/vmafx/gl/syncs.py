"""The producer's acquire: GL and EGL syncs, checked on the host before any GL work (R11)."""

from __future__ import annotations

import ctypes
import time
from typing import Any

from ..transport import ClosedOnExit
from .constants import (
    EGL_CONDITION_SATISFIED_KHR, EGL_NONE, EGL_SIGNALED_KHR, EGL_SYNC_FENCE_KHR, EGL_SYNC_REUSABLE_KHR,
    EGL_SYNC_STATUS_KHR, EGL_TIMEOUT_EXPIRED_KHR, EGL_UNSIGNALED_KHR, GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED,
    GL_TIMEOUT_EXPIRED,
)
from .egl_display import current_egl, _display_extensions
from .entry_points import _egl, _egl_error, _egl_lib, _gl, _gl_errors, _ints, _vp
from .errors import GlBusy, GlInvalid, GlNotSupported, GlTimeout, GlWrongState


class EglSync(ClosedOnExit):
    """An EGL sync object (``EGL_KHR_reusable_sync`` or ``EGL_KHR_fence_sync``), owned: ``close()`` destroys it."""

    def __init__(self, display: int, handle: int, kind: str):
        self.display = display
        self.handle: int | None = handle
        self.kind = kind

    @classmethod
    def reusable(cls, display: int | None = None) -> "EglSync":
        """A reusable sync, created unsignalled; :meth:`signal` it from any thread."""
        return cls._create(display, "reusable", EGL_SYNC_REUSABLE_KHR)

    @classmethod
    def fence(cls, display: int | None = None) -> "EglSync":
        """A fence sync after the commands issued so far in the current context."""
        return cls._create(display, "fence", EGL_SYNC_FENCE_KHR)

    @classmethod
    def _create(cls, display: int | None, kind: str, sync_type: int) -> "EglSync":
        """A sync of ``kind`` ("reusable", "fence"), refused where the display lacks EGL_KHR_<kind>_sync."""
        display = display or current_egl()[0]
        extension = f"EGL_KHR_{kind}_sync"
        if extension not in _display_extensions(display):
            raise GlNotSupported(extension, f"the EGL display has no {kind} syncs")
        h = _egl().eglCreateSyncKHR(display, sync_type, _ints(EGL_NONE))
        if not h:
            raise GlNotSupported(extension, f"eglCreateSyncKHR failed ({_egl_error()})")
        return cls(display, h, kind)

    def _mode(self, mode: int) -> None:
        if self.handle is None:
            raise GlWrongState("sync", "the sync is closed")
        if not _egl().eglSignalSyncKHR(self.display, self.handle, mode):
            raise GlInvalid("sync", f"eglSignalSyncKHR failed ({_egl_error()})")

    def signal(self) -> None:
        self._mode(EGL_SIGNALED_KHR)

    def unsignal(self) -> None:
        self._mode(EGL_UNSIGNALED_KHR)

    def close(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            _egl().eglDestroySyncKHR(self.display, h)


def _sync_address(sync: Any) -> int:
    """A GLsync as an address: an int, a ctypes pointer (PyOpenGL's ``GLsync_pointer``) or ``c_void_p``."""
    if isinstance(sync, int):
        return sync
    v = getattr(sync, "value", None)
    if isinstance(v, int):
        return v
    try:
        return ctypes.cast(sync, _vp).value or 0
    except (TypeError, ctypes.ArgumentError):
        raise GlInvalid("sync", f"{type(sync).__name__} is neither a GLsync nor an EglSync") from None


def check_sync_acquire(sync: Any) -> None:
    """The acquire sync checked on the host, without waiting: return if signalled, else ``E_BUSY`` (R11).

    A GL sync is asked with ``glClientWaitSync(sync, 0, 0)`` (no flush, no wait:
    the caller retries, ADR-2132 item 5); an :class:`EglSync` with
    ``eglClientWaitSyncKHR(display, sync, 0, 0)``.
    """
    if sync is None:
        return
    if isinstance(sync, EglSync):
        if sync.handle is None:
            raise GlWrongState("sync", "the EGL sync is closed")
        r = _egl().eglClientWaitSyncKHR(sync.display, sync.handle, 0, 0)
        if r == EGL_CONDITION_SATISFIED_KHR:
            return
        if r == EGL_TIMEOUT_EXPIRED_KHR:
            raise GlBusy("sync", f"the EGL {sync.kind} sync has not signalled yet; retry")
        err = _egl_error()
        if err == "EGL_SUCCESS":
            # Mesa answers EGL_FALSE without an error when a reusable sync is signalled
            # from another thread during the (zero-length) wait: ask its status instead.
            status = ctypes.c_int(0)
            if _egl().eglGetSyncAttribKHR(sync.display, sync.handle, EGL_SYNC_STATUS_KHR, ctypes.byref(status)):
                if status.value == EGL_SIGNALED_KHR:
                    return
                if status.value == EGL_UNSIGNALED_KHR:
                    raise GlBusy("sync", f"the EGL {sync.kind} sync has not signalled yet; retry")
            err = _egl_error()
        raise GlInvalid("sync", f"eglClientWaitSyncKHR failed ({err})")
    gl = _gl()
    current_egl()
    addr = _sync_address(sync)
    if not addr or not gl.glIsSync(addr):
        _gl_errors(gl)
        raise GlInvalid("sync", "not a GL sync object of the current context's share group")
    r = gl.glClientWaitSync(addr, 0, 0)
    if r in (GL_ALREADY_SIGNALED, GL_CONDITION_SATISFIED):
        return
    if r == GL_TIMEOUT_EXPIRED:
        raise GlBusy("sync", "the GL sync has not signalled yet; retry")
    raise GlInvalid("sync", f"glClientWaitSync failed ({', '.join(_gl_errors(gl)) or hex(r)})")


def wait_sync_acquire(sync: Any, timeout_s: float = 1.0, *, poll_s: float = 0.0005, flush: bool = True) -> int:
    """Retry :func:`check_sync_acquire` until it passes or ``timeout_s`` ends (``E_TIMEOUT`` naming ``sync``).

    ``flush``: issue ``glFlush`` once first when a context is current -- a fence
    whose commands were never flushed need never signal (GL 4.5 §4.1.2), and the
    check itself deliberately does not flush.  Returns the number of E_BUSY retries.
    """
    if flush and _egl_lib().eglGetCurrentContext():
        _gl().glFlush()
    end = time.monotonic() + max(0.0, timeout_s)
    tries = 0
    while True:
        try:
            check_sync_acquire(sync)
            return tries
        except GlBusy:
            left = end - time.monotonic()
            if left <= 0:
                raise GlTimeout("sync", f"the acquire sync did not signal within {timeout_s:g} s "
                                f"({tries} checks)") from None
            tries += 1
            time.sleep(min(poll_s, left))
