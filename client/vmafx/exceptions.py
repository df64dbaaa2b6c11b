"""The exceptions a producer sees from the client library, typed by cause.

Three families, so a caller can tell whose fault a failure is:

* :class:`DaemonError` and its subclasses: the daemon refused a request or
  failed a frame.  One subclass per wire code (``E_INVAL`` is
  :class:`InvalidArgument`, ``E_TIMEOUT`` is :class:`FenceTimeout`, ...);
  each carries the :class:`~vmafx.protocol.ErrorCode`, the offending
  ``field`` (``planes[1].pitch``, ``ref_fence``) and the daemon's message.
* :class:`ConnectionClosed`: the connection is gone (the daemon said
  goodbye, stopped, or the socket broke).  :class:`ProtocolViolation` is the
  loud variant: the daemon broke one of the protocol's promises (an outcome
  twice, a release of a buffer the frame did not reference, results out of
  order), so nothing it says can be trusted any more.
* :class:`LayoutError`: a frame buffer or plane the *caller* built is wrong
  (the library refuses it before anything is sent).  Requests that fail
  the protocol's own validation raise the protocol's
  :class:`~vmafx.protocol.LocalProtocolError`, which names the field too.
"""

from __future__ import annotations

from .protocol.errors import ErrorCode

__all__ = [
    "VmafxError", "DaemonError", "InvalidArgument", "NotSupported", "Busy", "FenceTimeout",
    "LimitReached", "NotFound", "InvalidState", "ProtocolRefused", "ShuttingDown", "DaemonInternalError",
    "AdmissionRefused", "PermissionRefused", "OutOfFds", "ConnectionRefused",
    "ConnectionClosed", "DaemonUnavailable", "DaemonStopped", "DaemonLost", "ProtocolViolation", "LayoutError",
    "daemon_error", "describe", "first_error", "EXIT_STATUS",
]


class VmafxError(Exception):
    """Base of the library's errors: a code, the offending field and a message."""

    def __init__(self, code: ErrorCode | str, field: str, message: str):
        self.code = ErrorCode(code)
        self.field = field
        self.message = message
        text = f"{self.code.value}: {field}: {message}" if field else f"{self.code.value}: {message}"
        super().__init__(text)


class DaemonError(VmafxError):
    """The daemon refused a request (``error``) or failed a frame (``frame_error``).

    For a frame's error, ``session`` and ``index`` say which frame.
    """

    def __init__(self, code, field, message, *, session: int | None = None, index: int | None = None):
        super().__init__(code, field, message)
        self.session = session
        self.index = index


class InvalidArgument(DaemonError):
    """E_INVAL: a value is out of range or inconsistent."""


class NotSupported(DaemonError):
    """E_NOTSUP: valid, but not possible on this daemon, lane or runtime."""


class Busy(DaemonError):
    """E_BUSY: try again."""


class FenceTimeout(DaemonError):
    """E_TIMEOUT: a bounded fence wait ran out (``field`` is ``ref_fence`` or ``dist_fence``)."""


class LimitReached(DaemonError):
    """E_NOMEM: a limit (buffers, sessions, frames in flight) or memory ran out."""


class NotFound(DaemonError):
    """E_NOENT: an unknown session or buffer id."""


class InvalidState(DaemonError):
    """E_STATE: not allowed now (index not increasing, session closing, ...)."""


class ProtocolRefused(DaemonError):
    """E_PROTO: the daemon says *we* broke the protocol; it closes the connection."""


class ShuttingDown(DaemonError):
    """E_SHUTDOWN: the daemon is stopping."""


class DaemonInternalError(DaemonError):
    """E_INTERNAL: a bug in the daemon."""


class AdmissionRefused(DaemonError):
    """E_LIMIT: the daemon refused the connection (``field`` names the cap, e.g. ``limits.max_clients_per_uid``)."""


class PermissionRefused(DaemonError):
    """E_PERM: the daemon does not serve this user (``allow_users``/``allow_groups``)."""


class OutOfFds(DaemonError):
    """E_NOFD: the daemon ran out of file descriptors; the request was not carried out (retry later)."""


