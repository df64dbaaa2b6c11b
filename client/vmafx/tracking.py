"""What a client knows about its requests, sessions and buffers -- sans I/O.

:class:`ClientTracker` sits on top of the protocol's
:class:`~vmafx.protocol.ClientConnection` (sequence numbers, pending
requests, the frame ledger) and adds what a *library* needs: which reply
answers which waiting call, the ordered queue of each session's outcomes,
each registered buffer's outstanding references, and the client-wide count
of frames in flight that bounds ``submit``.  It turns the things a caller
does into packets and the packets the daemon sends into state changes; it
never touches a socket.  The async :class:`vmafx.client.Client` and the
:class:`vmafx.blocking.BlockingClient` are thin I/O shells around it, so
both behave the same and both are checked the same.

On top of the ledger's two promises it checks a third and a fourth: outcomes
of a session arrive in submission order, and a ``released`` names the very
buffer the frame referenced in that role.  A daemon that breaks any of them
raises :class:`~vmafx.protocol.RemoteProtocolError`; the shells then drop
the connection and every waiter sees :class:`~vmafx.exceptions.ProtocolViolation`.
"""

from __future__ import annotations

from collections import Counter, deque
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .exceptions import (
    ConnectionClosed, ConnectionRefused, DaemonError, DaemonLost, DaemonStopped, LayoutError, ProtocolViolation,
    VmafxError, daemon_error,
)
from .protocol import messages as m
from .protocol.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .protocol.limits import Limits, PROTOCOL_VERSION
from .protocol.state import ClientConnection, State

_new_object = object.__new__
_set_attr = object.__setattr__

__all__ = ["ClientTracker", "SessionState", "BufferState", "FrameResult", "Summary", "ServerInfo",
           "ClientView", "BufferView", "SessionView"]


@dataclass(frozen=True)
class ServerInfo:
    """What the daemon said about itself in ``hello_reply``."""

    server: str
    version: int
    limits: Limits
    lanes: tuple[dict, ...]
    features: tuple[str, ...]
    models: tuple[str, ...]


@dataclass(frozen=True)
class FrameResult:
    """One frame's outcome.  A failed frame has ``error`` set and empty ``metrics``.

    Failed frames are results, not exceptions, because a frame's failure (a
    fence that timed out, say) does not end its session: the frames after it
    are still scored and still arrive.  :meth:`check` raises the error for
    callers who prefer exceptions.
    """

    session: int
    index: int
    metrics: dict[str, float | None] = field(default_factory=dict)
    error: DaemonError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def check(self) -> "FrameResult":
        if self.error is not None:
            raise self.error
        return self


@dataclass(frozen=True)
class Summary:
    """``session_closed``: frames scored, frames failed, pooled metrics and aggregates."""

    session: int
    frames: int
    failed: int
    pooled: dict[str, dict[str, float | None]]
    aggregate: dict[str, Any]


@dataclass
class SessionState:
    id: int
    lane: str
    device: int | None
    metrics: tuple[str, ...]
    models: tuple[str, ...]
    width: int
    height: int
    pixel_format: str
    bitdepth: int
    last_index: int = -1
    #: indices submitted and not yet answered, in submission order (outcomes must match)
    awaiting: deque = field(default_factory=deque)
    #: outcomes received and not yet taken by the caller
    outcomes: deque = field(default_factory=deque)
    close_seq: int | None = None
    summary: Summary | None = None
    #: frames of this session the daemon's byte budgets hold at once (session_opened's word)
    max_in_flight: int | None = None

    @property
    def closing(self) -> bool:
        return self.close_seq is not None or self.summary is not None

    @property
    def closed(self) -> bool:
        return self.summary is not None


@dataclass
class BufferState:
    id: int
    zero_copy: bool
    #: (session, index, role) of every submitted frame that has not released this buffer
    references: Counter = field(default_factory=Counter)
    unregistered: bool = False
    on_released: list[Callable[[], None]] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.references)


@dataclass
class _Reply:
    message: m.Message | None = None
    error: Exception | None = None


