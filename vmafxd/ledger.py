"""A session's frames, one state each: the only place that decides outcomes and releases.

Every decoded ``submit`` becomes a :class:`FrameRecord` that lives in its
session's :class:`FrameLedger` (or, naming no session, is answered at once by
:func:`answer_without_session`).  A frame has two independent tracks, each a
table of ``(state, event) -> state`` below:

* its *outcome* (:class:`FrameState`): ``received`` (decoded, holding its
  place in the session's order) → ``acquired`` (accepted: buffer references
  taken, fences being waited for) → ``queued`` (handed to the lane) →
  ``scored`` → ``answered``; or, from any state before ``scored``, ``failed``
  (a frame_error was decided: refused, fence timeout, lane failure, shutdown)
  → ``answered``.  ``scored`` and ``failed`` exclude each other and ``answered``
  is reached once, so every frame gets exactly one outcome.
* its *buffers* (:class:`ReleaseState`): ``held`` → ``pending`` (its one entry
  in the pending-release table) → ``released`` (both ``released`` messages
  sent, the references dropped); a refused frame, never read, goes ``held`` →
  ``released`` at once.

The tracks are independent because the orders differ by lane: the CPU lane
releases a frame when its worker has read it, long before motion's lag lets
its result out; a GPU lane may report a result before the reaper has seen
the frame's release event complete.  What joins them is the rule of
``session_closed``: it leaves after the last outcome *and* after the last
release of the session, so a producer may read "closed" as "no buffer of
this session is held".  The rule sits where ``session_closed`` is sent
(:meth:`FrameLedger._flush`), so no path -- a late release event, a shutdown
that fails the last frames itself -- can send it early.

Outcomes leave in submit order: frames finish in any order (a refused frame
at once, motion's frame *i* only after frame *i + 1*), so each frame with a
place waits for the frames before it.  A frame refused without a place (the
session is closing, or the client floods it with refused frames) is answered
at once.

The per-frame promise itself -- one outcome, one ``released`` per role -- is
:class:`vmafx.protocol.state.FramePromise`, the same object the client uses to
check the daemon; the ledger keeps its word through it (a breach raises
:class:`LedgerError`).  A transition the tables do not have is a bug in the
daemon and raises :class:`LedgerError` too; the session that meets one stops
taking frames and fails the rest (:meth:`vmafxd.session.Session.ledger_broken`)
rather than stay open.

docs/frame-life.md draws the same picture.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any, Callable, Mapping, Protocol, Sequence

from vmafx.protocol import (
    ErrorCode, FrameError, LocalProtocolError, Message, Released, ReleasedMany, RemoteProtocolError, Result,
    ResultMany,
)
from vmafx.protocol.state import FramePromise, IdentityEnum

from .buffers import BufferRecord
from .frame_packets import FramePackets
from .fences import AcquireFence
from .core.release import HostReleaseEvent, ReleaseEvent
from .reaper import PendingReleases

__all__ = [
    "FrameState", "ReleaseState", "FrameEvent", "OUTCOME_TRANSITIONS", "RELEASE_TRANSITIONS", "LedgerError",
    "FrameRecord", "FrameLedger", "LedgerHost", "answer_without_session",
]

log = logging.getLogger("vmafxd.ledger")

#: A frame's result and releases, encoded straight from their values (the same bytes as
#: ``encode``; no message object per frame).  Ledgers run on the daemon's trio thread only.
_PACKETS = FramePackets()


class FrameState(IdentityEnum):
    """A frame's outcome track."""

    RECEIVED = "received"
    ACQUIRED = "acquired"
    QUEUED = "queued"
    SCORED = "scored"
    FAILED = "failed"
    ANSWERED = "answered"


class ReleaseState(IdentityEnum):
    """A frame's buffer track."""

    HELD = "held"
    PENDING = "pending"
    RELEASED = "released"


