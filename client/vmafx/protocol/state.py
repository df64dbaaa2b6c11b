"""Connection state, sans I/O: what each side may send and receive when.

Everything that affects the protocol's state machine lives here, in tables:
which messages each role may send in each state, and which requests a reply
answers.  The transport hands packets in and takes packets out; it never
decides anything itself.

The client side also keeps the protocol's two accounting promises and
raises :class:`RemoteProtocolError` when the daemon breaks them:

* every submitted frame gets exactly one outcome (``result`` or
  ``frame_error``), before its session's ``session_closed``;
* every buffer reference of a submitted frame is ``released`` exactly once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import vmafx.protocol.messages as m  # the module itself: "from . import" would name the package
from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .limits import PROTOCOL_VERSION, Limits

__all__ = ["State", "ServerConnection", "ClientConnection", "ClientFrameLedger"]


class State(enum.Enum):
    AWAIT_HELLO = "await_hello"
    OPEN = "open"
    CLOSED = "closed"  # after a fatal error or a goodbye


# What a client may send in each state, and which reply type answers each request.
CLIENT_SENDS = {
    State.AWAIT_HELLO: {m.Hello},
    State.OPEN: {m.OpenSession, m.CloseSession, m.RegisterBuffer, m.UnregisterBuffer, m.Submit,
                 m.Status, m.ListSessions},
    State.CLOSED: set(),
}
REPLY_TO = {
    m.Hello: {m.HelloReply},
    m.OpenSession: {m.SessionOpened},
    m.CloseSession: {m.SessionClosed},
    m.RegisterBuffer: {m.BufferRegistered},
    m.UnregisterBuffer: {m.BufferUnregistered},
    m.Status: {m.StatusReply},
    m.ListSessions: {m.SessionsReply},
}
#: messages the daemon sends without a request
UNSOLICITED = {m.Result, m.FrameError, m.Released, m.Goodbye, m.Error, m.SessionClosed}


def check_packet(data_len: int, nfds: int, truncated: bool, ctrunc: bool, limits: Limits) -> None:
    """Transport-level checks, before decoding (the caller closes any fds on error)."""
    if ctrunc:
        raise RemoteProtocolError(
            ErrorCode.E_PROTO, "fds", f"more fds than the limit of {limits.max_fds_per_message} (MSG_CTRUNC)"
        )
    if truncated or data_len > limits.max_message_bytes:
        raise RemoteProtocolError(
            ErrorCode.E_PROTO, "message", f"larger than the limit of {limits.max_message_bytes} bytes"
        )
    if nfds > limits.max_fds_per_message:
        raise RemoteProtocolError(ErrorCode.E_PROTO, "fds", f"{nfds} fds exceed {limits.max_fds_per_message}")
    if data_len == 0:
        raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "empty packet")


class ServerConnection:
    """The daemon's view of one client connection."""

    def __init__(self, limits: Limits, server_name: str):
        self.limits = limits
        self.server_name = server_name
        self.state = State.AWAIT_HELLO
        self.client_name: str | None = None

    def receive(self, data: bytes, fds: tuple[int, ...] = (), *, truncated: bool = False,
                ctrunc: bool = False) -> m.Message:
        """Decode and state-check one packet.  On error the caller closes ``fds``."""
        if self.state is State.CLOSED:
            raise RemoteProtocolError(ErrorCode.E_STATE, "message", "the connection is closed")
        try:
            check_packet(len(data), len(fds), truncated, ctrunc, self.limits)
            msg = m.decode(data, fds)
        except RemoteProtocolError as e:
            if e.fatal:
                self.state = State.CLOSED
            raise
        if type(msg) not in CLIENT_SENDS[self.state]:
            if self.state is State.AWAIT_HELLO:
                raise RemoteProtocolError(ErrorCode.E_STATE, "t", f"{msg.TYPE} before hello")
            self.state = State.CLOSED
            raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"a client does not send {msg.TYPE}")
        if isinstance(msg, m.Hello):
            if msg.version != PROTOCOL_VERSION:
                raise RemoteProtocolError(
                    ErrorCode.E_NOTSUP, "version",
                    f"protocol version {msg.version} is not supported (this daemon speaks {PROTOCOL_VERSION})",
                )
            self.client_name = msg.client
            self.state = State.OPEN
        return msg

    def send(self, msg: m.Message) -> tuple[bytes, tuple[int, ...]]:
        if self.state is State.CLOSED and not isinstance(msg, (m.Error, m.Goodbye)):
            raise LocalProtocolError(ErrorCode.E_STATE, "message", "the connection is closed")
        if isinstance(msg, m.Goodbye):
            self.state = State.CLOSED
        return m.encode(msg, max_bytes=self.limits.max_message_bytes)

    def close(self) -> None:
        self.state = State.CLOSED