_BY_CODE: dict[ErrorCode, type[DaemonError]] = {
    ErrorCode.E_INVAL: InvalidArgument,
    ErrorCode.E_NOTSUP: NotSupported,
    ErrorCode.E_BUSY: Busy,
    ErrorCode.E_TIMEOUT: FenceTimeout,
    ErrorCode.E_NOMEM: LimitReached,
    ErrorCode.E_NOENT: NotFound,
    ErrorCode.E_STATE: InvalidState,
    ErrorCode.E_PROTO: ProtocolRefused,
    ErrorCode.E_SHUTDOWN: ShuttingDown,
    ErrorCode.E_INTERNAL: DaemonInternalError,
    ErrorCode.E_LIMIT: AdmissionRefused,
    ErrorCode.E_PERM: PermissionRefused,
    ErrorCode.E_NOFD: OutOfFds,
}


def daemon_error(code: ErrorCode | str, field: str, message: str, *, session: int | None = None,
                 index: int | None = None) -> DaemonError:
    """The typed exception for a wire error code."""
    code = ErrorCode(code)
    return _BY_CODE[code](code, field, message, session=session, index=index)


class ConnectionClosed(VmafxError):
    """The connection to the daemon is gone; ``reason`` says why when the daemon said so."""

    def __init__(self, message: str, *, code: ErrorCode | str = ErrorCode.E_SHUTDOWN, field: str = "connection"):
        super().__init__(code, field, message)

    @property
    def reason(self) -> str:
        return self.message


class DaemonUnavailable(ConnectionClosed):
    """No daemon answers at ``path`` (no socket, connection refused, permission denied)."""

    def __init__(self, path: str, error: OSError):
        self.path = path
        self.errno = error.errno
        super().__init__(f"cannot connect to {path}: {error.strerror or error}", code=ErrorCode.E_NOENT, field="path")


class ConnectionRefused(ConnectionClosed):
    """The daemon would not serve this connection: ``code`` is ``E_LIMIT`` (a cap on connections,
    ``field`` names it), ``E_PERM`` (this user is not allowed) or ``E_NOFD`` (it is out of fds)."""


class DaemonStopped(ConnectionClosed):
    """The daemon said it is stopping (``goodbye`` or ``E_SHUTDOWN``): run again once it is back."""


class DaemonLost(ConnectionClosed):
    """The connection ended without a ``goodbye``: the daemon was killed, crashed or restarted."""

    def __init__(self, message: str):
        super().__init__(message, code=ErrorCode.E_SHUTDOWN, field="connection")


class ProtocolViolation(ConnectionClosed):
    """The daemon broke the protocol (a promise of docs/protocol.md); the connection is dropped."""

    def __init__(self, code: ErrorCode | str, field: str, message: str):
        super().__init__(message, code=code, field=field)


class LayoutError(VmafxError, ValueError):
    """A buffer, plane or fence the caller built is wrong; ``field`` names the part."""

    def __init__(self, field: str, message: str):
        super().__init__(ErrorCode.E_INVAL, field, message)


# ---------------------------------------------------------------------------
# one line and an exit status for a command line (vmafxctl prints ``describe(e)``)

#: Exit statuses, one per kind of failure (sysexits.h numbers where one fits).
EXIT_STATUS = {
    "failed": 1,          # anything not below (a frame failed, the daemon refused a value of ours)
    # Bad input is 1 on every path (docs/cli.md), the in-process one too: the message says which.
    "bad_input": 1,       # an input file or argument the daemon or the reader refused
    "no_input": 1,        # an input file that cannot be opened or read
    "unavailable": 69,    # EX_UNAVAILABLE: no daemon answers at the socket (absent, refused, no permission)
    "internal": 70,       # EX_SOFTWARE: the daemon reported a bug of its own (E_INTERNAL)
    "lost": 74,           # EX_IOERR: the daemon went away without a goodbye (killed, crashed)
    "stopped": 75,        # EX_TEMPFAIL: the daemon is stopping, or refused for now (busy, a limit)
    "protocol": 76,       # EX_PROTOCOL: one side broke the protocol
}