class FrameEvent(IdentityEnum):
    ACCEPT = "accept"  # checked and accepted: references taken, queued for the fence wait
    HAND_OVER = "hand_over"  # fences signalled: given to the lane
    SCORE = "score"  # the lane's final metrics
    FAIL = "fail"  # a frame_error is decided
    SEND = "send"  # the outcome leaves (its turn in the order came)
    TRACK = "track"  # the release event went into the pending-release table
    COMPLETE = "complete"  # the reaper saw the release event complete
    RELEASE_NOW = "release_now"  # refused: never read, released at once


_F, _R, _E = FrameState, ReleaseState, FrameEvent

OUTCOME_TRANSITIONS: dict[tuple[FrameState, FrameEvent], FrameState] = {
    (_F.RECEIVED, _E.ACCEPT): _F.ACQUIRED,
    (_F.ACQUIRED, _E.HAND_OVER): _F.QUEUED,
    (_F.QUEUED, _E.SCORE): _F.SCORED,
    (_F.RECEIVED, _E.FAIL): _F.FAILED,
    (_F.ACQUIRED, _E.FAIL): _F.FAILED,
    (_F.QUEUED, _E.FAIL): _F.FAILED,
    (_F.SCORED, _E.SEND): _F.ANSWERED,
    (_F.FAILED, _E.SEND): _F.ANSWERED,
}
RELEASE_TRANSITIONS: dict[tuple[ReleaseState, FrameEvent], ReleaseState] = {
    (_R.HELD, _E.TRACK): _R.PENDING,
    (_R.PENDING, _E.COMPLETE): _R.RELEASED,
    (_R.HELD, _E.RELEASE_NOW): _R.RELEASED,
}
#: the events of the release track (the others move the outcome track)
_RELEASE_EVENTS = frozenset(e for _, e in RELEASE_TRANSITIONS)
#: the two tables indexed by event, for step(): (it moves the release track, {state: next state})
_BY_EVENT: dict[FrameEvent, tuple[bool, dict]] = {
    e: (e in _RELEASE_EVENTS, {s: n for (s, ev), n in (RELEASE_TRANSITIONS if e in _RELEASE_EVENTS
                                                       else OUTCOME_TRANSITIONS).items() if ev is e})
    for e in FrameEvent
}
#: the rows of the steps the batched paths take for each frame, written out there (no call a step)
_COMPLETE_MOVES = _BY_EVENT[_E.COMPLETE][1]
assert OUTCOME_TRANSITIONS[(_F.SCORED, _E.SEND)] is _F.ANSWERED
#: states whose outcome is decided (nothing more may be decided for the frame)
DECIDED = frozenset({_F.SCORED, _F.FAILED, _F.ANSWERED})
#: states whose outcome may leave (its turn in the order came)
_SENDABLE = frozenset({_F.SCORED, _F.FAILED})