@dataclass
class ClientFrameLedger:
    """Outstanding frames and buffer references, to check the daemon's promises."""

    #: (session, index) -> set of roles not yet released
    frames: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    answered: set[tuple[int, int]] = field(default_factory=set)

    def submitted(self, session: int, index: int) -> None:
        key = (session, index)
        if key in self.frames or key in self.answered:
            raise LocalProtocolError(ErrorCode.E_STATE, "index", f"frame {index} of session {session} was already submitted")
        self.frames[key] = {"ref", "dist"}

    def outcome(self, session: int, index: int) -> None:
        key = (session, index)
        if key not in self.frames or key in self.answered:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "index",
                                      f"second or unexpected outcome for frame {index} of session {session}")
        self.answered.add(key)
        self._maybe_done(key)

    def released(self, session: int, index: int, role: str) -> None:
        key = (session, index)
        roles = self.frames.get(key)
        if roles is None or role not in roles:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "role",
                                      f"unexpected release of {role} for frame {index} of session {session}")
        roles.discard(role)
        self._maybe_done(key)

    def _maybe_done(self, key) -> None:
        if key in self.answered and not self.frames.get(key):
            self.frames.pop(key, None)
            self.answered.discard(key)

    def unanswered(self, session: int | None = None) -> list[tuple[int, int]]:
        return [k for k in self.frames if k not in self.answered and (session is None or k[0] == session)]

    def unreleased(self) -> int:
        return sum(len(r) for r in self.frames.values())


class ClientConnection:
    """The client's view: sequence numbers, pending requests and the frame ledger."""

    def __init__(self, client_name: str = "vmafx"):
        self.client_name = client_name
        self.state = State.AWAIT_HELLO
        self.limits = Limits()
        self._seq = 0
        self.pending: dict[int, type[m.Message]] = {}
        self.ledger = ClientFrameLedger()
        self.server: m.HelloReply | None = None
        #: the hello sent asked for bundles (packets of several messages)
        self.bundles = False

    def next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        return self._seq

    def send(self, msg: m.Message) -> tuple[bytes, tuple[int, ...]]:
        if type(msg) not in CLIENT_SENDS.get(self.state, set()) and not (
            self.state is State.AWAIT_HELLO and isinstance(msg, m.Hello)
        ):
            raise LocalProtocolError(ErrorCode.E_STATE, "message", f"cannot send {msg.TYPE} in state {self.state.value}")
        data, fds = m.encode(msg, max_bytes=self.limits.max_message_bytes)
        seq = getattr(msg, "seq", None)
        if seq is not None and type(msg) in REPLY_TO:
            self.pending[seq] = type(msg)
        if isinstance(msg, m.Submit):
            self.ledger.submitted(msg.session, msg.index)
        if isinstance(msg, m.Hello):
            self.bundles = bool(msg.bundles)
        return data, fds

    def receive(self, data: bytes) -> m.Message:
        """Apply a packet that holds one message (see :meth:`receive_packet` for bundles)."""
        msgs = self._decode(data)
        if len(msgs) != 1:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", f"a bundle of {len(msgs)} messages")
        return self._apply(msgs[0])

    def receive_packet(self, data: bytes) -> list[m.Message]:
        """Apply one packet: its message, or each message of a bundle in order."""
        return [self._apply(msg) for msg in self._decode(data)]

    def _decode(self, data: bytes) -> list[m.Message]:
        if not data:
            self.state = State.CLOSED
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "the daemon closed the connection")
        return m.decode_packet(data, bundles=self.bundles)

    def _apply(self, msg: m.Message) -> m.Message:
        re = getattr(msg, "re", None)
        if isinstance(msg, m.Error):
            if re is not None:
                self.pending.pop(re, None)
            if ErrorCode(msg.code) in (ErrorCode.E_PROTO, ErrorCode.E_SHUTDOWN):
                self.state = State.CLOSED
            return msg
        if isinstance(msg, (m.Result, m.FrameError)):
            self.ledger.outcome(msg.session, msg.index)
            return msg
        if isinstance(msg, m.Released):
            self.ledger.released(msg.session, msg.index, msg.role)
            return msg
        if isinstance(msg, m.Goodbye):
            self.state = State.CLOSED
            return msg
        if isinstance(msg, m.SessionClosed):
            left = self.ledger.unanswered(msg.session)
            if left:
                raise RemoteProtocolError(ErrorCode.E_PROTO, "session",
                                          f"session {msg.session} closed with {len(left)} frames unanswered")
            if re is not None:
                self.pending.pop(re, None)
            return msg
        if re is None or re not in self.pending:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "re", f"{msg.TYPE} answers no pending request")
        req = self.pending.pop(re)
        if type(msg) not in REPLY_TO[req]:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"{msg.TYPE} does not answer {req.TYPE}")
        if isinstance(msg, m.HelloReply):
            self.server = msg
            self.limits = Limits.from_wire(msg.limits)
            self.state = State.OPEN
        return msg