def first_error(exc: BaseException) -> BaseException:
    """The error to report for ``exc``: the most telling leaf of an exception group.

    trio's nurseries wrap a failure in groups, often with the same connection
    failure raised in several tasks; the connection's own reason (what ended
    it) wins over a task's consequence of it.
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        stack = [exc]
        while stack:
            e = stack.pop(0)
            if isinstance(e, BaseExceptionGroup):
                stack.extend(e.exceptions)
            else:
                leaves.append(e)
        for kind in (ProtocolViolation, DaemonLost, DaemonStopped, DaemonUnavailable, ConnectionClosed, VmafxError):
            for e in leaves:
                if isinstance(e, kind):
                    return e
        return leaves[0] if leaves else exc
    return exc


def describe(exc: BaseException) -> tuple[str, int]:
    """One line that says what happened and what to do, and the exit status, for ``exc``.

    For a command line: ``line, status = describe(e); print(f"vmafxctl: {line}"); exit(status)``.
    Unknown exceptions get their type and message on one line and status 1.
    """
    exc = first_error(exc)
    one = lambda text: " ".join(str(text).split())  # noqa: E731  (one line, whatever the message held)
    if type(exc).__name__ == "PrivateDaemonError":  # vmafx.private_daemon (not imported here: it starts processes)
        last = (getattr(exc, "log", "") or "").strip().splitlines()[-1:] or [""]
        return (one(f"could not start a private vmafxd: {getattr(exc, 'summary', exc)}"
                    + (f"; its log ends: {last[0]}" if last[0] else "")
                    + "; try --in-process, or start the service (systemctl start vmafxd)"), EXIT_STATUS["unavailable"])
    if isinstance(exc, DaemonUnavailable):
        return (one(f"no daemon answers at {exc.path} ({exc.message.rsplit(': ', 1)[-1]}); start it "
                    f"(systemctl start vmafxd) or leave out --socket to score with a private one"),
                EXIT_STATUS["unavailable"])
    if isinstance(exc, ProtocolViolation):
        return (one(f"{exc.message}; nothing was written; please report it with the daemon's log"),
                EXIT_STATUS["protocol"])
    if isinstance(exc, DaemonLost):
        return (one(f"the daemon went away without a goodbye (killed, crashed or restarted: {exc.message}); "
                    f"nothing was written; check its log (journalctl -u vmafxd) and run the command again"),
                EXIT_STATUS["lost"])
    if isinstance(exc, DaemonStopped):
        return (one(f"the daemon is stopping ({exc.message}); nothing was written; "
                    f"run the command again once it is back"), EXIT_STATUS["stopped"])
    if isinstance(exc, ConnectionClosed):
        status = EXIT_STATUS["protocol"] if exc.code is ErrorCode.E_PROTO else EXIT_STATUS["lost"]
        return one(f"the connection to the daemon closed: {exc.message}; nothing was written"), status
    if isinstance(exc, (Busy, LimitReached)):
        return one(f"the daemon refused: {exc}; try again later or with fewer frames in flight"), EXIT_STATUS["stopped"]
    if isinstance(exc, ShuttingDown):
        return one(f"the daemon is stopping ({exc.message}); run the command again once it is back"), \
            EXIT_STATUS["stopped"]
    if isinstance(exc, DaemonInternalError):
        return one(f"the daemon failed: {exc}; please report it with the daemon's log"), EXIT_STATUS["internal"]
    if isinstance(exc, ProtocolRefused):
        return one(f"the daemon refused our message: {exc}"), EXIT_STATUS["protocol"]
    if isinstance(exc, (InvalidArgument, NotSupported, LayoutError)):
        return one(str(exc)), EXIT_STATUS["bad_input"]
    if isinstance(exc, VmafxError):
        return one(str(exc)), EXIT_STATUS["failed"]
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
        name = getattr(exc, "filename", None)
        return one(f"cannot read {name}: {exc.strerror}" if name else str(exc)), EXIT_STATUS["no_input"]
    if isinstance(exc, ValueError):
        return one(str(exc)), EXIT_STATUS["bad_input"]
    if isinstance(exc, OSError):
        return one(str(exc)), EXIT_STATUS["no_input"] if getattr(exc, "filename", None) else EXIT_STATUS["failed"]
    return one(f"{type(exc).__name__}: {exc}"), EXIT_STATUS["failed"]