class LedgerError(LocalProtocolError):
    """The daemon was about to break a frame's rules (a transition the tables lack): a bug."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.E_INTERNAL, "", message)


#: ``LedgerHost.emit_packet``
EmitPacket = Callable[[type, tuple[bytes, ...]], None]


class FrameRecord:
    """One decoded ``submit``: what it names, what it holds, and where it is in its life."""

    __slots__ = ("session", "index", "ref_id", "dist_id", "ref", "dist", "ref_fence", "dist_fence",
                 "ref_gpu_fence", "dist_gpu_fence", "state", "release", "promise", "outcome", "placed",
                 "accepted", "event")

    def __init__(self, session: int, index: int, ref_id: Any, dist_id: Any):
        self.session = session
        self.index = index
        self.ref_id = ref_id
        self.dist_id = dist_id
        self.ref: BufferRecord | None = None
        self.dist: BufferRecord | None = None
        self.ref_fence: AcquireFence | None = None
        self.dist_fence: AcquireFence | None = None
        self.ref_gpu_fence: Any = None
        self.dist_gpu_fence: Any = None
        self.state = FrameState.RECEIVED
        self.release = ReleaseState.HELD
        self.promise = FramePromise((session, index))
        #: the frame's one outcome, once decided: a frame_error, or a scored frame's metrics
        #: (its result is encoded straight from them when it leaves)
        self.outcome: Message | dict | None = None
        #: it holds a place in its session's order of outcomes
        self.placed = False
        #: accepted for scoring (counts against max_frames_in_flight until answered)
        self.accepted = False
        #: its release event, once tracked
        self.event: ReleaseEvent | None = None

    def __repr__(self) -> str:
        return f"<frame {self.index} of session {self.session}: {self.state.value}, {self.release.value}>"

    def __str__(self) -> str:
        """Its label in the pending-release table (formatted only when a log line needs it)."""
        return f"session {self.session} frame {self.index}"

    def step(self, event: FrameEvent) -> None:
        """Move along the outcome track, or the release track, as the tables say."""
        # Called six times per frame: the event's own row of its table (_BY_EVENT), no
        # (state, event) tuple built and hashed.
        release, moves = _BY_EVENT[event]
        if release:
            nxt = moves.get(self.release)
            if nxt is None:
                self._no_transition(self.release, event)
            self.release = nxt
        else:
            nxt = moves.get(self.state)
            if nxt is None:
                self._no_transition(self.state, event)
            self.state = nxt

    def _no_transition(self, now: FrameState | ReleaseState, event: FrameEvent) -> None:
        raise LedgerError(f"frame {self.index} of session {self.session}: no transition from "
                          f"{now.value} on {event.value}")

    def close_fences(self) -> None:
        for f in (self.ref_fence, self.dist_fence):
            if f is not None:
                f.close()

    # -- the two promises, kept through the protocol's FramePromise ---------------------

    def decide(self, event: FrameEvent, outcome: Message | dict) -> None:
        self.step(event)
        self.outcome = outcome

    def send_outcome(self, emit: Callable[[Message], None], emit_packet: EmitPacket | None = None) -> bool:
        """The frame's one outcome leaves (through ``emit_packet`` as bytes when it can); True: a result."""
        outcome = self.outcome
        assert outcome is not None
        scored = self.state is _F.SCORED
        self.step(_E.SEND)
        try:
            self.promise.answer(LocalProtocolError)
        except LocalProtocolError as e:
            raise LedgerError(e.message) from None
        if scored:
            data = _PACKETS.result(self.session, self.index, outcome) if emit_packet is not None else None
            if data is not None:
                emit_packet(Result, (data,))
            else:  # the general way (it names what is wrong, should a metric be)
                emit(Result(session=self.session, index=self.index, metrics=outcome))
        else:
            emit(outcome)
        return scored

    def send_released(self, emit: Callable[[Message], None], emit_packet: EmitPacket | None = None) -> None:
        """The ``released`` messages not sent yet (the R15 plant sends them early, and only once)."""
        unreleased = self.promise.unreleased
        if not unreleased:
            return
        if emit_packet is not None and len(unreleased) == 2:
            # Both roles at once, the common case: neither was released (the promise's own check).
            pair = _PACKETS.released_pair(self.session, self.index, self.ref_id, self.dist_id)
            if pair is not None:
                unreleased.clear()
                emit_packet(Released, pair)
                return
        for role, bid in (("ref", self.ref_id), ("dist", self.dist_id)):
            if role in unreleased:
                try:
                    self.promise.release(role, LocalProtocolError)
                except LocalProtocolError as e:
                    raise LedgerError(e.message) from None
                if isinstance(bid, int):  # an undecodable submit may not name its buffers
                    emit(Released(buffer=bid, session=self.session, index=self.index, role=role))


def _frame_error(frame: FrameRecord, code: ErrorCode | str, field: str, message: str) -> FrameError:
    return FrameError(session=frame.session, index=frame.index, code=ErrorCode(code).value, field=field[:256],
                      message=message[:1024])


def _refusal(frame: FrameRecord, err: RemoteProtocolError) -> FrameError:
    return _frame_error(frame, err.code, err.field, err.message)


class LedgerHost(Protocol):
    """What a ledger needs from its connection."""

    #: the daemon's pending-release table (one per daemon, drained by the reaper)
    pending: PendingReleases
    #: the client reads runs of outcomes (result_many, released_many: its hello asked)
    outcome_runs: bool
    #: the largest packet the client takes
    max_message_bytes: int

    def emit(self, msg: Message) -> None: ...

    def emit_packet(self, cls: type[Message], packets: tuple[bytes, ...]) -> None:
        """``cls`` messages the ledger encoded itself (a frame's result, or its two released)."""

    def outcomes_sent(self, session: int, scored: int, failed: int, accepted: int) -> None:
        """Outcomes of ``session`` left: ``scored`` results and ``failed`` frame_errors, of which
        ``accepted`` frames were counted in flight and no longer are (one call per run of them)."""


