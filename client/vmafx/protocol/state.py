"""Connection state, sans I/O, in h11's manner: the protocol's rules as tables.

Everything that moves a connection from one state to another is data here:

* :data:`TRANSITIONS` -- per role, ``(state, event) -> state``;
* :data:`CLIENT_SENDS` / :data:`SERVER_SENDS` -- what each side may send in
  each state (the receiving side checks the same table);
* :data:`REPLY_TO` -- which reply answers which request;
* :class:`FramePromise` -- the protocol's per-frame promise (exactly one
  outcome, exactly one ``released`` per role), kept in this one place: the
  client's :class:`ClientFrameLedger` checks the daemon with it, and the
  daemon's own frame ledger (``vmafxd/ledger.py``) keeps its word with it.

:class:`ServerConnection` and :class:`ClientConnection` only look the tables
up (:func:`next_state`, :func:`check_send`); the transport hands packets in
and takes packets out and decides nothing.  As in h11, a breach found while
receiving -- a fatal decoding error, a message the peer may not send now, a
broken frame promise -- moves the connection to :attr:`State.ERROR`, which is
sticky.  A breach by this side (:class:`LocalProtocolError` on ``send``)
changes nothing: nothing was sent.  docs/protocol.md ("Connection states")
shows the same tables; tests/protocol/test_state_tables.py checks that the
document and this module agree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import vmafx.protocol.codec as codec  # the modules themselves: "from . import" would name the package
import vmafx.protocol.messages as m
from .errors import FATAL_CODES, ErrorCode, LocalProtocolError, ProtocolError, RemoteProtocolError
from .limits import PROTOCOL_VERSION, Limits

__all__ = [
    "State", "Role", "Event", "TRANSITIONS", "CLIENT_SENDS", "SERVER_SENDS", "REPLY_TO", "UNSOLICITED",
    "next_state", "check_send", "FramePromise", "ServerConnection", "ClientConnection", "ClientFrameLedger",
    "check_packet",
]


class IdentityEnum(enum.Enum):
    """An enum hashed by identity: its members are singletons, and the state tables are looked
    up per frame; Enum's own ``__hash__`` (of the name) is a Python call each time."""

    __hash__ = object.__hash__


class State(IdentityEnum):
    AWAIT_HELLO = "await_hello"
    OPEN = "open"
    CLOSED = "closed"  # after a goodbye, the daemon's closing error, or the transport's end
    ERROR = "error"  # the peer broke the protocol (sticky)


class Role(IdentityEnum):
    CLIENT = "client"
    SERVER = "server"


class Event(IdentityEnum):
    #: the server accepts a hello; the client receives the hello_reply
    HELLO = "hello"
    #: the server sends goodbye; the client receives it
    GOODBYE = "goodbye"
    #: the client receives an ``error`` with a code after which the daemon closes (E_PROTO, E_SHUTDOWN)
    CLOSING_ERROR = "closing_error"
    #: a breach found while receiving (fatal decoding error, a message not allowed now, a broken promise)
    PROTOCOL_ERROR = "protocol_error"
    #: the transport ended, or this side closed it
    CLOSE = "close"


_S, _E = State, Event


def _by_event(rows: dict[Event, dict[State, State]]) -> dict[tuple[State, Event], State]:
    """The (state, event) -> next state table of rows written per event: {event: {state: next}}."""
    return {(state, event): nxt for event, moves in rows.items() for state, nxt in moves.items()}


#: Ending the connection (goodbye, the transport's end) closes it from any state but ERROR,
#: which is sticky; a breach found while receiving makes it ERROR.
_CLOSES = {_S.AWAIT_HELLO: _S.CLOSED, _S.OPEN: _S.CLOSED, _S.CLOSED: _S.CLOSED}
_ENDS = {**_CLOSES, _S.ERROR: _S.ERROR}
_BREACH = {_S.AWAIT_HELLO: _S.ERROR, _S.OPEN: _S.ERROR, _S.ERROR: _S.ERROR}

