"""Typed protocol errors that name the offending field.

Codes are the wire's vocabulary (``E_INVAL: planes[1].pitch ...``).  As in
h11, whose fault an error is stays explicit: :class:`LocalProtocolError` is
raised when *we* are about to send something invalid, and
:class:`RemoteProtocolError` when the peer sent it.  Both carry the code, the
field and a message; the daemon turns a remote error into an ``error`` (or
``frame_error``) message for the peer.
"""

from __future__ import annotations

import enum

__all__ = ["ErrorCode", "ProtocolError", "LocalProtocolError", "RemoteProtocolError", "FATAL_CODES"]


class ErrorCode(str, enum.Enum):
    E_INVAL = "E_INVAL"  # a value is out of range or inconsistent
    E_NOTSUP = "E_NOTSUP"  # valid, but this daemon/lane/runtime cannot do it
    E_BUSY = "E_BUSY"  # try again later (a fence not yet signalled on a non-blocking check)
    E_TIMEOUT = "E_TIMEOUT"  # a bounded wait ran out (acquire fence, implicit fence)
    E_NOMEM = "E_NOMEM"  # a limit on buffers, sessions, frames in flight or memory was reached
    E_PROTO = "E_PROTO"  # the peer broke the protocol; the connection is closed after this
    E_NOENT = "E_NOENT"  # an id (session, buffer) is not known
    E_STATE = "E_STATE"  # not allowed now (before hello, after close, index out of order)
    E_SHUTDOWN = "E_SHUTDOWN"  # the daemon is stopping
    E_INTERNAL = "E_INTERNAL"  # a bug or an unexpected failure in the daemon
    E_LIMIT = "E_LIMIT"  # the connection is refused: a cap on connections (per user, or the daemon's) is reached
    E_PERM = "E_PERM"  # the peer's credentials (uid, groups) are not allowed; the connection is closed
    E_NOFD = "E_NOFD"  # the daemon ran out of file descriptors (EMFILE/ENFILE); the request was not carried out


#: after these the connection cannot continue
FATAL_CODES = frozenset({ErrorCode.E_PROTO, ErrorCode.E_SHUTDOWN, ErrorCode.E_LIMIT, ErrorCode.E_PERM})


class ProtocolError(Exception):
    def __init__(self, code: ErrorCode | str, field: str, message: str):
        self.code = ErrorCode(code)
        self.field = field
        self.message = message
        super().__init__(f"{self.code.value}: {field}: {message}" if field else f"{self.code.value}: {message}")

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_CODES


class LocalProtocolError(ProtocolError):
    """We were about to send something the protocol does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""