class FrameLedger:
    """One session's frames: their states, their order, and the final message."""

    def __init__(self, session_id: int, host: LedgerHost, on_final: Callable[[Message], None]):
        self.session_id = session_id
        self.host = host
        #: called after the final message went out (the session is closed)
        self._on_final = on_final
        #: frames holding a place, in submit order, until their outcome leaves
        self._order: deque[FrameRecord] = deque()
        #: frames handed to the lane, by index, until their outcome is decided
        self._in_lane: dict[int, FrameRecord] = {}
        #: frames whose release entry is pending (session_closed waits for them)
        self._pending: dict[int, FrameRecord] = {}
        self._final: Callable[[], Message] | None = None
        #: the final message went out
        self.closed = False
        #: accepted frames whose outcome has not left yet (the client's max_frames_in_flight)
        self.in_flight = 0
        self.scored = 0
        self.failed = 0
        #: the pending-release table's batch callback for this ledger's frames (one bound method,
        #: kept: the reaper groups completed entries by it)
        self._complete_batch = self._complete_many

    # -- counts ---------------------------------------------------------------------------

    @property
    def unanswered(self) -> int:
        """Frames holding a place in the order (a client's bound on refused frames too)."""
        return len(self._order)

    @property
    def releasing(self) -> int:
        return len(self._pending)

    def completed_unreaped(self) -> bool:
        """Some pending frame's release event has completed and the reaper has not got to it yet."""
        for frame in self._pending.values():
            ev = frame.event
            try:
                if ev is not None and ev.recorded and ev.query():
                    return True
            except Exception:
                return False
        return False

    # -- arrival (the client handler, trio thread) ------------------------------------------

    def receive(self, frame: FrameRecord, place: bool) -> None:
        """A decoded submit of this session; ``place``: it takes its place in the order of outcomes."""
        if place:
            if self._final is not None or self.closed:
                raise LedgerError(f"session {self.session_id}: a frame placed after close")
            frame.placed = True
            self._order.append(frame)

    def receive_many(self, frames: list[FrameRecord]) -> None:
        """Decoded submits of this session (a submit_many's), each taking its place in the order."""
        if self._final is not None or self.closed:
            raise LedgerError(f"session {self.session_id}: a frame placed after close")
        for frame in frames:
            frame.placed = True
        self._order.extend(frames)

    def accept(self, frame: FrameRecord) -> None:
        """Checked: take references on both buffers; the frame goes to the session's fence wait."""
        assert frame.ref is not None and frame.dist is not None
        if not frame.placed:
            raise LedgerError(f"frame {frame.index} of session {frame.session}: accepted without a place")
        frame.step(_E.ACCEPT)
        frame.accepted = True
        frame.ref.ref()
        frame.dist.ref()
        self.in_flight += 1

    def accept_many(self, frames: list[FrameRecord]) -> None:
        """:meth:`accept` for each of ``frames`` (placed, checked, fresh: received), in one step."""
        moves = _BY_EVENT[_E.ACCEPT][1]
        for frame in frames:
            if not frame.placed:
                raise LedgerError(f"frame {frame.index} of session {frame.session}: accepted without a place")
            nxt = moves.get(frame.state)
            if nxt is None:
                frame.step(_E.ACCEPT)  # raises, naming the transition
            frame.state = nxt
            frame.accepted = True
            frame.ref.ref()
            frame.dist.ref()
            self.in_flight += 1

    def release_early(self, frame: FrameRecord) -> None:
        """The R15 plant (vmafxd/session.py): ``released`` now; references still follow the real event."""
        frame.send_released(self.host.emit, self.host.emit_packet)

    def refuse(self, frame: FrameRecord, err: RemoteProtocolError) -> None:
        """A decoded submit that will not be scored: released at once, then its frame_error in order."""
        frame.close_fences()
        frame.step(_E.RELEASE_NOW)
        frame.send_released(self.host.emit, self.host.emit_packet)
        frame.decide(_E.FAIL, _refusal(frame, err))
        if frame.placed:
            self._flush()
        else:
            self._send(frame)

    # -- the session's task ---------------------------------------------------------------

    def hand_over(self, frame: FrameRecord) -> None:
        """Fences signalled: the frame is the lane's (before ``LaneSession.submit``: a lane may answer inside it)."""
        frame.step(_E.HAND_OVER)
        self._in_lane[frame.index] = frame

    def hand_over_many(self, frames: list[FrameRecord]) -> list[FrameRecord]:
        """:meth:`hand_over` for a group (before ``LaneSession.submit_many``); returns those handed
        over: a frame answered meanwhile (shutdown past its deadline) is released unread instead."""
        moves = _BY_EVENT[_E.HAND_OVER][1]
        in_lane = self._in_lane
        ready = []
        for frame in frames:
            nxt = moves.get(frame.state)
            if nxt is None:  # not acquired any more: nothing to score
                self.release_unread(frame)
                continue
            frame.state = nxt
            in_lane[frame.index] = frame
            ready.append(frame)
        return ready

    def track(self, frame: FrameRecord, event: ReleaseEvent) -> None:
        """The frame's one entry in the pending-release table; completed by the reaper."""
        if self.closed:
            # Cannot happen: the final message waits for every pending release, and
            # frames are tracked only before the session's task ends.  Loud if it does.
            log.error("session %d: frame %d tracked for release after session_closed", self.session_id, frame.index)
        frame.step(_E.TRACK)
        frame.event = event
        self._pending[id(frame)] = frame  # before adding: a table may complete the entry at once
        # labelled by the frame itself: str() formats it only if a log line needs it; the
        # reaper completes a pass's frames of this ledger together (_complete_many)
        self.host.pending.add(event, None, frame, batch=self._complete_batch)

    def track_many(self, frames: list[FrameRecord], events: list[ReleaseEvent]) -> None:
        """:meth:`track` for each frame and its event (a group handed over at once), their entries
        added to the table in one step.  A frame that may not be tracked (a bug) does not stop the
        others; the first error is raised after them."""
        if self.closed:
            log.error("session %d: frames tracked for release after session_closed", self.session_id)
        moves = _BY_EVENT[_E.TRACK][1]
        pending = self._pending
        error: LedgerError | None = None
        tracked, their_events = [], []
        for frame, event in zip(frames, events):
            nxt = moves.get(frame.release)
            if nxt is None:
                try:
                    frame.step(_E.TRACK)  # raises, naming the transition
                except LedgerError as e:
                    error = error or e
                continue
            frame.release = nxt
            frame.event = event
            pending[id(frame)] = frame  # before adding: a table may complete the entry at once
            tracked.append(frame)
            their_events.append(event)
        self.host.pending.add_many(their_events, tracked, self._complete_batch)
        if error is not None:
            raise error

    def release_unread(self, frame: FrameRecord) -> None:
        """An accepted frame that no lane will read: released through the table like any other."""
        frame.close_fences()
        self.track(frame, HostReleaseEvent.completed())

    def fail(self, frame: FrameRecord, code: ErrorCode | str, field: str, message: str) -> None:
        """A frame_error for a frame whose outcome is not decided yet (else nothing: it has one)."""
        if frame.state in DECIDED:
            return
        self._in_lane.pop(frame.index, None)
        frame.decide(_E.FAIL, _frame_error(frame, code, field, message))
        self._flush()

    def fail_unanswered(self, code: ErrorCode, message: str) -> None:
        """Every placed frame without an outcome gets a frame_error (shutdown past its deadline)."""
        for frame in list(self._order):
            if frame.state not in DECIDED:
                self._in_lane.pop(frame.index, None)
                frame.decide(_E.FAIL, _frame_error(frame, code, "", message))
        self._flush()

    def fail_in_lane(self, code: ErrorCode, message: str) -> None:
        """The lane finished without an outcome for these (a broken promise of the lane's)."""
        for frame in list(self._in_lane.values()):
            self.fail(frame, code, "", message)

    # -- the lane's reports (trio thread) -----------------------------------------------------

    def lane_scored_many(self, items: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        """The lane's final metrics for several frames (``frames_scored``'s items): each made the
        frame's outcome with values that are not finite as nil (libvmaf's ``null``), then what
        became ready is sent."""
        in_lane = self._in_lane
        moves = _BY_EVENT[_E.SCORE][1]
        isfinite = math.isfinite
        for index, metrics in items:
            frame = in_lane.pop(index, None)
            if frame is None:
                continue  # already failed (shutdown past its deadline), or not this session's
            nxt = moves.get(frame.state)
            if nxt is None:
                frame.step(_E.SCORE)  # raises, naming the transition
            frame.state = nxt
            frame.outcome = {k: f if isfinite(f := float(v)) else None for k, v in metrics.items()}
        self._flush()

    def lane_failed(self, index: int, code: ErrorCode | str, field: str, message: str) -> None:
        frame = self._in_lane.pop(index, None)
        if frame is None:
            return
        frame.decide(_E.FAIL, _frame_error(frame, code, field, message))

    def flush(self) -> None:
        """Send what the lane's reports made ready (after a batch of reports)."""
        self._flush()

    # -- close --------------------------------------------------------------------------------

    def close(self, final: Callable[[], Message]) -> None:
        """``final()`` is built and leaves after every outcome and every pending release."""
        self._final = final
        self._flush()

    # -- internals ------------------------------------------------------------------------------

    def _complete_many(self, frames: list[FrameRecord]) -> None:
        """The reaper saw these frames' release events complete (one pass's frames of this ledger,
        or frames never read): their ``released`` leave in one write, then what became ready.  A frame that fails (a bug, logged) does not stop the others."""
        packets: list[bytes] = []
        run: _ReleaseRun | None = _ReleaseRun() if self.host.outcome_runs else None
        for frame in frames:
            try:
                self._complete_one(frame, packets, run)
            except Exception:
                log.exception("completing release %s failed", frame)
        if run is not None:
            packets += run.take(self.session_id)
        if packets:
            self.host.emit_packet(ReleasedMany if run is not None else Released, tuple(packets))
        self._flush()

    def _complete_one(self, frame: FrameRecord, packets: list[bytes], run: "_ReleaseRun | None" = None) -> None:
        """A frame's release completed: its two ``released`` added to ``packets`` (or to ``run``, for a
        client that reads runs; or, the general way, sent after what both hold), its references dropped."""
        self._pending.pop(id(frame), None)
        nxt = _COMPLETE_MOVES.get(frame.release)
        if nxt is None:
            frame.step(_E.COMPLETE)  # raises, naming the transition
        frame.release = nxt
        unreleased = frame.promise.unreleased
        # both roles at once, the common case: neither was released (the promise's own check)
        both = len(unreleased) == 2
        if both and run is not None and _PACKETS.pair_ok(frame.session, frame.index, frame.ref_id, frame.dist_id):
            unreleased.clear()
            run.add(frame.index, frame.ref_id, frame.dist_id)
        elif both and run is None and (pair := _PACKETS.released_pair(frame.session, frame.index, frame.ref_id,
                                                                      frame.dist_id)) is not None:
            unreleased.clear()
            packets += pair
        else:  # the general way (the R15 plant released early; a value it must name), after what is held
            host = self.host
            if run is not None:
                packets += run.take(self.session_id)
            if packets:
                host.emit_packet(ReleasedMany if run is not None else Released, tuple(packets))
                packets.clear()
            frame.send_released(host.emit, host.emit_packet)
        for rec in (frame.ref, frame.dist):
            if rec is not None:
                rec.unref()

    def _send(self, frame: FrameRecord) -> None:
        """One frame's outcome, out of turn (refused without a place in the order)."""
        host = self.host
        scored = frame.send_outcome(host.emit, host.emit_packet)
        if frame.accepted:
            self.in_flight -= 1
        if scored:
            self.scored += 1
        else:
            self.failed += 1
        host.outcomes_sent(self.session_id, int(scored), int(not scored), int(frame.accepted))

    def _send_ready(self) -> None:
        """Send every outcome whose turn came: the results' packets in one write (a frame_error,
        which goes the general way, first sends those before it, keeping the order)."""
        host, order = self.host, self._order
        packets: list[bytes] = []
        #: a client that reads runs: the scored frames not sent yet, (index, metrics) in order
        run: list[tuple[int, dict]] | None = [] if host.outcome_runs else None
        scored = failed = accepted = 0
        try:
            while order and order[0].state in _SENDABLE:
                frame = order.popleft()
                if frame.state is _F.SCORED:
                    frame.state = _F.ANSWERED  # the SEND step from SCORED (the table's one row)
                    try:
                        frame.promise.answer(LocalProtocolError)
                    except LocalProtocolError as e:
                        raise LedgerError(e.message) from None
                    if run is not None:
                        run.append((frame.index, frame.outcome))
                    elif (data := _PACKETS.result(frame.session, frame.index, frame.outcome)) is not None:
                        packets.append(data)
                    else:  # the general way (it names what is wrong, should a metric be)
                        if packets:
                            host.emit_packet(Result, tuple(packets))
                            packets = []
                        host.emit(Result(session=frame.session, index=frame.index, metrics=frame.outcome))
                    scored += 1
                else:
                    if run:
                        self._send_run(run)
                        run = []
                    if packets:
                        host.emit_packet(Result, tuple(packets))
                        packets = []
                    frame.send_outcome(host.emit)
                    failed += 1
                if frame.accepted:
                    accepted += 1
        finally:
            if run:
                self._send_run(run)
            if packets:
                host.emit_packet(Result, tuple(packets))
            if scored or failed:
                self.in_flight -= accepted
                self.scored += scored
                self.failed += failed
                host.outcomes_sent(self.session_id, scored, failed, accepted)

    def _send_run(self, run: list[tuple[int, dict]]) -> None:
        """Scored frames' results, in order, to a client that reads runs: result_many packets, or
        (a value one of them cannot carry) each frame's own result, the general way where needed."""
        host = self.host
        packets = _PACKETS.result_run(self.session_id, run, host.max_message_bytes)
        if packets is not None:
            host.emit_packet(ResultMany, tuple(packets))
            return
        for index, metrics in run:
            data = _PACKETS.result(self.session_id, index, metrics)
            if data is not None:
                host.emit_packet(Result, (data,))
            else:  # the general way names what is wrong
                host.emit(Result(session=self.session_id, index=index, metrics=metrics))

    def _flush(self) -> None:
        if self._order and self._order[0].state in _SENDABLE:
            self._send_ready()
        if not self._order and not self._pending and self._final is not None and not self.closed:
            self.closed = True
            final, self._final = self._final, None
            msg = final()
            self.host.emit(msg)
            self._on_final(msg)


class _ReleaseRun:
    """Frames whose two ``released`` leave in one ``released_many`` (a client that reads runs)."""

    __slots__ = ("indices", "refs", "dists")

    def __init__(self) -> None:
        self.indices: list[int] = []
        self.refs: list[int] = []
        self.dists: list[int] = []

    def add(self, index: int, ref: int, dist: int) -> None:
        self.indices.append(index)
        self.refs.append(ref)
        self.dists.append(dist)

    def take(self, session: int) -> list[bytes]:
        """The run so far as ``released_many`` packets (none when it is empty); the run starts over."""
        if not self.indices:
            return []
        out = _PACKETS.released_many(session, self.indices, self.refs, self.dists)
        self.indices, self.refs, self.dists = [], [], []
        return out


def answer_without_session(emit: Callable[[Message], None], frame: FrameRecord, err: RemoteProtocolError) -> None:
    """A decoded submit naming no session of the client's: released at once, one frame_error."""
    frame.close_fences()
    frame.step(_E.RELEASE_NOW)
    frame.send_released(emit)
    frame.decide(_E.FAIL, _refusal(frame, err))
    frame.send_outcome(emit)