#: (state, event) -> next state, per role.  A pair that is not here is a bug in the caller.
TRANSITIONS: dict[Role, dict[tuple[State, Event], State]] = {
    Role.SERVER: _by_event({
        _E.HELLO: {_S.AWAIT_HELLO: _S.OPEN},
        _E.GOODBYE: _ENDS,
        _E.PROTOCOL_ERROR: _BREACH,
        _E.CLOSE: _ENDS,
    }),
    Role.CLIENT: _by_event({
        _E.HELLO: {_S.AWAIT_HELLO: _S.OPEN},
        _E.GOODBYE: _CLOSES,
        _E.CLOSING_ERROR: _CLOSES,
        _E.PROTOCOL_ERROR: {**_BREACH, _S.CLOSED: _S.ERROR},
        _E.CLOSE: _ENDS,
    }),
}

#: What a client may send in each state (the server checks incoming messages against it).
CLIENT_SENDS: dict[State, frozenset[type[m.Message]]] = {
    _S.AWAIT_HELLO: frozenset({m.Hello}),
    _S.OPEN: frozenset({m.OpenSession, m.CloseSession, m.RegisterBuffer, m.UnregisterBuffer, m.Submit,
                        m.SubmitMany, m.Status, m.ListSessions, m.ScoreFiles}),
    _S.CLOSED: frozenset(),
    _S.ERROR: frozenset(),
}
#: What the server may send in each state (the client checks incoming messages against it).
#: Before hello: the reply, or an error (a request before hello, a wrong version), or goodbye
#: at shutdown.  Once broken: only the error that says why, and goodbye.  Once closed
#: (after goodbye) the daemon still answers, with ``E_SHUTDOWN``, the submits the client
#: sent before it read the goodbye (a ``frame_error`` and both ``released`` each), so that
#: every submitted frame gets exactly one answer however the shutdown and a submit cross.
SERVER_SENDS: dict[State, frozenset[type[m.Message]]] = {
    _S.AWAIT_HELLO: frozenset({m.HelloReply, m.Error, m.Goodbye}),
    _S.OPEN: frozenset({m.HelloReply, m.SessionOpened, m.SessionClosed, m.BufferRegistered,
                        m.BufferUnregistered, m.StatusReply, m.SessionsReply, m.Result, m.ResultMany,
                        m.FrameError, m.Released, m.ReleasedMany, m.FilesFrames, m.FilesScored, m.Error,
                        m.Goodbye}),
    _S.CLOSED: frozenset({m.Error, m.Goodbye, m.FrameError, m.Released, m.ReleasedMany}),
    _S.ERROR: frozenset({m.Error, m.Goodbye}),
}
REPLY_TO = {
    m.Hello: {m.HelloReply},
    m.OpenSession: {m.SessionOpened},
    m.CloseSession: {m.SessionClosed},
    m.RegisterBuffer: {m.BufferRegistered},
    m.UnregisterBuffer: {m.BufferUnregistered},
    m.Status: {m.StatusReply},
    m.ListSessions: {m.SessionsReply},
    m.ScoreFiles: {m.FilesScored},
}
#: messages the daemon sends without a request
UNSOLICITED = {m.Result, m.ResultMany, m.FrameError, m.Released, m.ReleasedMany, m.Goodbye, m.Error,
               m.SessionClosed}


def next_state(role: Role, state: State, event: Event) -> State:
    """The table's answer; a pair the table does not have is a bug here, not the peer's."""
    try:
        return TRANSITIONS[role][(state, event)]
    except KeyError:
        raise LocalProtocolError(ErrorCode.E_STATE, "state",
                                 f"the {role.value} has no transition from {state.value} on {event.value}") from None


def check_send(sender: Role, state: State, msg: m.Message, error: type[ProtocolError]) -> None:
    """Raise ``error`` unless ``sender`` may send ``msg`` in ``state``."""
    allowed = (CLIENT_SENDS if sender is Role.CLIENT else SERVER_SENDS)[state]
    if type(msg) not in allowed:
        raise error(ErrorCode.E_STATE if state is State.AWAIT_HELLO else ErrorCode.E_PROTO, "t",
                    f"a {sender.value} does not send {msg.TYPE} in state {state.value}")