class ClientTracker:
    def __init__(self, client_name: str = "vmafx"):
        self.conn = ClientConnection(client_name)
        self.client_name = client_name
        self.info: ServerInfo | None = None
        self.sessions: dict[int, SessionState] = {}
        self.buffers: dict[int, BufferState] = {}
        #: seq -> reply, for requests whose caller is waiting (absent: not answered yet)
        self._replies: dict[int, _Reply] = {}
        self._waiting: set[int] = set()
        #: seq of a score_files -> the frames its files_frames brought so far
        self._files_frames: dict[int, list[dict]] = {}
        self.in_flight = 0
        #: the reason the connection cannot be used any more; set once
        self.failure: ConnectionClosed | None = None
        self.goodbye: str | None = None
        self._hello_seq: int | None = None

    # -- state ------------------------------------------------------------------

    @property
    def limits(self) -> Limits:
        return self.conn.limits

    def check_usable(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self.conn.finished:
            self.fail(DaemonStopped(self.goodbye) if self.goodbye else ConnectionClosed("the connection is closed"))
            raise self.failure

    def fail(self, exc: ConnectionClosed) -> ConnectionClosed:
        """Mark the connection unusable (first reason wins) and return the reason."""
        if self.failure is None:
            self.failure = exc
            self.conn.close()
        return self.failure

    def lost(self, why: str) -> ConnectionClosed:
        """The transport ended: the daemon's goodbye is the better reason when it sent one.

        Without a goodbye the daemon was killed, crashed or restarted (:class:`DaemonLost`).
        """
        return self.fail(DaemonStopped(self.goodbye) if self.goodbye else DaemonLost(why))

    def violated(self, e: RemoteProtocolError) -> ProtocolViolation:
        exc = ProtocolViolation(e.code, e.field, f"the daemon broke the protocol: {e.message}")
        exc.__cause__ = e
        return self.fail(exc)  # type: ignore[return-value]

    # -- requests ---------------------------------------------------------------

    def hello(self) -> tuple[int, bytes]:
        seq = self._hello_seq = self.conn.next_seq()
        data, _ = self.conn.send(m.Hello(seq=seq, version=PROTOCOL_VERSION, client=self.client_name[:128], bundles=True,
                                             session_budgets=True, submit_many=True, score_files=True,
                                             outcome_runs=True))
        self._waiting.add(seq)
        return seq, data

    def request(self, build: Callable[[int], m.Message]) -> tuple[int, bytes, tuple[int, ...]]:
        """Encode a request; ``build`` gets the seq.  The caller sends the packet, then awaits the seq."""
        self.check_usable()
        seq = self.conn.next_seq()
        data, fds = self.conn.send(build(seq))
        self._waiting.add(seq)
        return seq, data, fds

    def reply(self, seq: int) -> m.Message | None:
        """The reply to ``seq`` once it came (raising the daemon's error), else None."""
        r = self._replies.pop(seq, None)
        if r is None:
            if self.failure is not None:
                self._waiting.discard(seq)
                raise self.failure
            return None
        self._waiting.discard(seq)
        if r.error is not None:
            raise r.error
        return r.message

    def abandon(self, seq: int) -> None:
        """The caller stopped waiting (cancelled): drop the reply when it comes."""
        self._waiting.discard(seq)
        self._replies.pop(seq, None)
        self._files_frames.pop(seq, None)

    def files_request(self, reference: int, distorted: int, *, models: Sequence[str], features: Sequence[str],
                      model_texts: Sequence[str | None], lane: str, device: int | None, max_frames: int | None,
                      width: int | None, height: int | None, pixel_format, bitdepth: int | None
                      ) -> tuple[int, bytes, tuple[int, ...]]:
        """A ``score_files`` request of the fds ``reference`` and ``distorted`` (sent with it).
        E_NOTSUP when the daemon did not say it takes them."""
        if not self.conn.score_files:
            raise VmafxError(ErrorCode.E_NOTSUP, "t", "this daemon does not score files itself (score_files)")
        pixel_format = getattr(pixel_format, "value", pixel_format)
        return self.request(lambda seq: m.ScoreFiles(
            seq=seq, reference=0, distorted=1, models=tuple(models), features=tuple(features),
            model_texts=tuple(model_texts), lane=lane, device=device, max_frames=max_frames, width=width,
            height=height, pixel_format=pixel_format, bitdepth=bitdepth, fds=(reference, distorted)))

    def files_frames(self, seq: int) -> list[dict]:
        """The frames' metrics a finished score_files (``seq``) brought, in frame order."""
        return self._files_frames.pop(seq, [])

    def register_request(self, buf) -> tuple[int, bytes, tuple[int, ...]]:
        if len(buf.fds) > self.limits.max_fds_per_message:
            raise LayoutError("fds", f"{len(buf.fds)} fds exceed the daemon's limit of {self.limits.max_fds_per_message}")
        return self.request(buf.register_message)

    def registered(self, msg: m.BufferRegistered) -> BufferState:
        st = BufferState(msg.buffer, msg.zero_copy)
        self.buffers[msg.buffer] = st
        return st

    def open_request(self, *, models: Sequence[str], features: Sequence[str], width: int, height: int,
                     pixel_format: str, bitdepth: int, lane: str, device: int | None,
                     name: str | None, model_texts: Sequence[str | None] = ()) -> tuple[int, bytes, tuple[int, ...]]:
        return self.request(lambda seq: m.OpenSession(
            seq=seq, models=tuple(models), features=tuple(features), width=width, height=height,
            pixel_format=pixel_format, bitdepth=bitdepth, lane=lane, device=device, name=name,
            model_texts=tuple(model_texts)))

    def opened(self, msg: m.SessionOpened, *, width: int, height: int, pixel_format: str, bitdepth: int) -> SessionState:
        st = SessionState(msg.session, msg.lane, msg.device, tuple(msg.metrics), tuple(msg.models),
                          width, height, pixel_format, bitdepth, max_in_flight=msg.max_frames_in_flight)
        self.sessions[msg.session] = st
        return st

    def close_request(self, st: SessionState) -> tuple[int, bytes, tuple[int, ...]]:
        if st.closing:
            raise LocalProtocolError(ErrorCode.E_STATE, "session", f"session {st.id} is already closing")
        seq, data, fds = self.request(lambda seq: m.CloseSession(seq=seq, session=st.id))
        st.close_seq = seq
        return seq, data, fds

    # -- frames -----------------------------------------------------------------

    def can_submit(self, st: SessionState) -> bool:
        """Back-pressure: the daemon bounds frames in flight per client, and by their bytes
        (``st``'s ``max_in_flight``, when it said); we never exceed either."""
        return self.room(st) > 0

    def room(self, st: SessionState) -> int:
        """How many frames of ``st`` may be submitted now (the client's and the session's limits)."""
        n = self.limits.max_frames_in_flight - self.in_flight
        if st.max_in_flight is not None:
            n = min(n, st.max_in_flight - len(st.awaiting))
        return max(0, n)

    def check_frames(self, st: SessionState, frames: Sequence[tuple]) -> list[tuple]:
        """Refuse, before anything is sent, what the daemon would refuse of ``frames``:
        ``(index, ref, dist[, ref_fence[, dist_fence]])``, indices strictly increasing; ``ref``
        and ``dist`` are buffer states or handles (views).  Returns them with buffer states."""
        self.check_usable()
        if st.closing:
            raise LocalProtocolError(ErrorCode.E_STATE, "session", f"session {st.id} is closing")
        last = st.last_index
        out = []
        for k, frame in enumerate(frames):
            if not isinstance(frame, (tuple, list)) or not 3 <= len(frame) <= 5:
                raise LocalProtocolError(ErrorCode.E_INVAL, f"frames[{k}]",
                                         "expected (index, ref, dist[, ref_fence[, dist_fence]])")
            index, ref, dist = frame[0], getattr(frame[1], "_state", frame[1]), getattr(frame[2], "_state", frame[2])
            out.append((index, ref, dist, *frame[3:]))
            if isinstance(index, bool) or not isinstance(index, int) or index <= last:
                raise LocalProtocolError(ErrorCode.E_STATE, "index",
                                         f"{index!r} does not follow the last index {last} of session {st.id}")
            last = index
            for role, b in (("ref", ref), ("dist", dist)):
                if b.unregistered:
                    raise LocalProtocolError(ErrorCode.E_NOENT, role, f"buffer {b.id} was unregistered")
        return out

    @staticmethod
    def _wire_fences(ref_fence, dist_fence, fds: list[int]) -> dict[str, m.Fence | None]:
        """The frame's fences as the wire has them; their fds are appended to ``fds``."""
        wire: dict[str, m.Fence | None] = {}
        for role, fence in (("ref_fence", ref_fence), ("dist_fence", dist_fence)):
            if fence is None:
                wire[role] = None
            elif getattr(fence, "handle", None) is not None:
                wire[role] = m.Fence(fence.kind, handle=fence.handle)
            else:
                # Each fence fd travels as its own attachment (even the same fence for
                # both roles): the daemon consumes -- closes -- every fence fd it gets.
                wire[role] = m.Fence(fence.kind, fd=len(fds))
                fds.append(fence.fileno())
        return wire

    def _booked(self, st: SessionState, index: int, ref: BufferState, dist: BufferState) -> None:
        st.last_index = index
        st.awaiting.append(index)
        ref.references[(st.id, index, "ref")] += 1
        dist.references[(st.id, index, "dist")] += 1
        self.in_flight += 1

    def submit(self, st: SessionState, index: int, ref: BufferState, dist: BufferState,
               ref_fence=None, dist_fence=None) -> tuple[bytes, tuple[int, ...]]:
        self.check_frames(st, ((index, ref, dist),))
        fds: list[int] = []
        wire = self._wire_fences(ref_fence, dist_fence, fds)
        msg = m.Submit(session=st.id, index=index, ref=ref.id, dist=dist.id, fds=tuple(fds), **wire)
        data, out_fds = self.conn.send(msg)  # the ledger records the frame here
        self._booked(st, index, ref, dist)
        return data, out_fds

    def submit_packet(self, st: SessionState, frames: Sequence[tuple]) -> tuple[int, bytes, tuple[int, ...]]:
        """The next packet of ``frames`` (checked by :meth:`check_frames`; at most :meth:`room` of
        them): ``(how many frames it holds, data, fds)``.  A ``submit_many`` of as many as one
        packet carries (the daemon's ``max_frames_per_submit`` and ``max_fds_per_message``), or
        a ``submit`` of the first when the daemon takes no ``submit_many`` (an older one)."""
        first = frames[0]
        if not self.conn.submit_many or len(frames) == 1:
            return 1, *self.submit(st, *first)
        top, max_fds = self.limits.max_frames_per_submit, self.limits.max_fds_per_message
        # again, packet by packet: another task may have submitted to, or closed, the session
        # while this caller waited for room
        self.check_frames(st, frames[:top])
        out: list[m.SubmitFrame] = []
        fds: list[int] = []
        for index, ref, dist, *fences in frames[:top]:
            mark = len(fds)
            wire = self._wire_fences(*(fences + [None, None])[:2], fds)
            if len(fds) > max_fds:
                if not out:  # one frame's fences alone exceed the limit: the daemon's error, named
                    raise LocalProtocolError(ErrorCode.E_INVAL, "fds", f"{len(fds)} fence fds exceed the daemon's "
                                             f"max_fds_per_message ({max_fds})")
                del fds[mark:]
                break
            out.append(m.SubmitFrame(index, ref.id, dist.id, wire["ref_fence"], wire["dist_fence"]))
        data, out_fds = self.conn.send(m.SubmitMany(session=st.id, frames=tuple(out), fds=tuple(fds)))
        for index, ref, dist, *_ in frames[:len(out)]:
            self._booked(st, index, ref, dist)
        return len(out), data, out_fds

    def next_outcome(self, st: SessionState) -> FrameResult | None:
        return st.outcomes.popleft() if st.outcomes else None

    # -- what the daemon sends --------------------------------------------------

    def receive(self, data: bytes, nfds: int = 0, truncated: bool = False) -> list[m.Message]:
        """Apply one packet (one message, or a bundle of them, in order).  Raises
        RemoteProtocolError when the daemon broke the protocol."""
        if nfds:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "fds", f"the daemon attached {nfds} fds; it sends none")
        if truncated:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "a packet larger than the client's buffer")
        msgs = self.conn.receive_packet(data)
        for msg in msgs:
            handler = self._HANDLERS.get(type(msg))
            if handler is not None:
                handler(self, msg)
            else:
                self._answer(msg.re, _Reply(message=msg))  # type: ignore[attr-defined]
        return msgs

    def _answer(self, seq: int | None, reply: _Reply) -> None:
        if seq is not None and seq in self._waiting:
            self._replies[seq] = reply

    def _on_hello(self, msg: m.HelloReply) -> None:
        self.info = ServerInfo(msg.server, msg.version, self.conn.limits, tuple(msg.lanes),
                               tuple(msg.features), tuple(msg.models))
        self._answer(msg.re, _Reply(message=msg))

    def _on_error(self, msg: m.Error) -> None:
        err = daemon_error(msg.code, msg.field, msg.message)
        if msg.re is None and self.conn.state is State.AWAIT_HELLO and self._hello_seq in self._waiting:
            # An error before the hello_reply, answering nothing: the daemon refused the
            # connection (E_BUSY, a limit).  It is the hello's answer, so connect raises it
            # (vmafx.exceptions.describe: "the daemon refused: ...; try again later").
            self._replies[self._hello_seq] = _Reply(error=err)
            return
        if msg.re is not None and msg.re in self._waiting:
            self._replies[msg.re] = _Reply(error=err)
            # A refused close_session leaves the session open.
            for st in self.sessions.values():
                if st.close_seq == msg.re:
                    st.close_seq = None
        if msg.re is None and self.info is None and err.code in (ErrorCode.E_LIMIT, ErrorCode.E_PERM,
                                                                 ErrorCode.E_NOFD):
            # Refused at accept, before the hello was answered; the daemon closes the connection.
            self.fail(ConnectionRefused(f"the daemon refused the connection: {err.message}", code=err.code,
                                        field=err.field))
        elif err.code is ErrorCode.E_SHUTDOWN:
            self.fail(DaemonStopped(f"the daemon closed the connection: {err.message}"))
        elif err.code is ErrorCode.E_PROTO:
            # The daemon closes the connection after these: everything waiting fails with this reason.
            self.fail(ConnectionClosed(f"the daemon closed the connection: {err}", code=err.code, field=err.field))

    def _outcome(self, session: int, index: int, result: FrameResult) -> None:
        st = self.sessions.get(session)
        if st is None:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "session", f"an outcome for unknown session {session}")
        if not st.awaiting or st.awaiting[0] != index:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "index",
                                      f"frame {index} of session {session} answered out of order "
                                      f"(expected {st.awaiting[0] if st.awaiting else 'none'})")
        st.awaiting.popleft()
        st.outcomes.append(result)
        self.in_flight -= 1

    def _on_result(self, msg: m.Result) -> None:
        # FrameResult's fields set without the frozen dataclass's __init__ (four object.__setattr__
        # calls, for every frame); its metrics a copy of the message's, as before
        result = _new_object(FrameResult)
        _set_attr(result, "__dict__", {"session": msg.session, "index": msg.index, "metrics": dict(msg.metrics),
                                       "error": None})
        self._outcome(msg.session, msg.index, result)

    def _on_result_many(self, msg: m.ResultMany) -> None:
        # each frame's result as _on_result makes it, its metrics the run's row for it
        session, outcome = msg.session, self._outcome
        for index, metrics in msg.frames():
            result = _new_object(FrameResult)
            _set_attr(result, "__dict__", {"session": session, "index": index, "metrics": metrics, "error": None})
            outcome(session, index, result)

    def _on_frame_error(self, msg: m.FrameError) -> None:
        err = daemon_error(msg.code, msg.field, msg.message, session=msg.session, index=msg.index)
        self._outcome(msg.session, msg.index, FrameResult(msg.session, msg.index, {}, err))

    def _on_released(self, msg: m.Released) -> None:
        self._release(msg.buffer, msg.session, msg.index, msg.role, "buffer")

    def _on_released_many(self, msg: m.ReleasedMany) -> None:
        # each frame's two released, in order
        release, session = self._release, msg.session
        for index, ref, dist in zip(msg.indices, msg.ref, msg.dist):
            release(ref, session, index, "ref", "ref")
            release(dist, session, index, "dist", "dist")

    def _release(self, buffer: int, session: int, index: int, role: str, field: str) -> None:
        """One ``released``: the buffer's reference by the frame dropped; not busy any more, its callbacks."""
        key = (session, index, role)
        st = self.buffers.get(buffer)
        refs = st.references if st is not None else None
        n = refs.get(key) if refs is not None else None
        if not n:
            raise RemoteProtocolError(ErrorCode.E_PROTO, field,
                                      f"released buffer {buffer}, which frame {index} of session "
                                      f"{session} did not reference as {role}")
        if n > 1:
            refs[key] = n - 1
            return
        del refs[key]
        if not refs:  # not busy any more
            for callback in list(st.on_released):
                callback()

    def _on_session_closed(self, msg: m.SessionClosed) -> None:
        st = self.sessions.get(msg.session)
        if st is None:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "session", f"session_closed for unknown session {msg.session}")
        st.summary = Summary(msg.session, msg.frames, msg.failed, dict(msg.pooled), dict(msg.aggregate))
        self._answer(msg.re if msg.re is not None else st.close_seq, _Reply(message=msg))

    def _on_buffer_unregistered(self, msg: m.BufferUnregistered) -> None:
        st = self.buffers.pop(msg.buffer, None)
        if st is not None:
            st.unregistered = True
        self._answer(msg.re, _Reply(message=msg))

    def _on_files_frames(self, msg: m.FilesFrames) -> None:
        if msg.re not in self._waiting:
            return  # the caller gave up on it
        got = self._files_frames.setdefault(msg.re, [])
        if msg.first != len(got):
            raise RemoteProtocolError(ErrorCode.E_PROTO, "first", f"files_frames from frame {msg.first}, "
                                      f"expected {len(got)}")
        got.extend(msg.frames)

    def _on_goodbye(self, msg: m.Goodbye) -> None:
        self.goodbye = msg.reason or "the daemon said goodbye"

    _HANDLERS: dict[type, Callable[["ClientTracker", Any], None]] = {
        m.HelloReply: _on_hello,
        m.Error: _on_error,
        m.Result: _on_result,
        m.ResultMany: _on_result_many,
        m.FrameError: _on_frame_error,
        m.Released: _on_released,
        m.ReleasedMany: _on_released_many,
        m.SessionClosed: _on_session_closed,
        m.BufferUnregistered: _on_buffer_unregistered,
        m.FilesFrames: _on_files_frames,
        m.Goodbye: _on_goodbye,
    }


