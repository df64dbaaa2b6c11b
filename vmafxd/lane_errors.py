"""The daemon's boundary with the lanes: lane errors become protocol errors here, and only here.

A lane raises :mod:`vmafxd.lanes.errors` classes (and core's
:class:`~vmafx.field_error.FieldError` for input it cannot use); the daemon
calls lanes inside :func:`lane_boundary`, or maps a frame's failure with
:func:`protocol_code`, so the wire's codes are chosen in one table.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from vmafx.field_error import FieldError
from vmafx.protocol import ErrorCode, RemoteProtocolError

from .lanes.errors import InvalidInput, LaneFailure, LaneStopped, OutOfMemory, Unsupported

__all__ = ["protocol_code", "protocol_error", "lane_boundary"]

#: lane error class -> the code the client sees (a FieldError of no class here: E_INVAL)
CODES: dict[type, ErrorCode] = {
    InvalidInput: ErrorCode.E_INVAL,
    Unsupported: ErrorCode.E_NOTSUP,
    OutOfMemory: ErrorCode.E_NOMEM,
    LaneFailure: ErrorCode.E_INTERNAL,
    LaneStopped: ErrorCode.E_SHUTDOWN,
}


def protocol_code(error: FieldError) -> ErrorCode:
    for cls in type(error).__mro__:
        code = CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.E_INVAL


def protocol_error(error: FieldError) -> RemoteProtocolError:
    return RemoteProtocolError(protocol_code(error), error.field, error.reason)


@contextmanager
def lane_boundary() -> Iterator[None]:
    """Run a lane call; a :class:`FieldError` it raises leaves as a ``RemoteProtocolError``."""
    try:
        yield
    except FieldError as e:
        raise protocol_error(e) from None