def _check_submit_many(msg: m.SubmitMany, taken: bool, untaken: str, limits: Limits, error: type[ProtocolError],
                       codes: tuple[ErrorCode, ErrorCode]) -> None:
    """Raise ``error`` unless this connection takes submit_many (``taken``; ``untaken`` says why
    not) and ``msg`` keeps to ``max_frames_per_submit``; ``codes``: the code for each refusal.

    Both sides keep the one rule: the daemon receiving (the client broke its word: E_PROTO both),
    the client sending (nothing sent: E_STATE, then E_INVAL for the caller's frames).
    """
    if not taken:
        raise error(codes[0], "t", untaken)
    if len(msg.frames) > limits.max_frames_per_submit:
        raise error(codes[1], "frames", f"{len(msg.frames)} frames exceed the limit of "
                    f"{limits.max_frames_per_submit} (max_frames_per_submit)")


# ---------------------------------------------------------------------------
# the per-frame promise


@dataclass(slots=True, init=False)
class FramePromise:
    """One submitted frame's promise: exactly one outcome, exactly one ``released`` per role.

    The one place the rule is kept.  ``breach`` is the error to raise when it
    is broken: :class:`RemoteProtocolError` where the peer keeps the promise
    (the client checking the daemon), :class:`LocalProtocolError` where this
    side does (the daemon's frame ledger, about to send a second outcome).
    """

    #: what it is for: a name, or ``(session, index)`` (formatted only when an error needs it:
    #: a promise is made for every frame)
    label: str | tuple[int, int] = "frame"
    answered: bool = False
    #: the roles not released yet (``{"ref", "dist"}`` when not given)
    unreleased: set[str]

    def __init__(self, label: str | tuple[int, int] = "frame", answered: bool = False,
                 unreleased: set[str] | None = None):
        # written out, not the dataclass's (it calls a factory): a promise is made for every frame, twice
        self.label = label
        self.answered = answered
        self.unreleased = {"ref", "dist"} if unreleased is None else unreleased

    @property
    def name(self) -> str:
        label = self.label
        return label if isinstance(label, str) else f"frame {label[1]} of session {label[0]}"

    def answer(self, breach: type[ProtocolError]) -> None:
        if self.answered:
            raise breach(ErrorCode.E_PROTO, "index", f"a second outcome for {self.name}")
        self.answered = True

    def release(self, role: str, breach: type[ProtocolError]) -> None:
        if role not in self.unreleased:
            raise breach(ErrorCode.E_PROTO, "role", f"a second or unexpected release of {role} for {self.name}")
        self.unreleased.discard(role)

    @property
    def kept(self) -> bool:
        """Answered and fully released: nothing more may come for this frame."""
        return self.answered and not self.unreleased


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


_FINISHED = frozenset({State.CLOSED, State.ERROR})
_RELEASED, _RESULT = m.Released, m.Result
_RUNS = frozenset({m.ResultMany, m.ReleasedMany})
assert {_RELEASED, _RESULT} | _RUNS <= SERVER_SENDS[State.OPEN]


class _Connection:
    role: Role
    state: State

    def _to(self, event: Event) -> None:
        self.state = next_state(self.role, self.state, event)

    @property
    def finished(self) -> bool:
        """Closed or broken: only an error and goodbye may still go out."""
        return self.state in _FINISHED

    def close(self) -> None:
        self._to(Event.CLOSE)