class ClientView:
    """What both clients show of the daemon: ``hello_reply``'s facts and the frames in flight."""

    _tracker: ClientTracker

    @property
    def info(self) -> ServerInfo:
        assert self._tracker.info is not None
        return self._tracker.info

    @property
    def limits(self):
        return self._tracker.limits

    @property
    def lanes(self) -> tuple[dict, ...]:
        return self.info.lanes

    @property
    def in_flight(self) -> int:
        return self._tracker.in_flight

    def _close_channel(self) -> bool:
        """Fail what waits on the tracker and close the channel; False when already closed."""
        if self._closed:
            return False
        self._closed = True
        self._tracker.fail(ConnectionClosed("the client was closed", field="client"))
        self._chan.close()
        return True


def _state_field(name: str, doc: str | None = None) -> Any:
    """A read-only attribute of a view that is its state's own (the state changes as messages arrive)."""
    return property(attrgetter(f"_state.{name}"), doc=doc)


class BufferView:
    """What both clients' buffer handles show: id, zero-copy, outstanding references."""

    def __init__(self, client, state: BufferState, buffer):
        self._client = client
        self._state = state
        #: the :class:`~vmafx.frames.FrameBuffer` registered (still the caller's to close)
        self.buffer = buffer

    id: int = _state_field("id")
    zero_copy: bool = _state_field("zero_copy", "False when the daemon's lane copies this buffer through the host.")
    busy: bool = _state_field("busy", "Some submitted frame still references the buffer: do not write it.")
    unregistered: bool = _state_field("unregistered")

    @property
    def outstanding(self) -> int:
        """References (frame, role) not yet released."""
        return sum(self._state.references.values())

    def on_released(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(handle)`` each time the buffer's last outstanding reference is released.

        It runs where messages are received (the async client's receive task,
        or inside a blocking call): it must not block, and an exception from it
        propagates from there.
        """
        self._state.on_released.append(lambda: callback(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id}, outstanding={self.outstanding})"


class SessionView:
    """What both clients' sessions show: id, lane, device, metric and model names, summary."""

    def __init__(self, client, state: SessionState):
        self._client = client
        self._state = state

    id: int = _state_field("id")
    lane: str = _state_field("lane")
    max_in_flight: int | None = _state_field(
        "max_in_flight", "Frames of this session the daemon's byte budgets hold at once (None: it did not say).")
    device: int | None = _state_field("device")
    metrics: tuple[str, ...] = _state_field("metrics")
    models: tuple[str, ...] = _state_field("models")
    summary: Summary | None = _state_field("summary", "The pooled summary once the session closed.")

    def _arrived(self) -> Iterator[FrameResult]:
        """The outcomes that have arrived and were not yet taken, in index order (consumed)."""
        tracker = self._client._tracker
        while (r := tracker.next_outcome(self._state)) is not None:
            yield r

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id}, lane={self.lane})"