class ServerConnection(_Connection):
    """The daemon's view of one client connection."""

    role = Role.SERVER

    def __init__(self, limits: Limits, server_name: str):
        self.limits = limits
        self.server_name = server_name
        self.state = State.AWAIT_HELLO
        self.client_name: str | None = None
        #: the hello asked to send submit_many (this daemon always takes it then)
        self.submit_many = False
        #: the hello asked to send score_files (this daemon always takes it then)
        self.score_files = False
        #: the hello asked for runs of outcomes (result_many, released_many: this daemon sends them then)
        self.outcome_runs = False

    def receive(self, data: bytes, fds: tuple[int, ...] = (), *, truncated: bool = False,
                ctrunc: bool = False) -> m.Message:
        """Decode and state-check one packet.  On error the caller closes ``fds``.

        A fatal error (``E_PROTO``) moves the connection to ERROR; the others
        (a bad field, a request before hello) refuse one message and leave the
        state as it was -- the protocol lets the client go on.
        """
        if self.finished:
            raise RemoteProtocolError(ErrorCode.E_STATE, "message", "the connection is closed")
        try:
            check_packet(len(data), len(fds), truncated, ctrunc, self.limits)
            msg = codec.decode(data, fds)
            if type(msg) not in CLIENT_SENDS[self.state]:
                if self.state is State.AWAIT_HELLO:
                    raise RemoteProtocolError(ErrorCode.E_STATE, "t", f"{msg.TYPE} before hello")
                if isinstance(msg, m.Hello):
                    raise RemoteProtocolError(ErrorCode.E_PROTO, "t",
                                              "a second hello: this connection already said hello "
                                              "(one hello per connection; connect again to start over)")
                raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"a client does not send {msg.TYPE}")
            if type(msg) is m.SubmitMany:
                _check_submit_many(msg, self.submit_many, "submit_many, but the hello did not ask for it",
                                   self.limits, RemoteProtocolError, (ErrorCode.E_PROTO, ErrorCode.E_PROTO))
            elif type(msg) is m.ScoreFiles and not self.score_files:
                raise RemoteProtocolError(ErrorCode.E_PROTO, "t", "score_files, but the hello did not ask for it")
        except RemoteProtocolError as e:
            if e.fatal:
                self._to(Event.PROTOCOL_ERROR)
            raise
        if isinstance(msg, m.Hello):
            if msg.version != PROTOCOL_VERSION:
                raise RemoteProtocolError(
                    ErrorCode.E_NOTSUP, "version",
                    f"protocol version {msg.version} is not supported (this daemon speaks {PROTOCOL_VERSION})",
                )
            self.client_name = msg.client
            self.submit_many = bool(msg.submit_many)
            self.score_files = bool(msg.score_files)
            self.outcome_runs = bool(msg.outcome_runs)
            self._to(Event.HELLO)
        return msg

    def send(self, msg: m.Message) -> tuple[bytes, tuple[int, ...]]:
        # One table lookup on the way out (every outcome and release passes here); the
        # checks below only name the refusal: "closed", or the table's own error.
        if type(msg) not in SERVER_SENDS[self.state]:
            if self.state in _FINISHED:
                raise LocalProtocolError(ErrorCode.E_STATE, "message", "the connection is closed")
            check_send(Role.SERVER, self.state, msg, LocalProtocolError)
        if type(msg) in _RUNS and not self.outcome_runs:
            raise LocalProtocolError(ErrorCode.E_STATE, "t", f"{msg.TYPE}, but the hello did not ask for outcome runs")
        data = codec.encode(msg, max_bytes=self.limits.max_message_bytes)
        if isinstance(msg, m.Goodbye):
            self._to(Event.GOODBYE)
        return data


@dataclass
class ClientFrameLedger:
    """The client's check of the daemon's per-frame promises (one :class:`FramePromise` per frame)."""

    #: (session, index) -> its promise, until every outcome and release came
    frames: dict[tuple[int, int], FramePromise] = field(default_factory=dict)

    def submitted(self, session: int, index: int) -> None:
        key = (session, index)
        if key in self.frames:
            raise LocalProtocolError(ErrorCode.E_STATE, "index", f"frame {index} of session {session} was already submitted")
        self.frames[key] = FramePromise(key)

    def submitted_many(self, session: int, indices: list[int]) -> None:
        """A submit_many's frames: all of them, or (one already submitted) none."""
        if len(set(indices)) != len(indices) or any((session, i) in self.frames for i in indices):
            raise LocalProtocolError(ErrorCode.E_STATE, "frames", f"a frame of session {session} was submitted "
                                     f"twice")
        for i in indices:
            self.frames[(session, i)] = FramePromise((session, i))

    def _promise(self, key: tuple[int, int]) -> FramePromise:
        promise = self.frames.get(key)
        if promise is None:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "index",
                                      f"an outcome or release for frame {key[1]} of session {key[0]}, "
                                      f"which is not outstanding")
        return promise

    # outcome and released run for every message of every frame: written out, no closures
    def outcome(self, session: int, index: int) -> None:
        key = (session, index)
        promise = self._promise(key)
        promise.answer(RemoteProtocolError)
        if not promise.unreleased:  # kept: answered and fully released
            del self.frames[key]

    def released(self, session: int, index: int, role: str) -> None:
        key = (session, index)
        promise = self._promise(key)
        promise.release(role, RemoteProtocolError)
        if promise.answered and not promise.unreleased:  # kept
            del self.frames[key]

    def unanswered(self, session: int | None = None) -> list[tuple[int, int]]:
        return [k for k, p in self.frames.items() if not p.answered and (session is None or k[0] == session)]

    def unreleased(self) -> int:
        return sum(len(p.unreleased) for p in self.frames.values())


class ClientConnection(_Connection):
    """The client's view: sequence numbers, pending requests and the frame ledger."""

    role = Role.CLIENT

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
        #: the hello sent asked to send submit_many, and (once true) the daemon said yes
        self._asked_submit_many = False
        self.submit_many = False
        #: the hello sent asked to send score_files, and (once true) the daemon said yes
        self._asked_score_files = False
        self.score_files = False
        #: the hello sent asked for runs of outcomes (result_many, released_many), and (once true)
        #: the daemon said it sends them
        self._asked_outcome_runs = False
        self.outcome_runs = False

    def next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        return self._seq

    def send(self, msg: m.Message) -> tuple[bytes, tuple[int, ...]]:
        try:
            check_send(Role.CLIENT, self.state, msg, LocalProtocolError)
        except LocalProtocolError:
            raise LocalProtocolError(ErrorCode.E_STATE, "message",
                                     f"cannot send {msg.TYPE} in state {self.state.value}") from None
        if type(msg) is m.SubmitMany:
            _check_submit_many(msg, self.submit_many, "the daemon did not say it takes submit_many",
                               self.limits, LocalProtocolError, (ErrorCode.E_STATE, ErrorCode.E_INVAL))
            if len(msg.fds) > self.limits.max_fds_per_message:
                raise LocalProtocolError(ErrorCode.E_INVAL, "fds", f"{len(msg.fds)} fds exceed the daemon's "
                                         f"max_fds_per_message ({self.limits.max_fds_per_message})")
        elif type(msg) is m.ScoreFiles and not self.score_files:
            raise LocalProtocolError(ErrorCode.E_STATE, "t", "the daemon did not say it takes score_files")
        data, fds = codec.encode(msg, max_bytes=self.limits.max_message_bytes)
        seq = getattr(msg, "seq", None)
        if seq is not None and type(msg) in REPLY_TO:
            self.pending[seq] = type(msg)
        cls = type(msg)
        if cls is m.Submit:
            self.ledger.submitted(msg.session, msg.index)
        elif cls is m.SubmitMany:
            self.ledger.submitted_many(msg.session, [f.index for f in msg.frames])
        elif cls is m.Hello:
            self.bundles = bool(msg.bundles)
            self._asked_submit_many = bool(msg.submit_many)
            self._asked_score_files = bool(msg.score_files)
            self._asked_outcome_runs = bool(msg.outcome_runs)
        return data, fds

    def receive(self, data: bytes) -> m.Message:
        """Apply a packet that holds one message (see :meth:`receive_packet` for bundles)."""
        msgs = self._decode(data)
        if len(msgs) != 1:
            self._to(Event.PROTOCOL_ERROR)
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", f"a bundle of {len(msgs)} messages")
        return self._apply(msgs[0])

    def receive_packet(self, data: bytes) -> list[m.Message]:
        """Apply one packet: its message, or each message of a bundle in order."""
        msgs = self._decode(data)
        ledger = self.ledger
        for msg in msgs:
            cls = type(msg)
            # A frame's messages (three a frame) while open, written out: what _apply does for
            # them (both are allowed while open: SERVER_SENDS), the frame ledger's check.
            if (cls is _RELEASED or cls is _RESULT) and self.state is State.OPEN:
                try:
                    if cls is _RESULT:
                        ledger.outcome(msg.session, msg.index)
                    else:
                        ledger.released(msg.session, msg.index, msg.role)
                except RemoteProtocolError:
                    self._to(Event.PROTOCOL_ERROR)
                    raise
            else:
                self._apply(msg)
        return msgs

    def _apply_run(self, msg: m.ResultMany | m.ReleasedMany) -> None:
        """A run of outcomes: the frame ledger's checks of each message it stands for, in order."""
        ledger, session = self.ledger, msg.session
        if type(msg) is m.ResultMany:
            for index in msg.indices:
                ledger.outcome(session, index)
        else:
            for index in msg.indices:
                ledger.released(session, index, "ref")
                ledger.released(session, index, "dist")

    def _decode(self, data: bytes) -> list[m.Message]:
        if self.state is State.ERROR:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "the daemon already broke the protocol")
        if not data:
            self._to(Event.PROTOCOL_ERROR)
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "an empty packet")
        try:
            return codec.decode_packet(data, bundles=self.bundles)
        except RemoteProtocolError:
            self._to(Event.PROTOCOL_ERROR)
            raise

    def _apply(self, msg: m.Message) -> m.Message:
        """Any breach of the daemon's -- a message not allowed now, a broken promise -- moves to ERROR."""
        if self.state is State.ERROR:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "the daemon already broke the protocol")
        try:
            return self._apply_checked(msg)
        except RemoteProtocolError:
            self._to(Event.PROTOCOL_ERROR)
            raise

    def _apply_checked(self, msg: m.Message) -> m.Message:
        check_send(Role.SERVER, self.state, msg, RemoteProtocolError)
        re = getattr(msg, "re", None)
        if isinstance(msg, m.Error):
            if re is not None:
                self.pending.pop(re, None)
            if ErrorCode(msg.code) in FATAL_CODES:
                self._to(Event.CLOSING_ERROR)
            return msg
        if isinstance(msg, (m.Result, m.FrameError)):
            self.ledger.outcome(msg.session, msg.index)
            return msg
        if isinstance(msg, m.Released):
            self.ledger.released(msg.session, msg.index, msg.role)
            return msg
        if type(msg) in _RUNS:
            if not self.outcome_runs:
                raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"{msg.TYPE}, but the daemon did not say it "
                                                                  f"sends outcome runs (or the hello did not ask)")
            self._apply_run(msg)
            return msg
        if isinstance(msg, m.Goodbye):
            self._to(Event.GOODBYE)
            return msg
        if isinstance(msg, m.SessionClosed):
            left = self.ledger.unanswered(msg.session)
            # A session_closed the daemon sends of its own (re None: at shutdown) may
            # cross submits it has not read yet; they are answered after it (E_SHUTDOWN).
            if left and re is not None:
                raise RemoteProtocolError(ErrorCode.E_PROTO, "session",
                                          f"session {msg.session} closed with {len(left)} frames unanswered")
            if re is not None:
                self.pending.pop(re, None)
            return msg
        if isinstance(msg, m.FilesFrames):  # a part of score_files' answer: the request stays pending
            if self.pending.get(re) is not m.ScoreFiles:
                raise RemoteProtocolError(ErrorCode.E_PROTO, "re", f"files_frames for no pending score_files ({re})")
            return msg
        if re is None or re not in self.pending:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "re", f"{msg.TYPE} answers no pending request")
        req = self.pending.pop(re)
        if type(msg) not in REPLY_TO[req]:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"{msg.TYPE} does not answer {req.TYPE}")
        if isinstance(msg, m.HelloReply):
            self.server = msg
            self.limits = Limits.from_wire(msg.limits)
            self.submit_many = self._asked_submit_many and bool(msg.submit_many)
            self.score_files = self._asked_score_files and bool(msg.score_files)
            self.outcome_runs = self._asked_outcome_runs and bool(msg.outcome_runs)
            self._to(Event.HELLO)
        return msg
