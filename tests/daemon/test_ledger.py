"""The frame ledger's tables: every allowed transition, every refused one, one outcome, one release."""

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafx.protocol import (
    ErrorCode, FrameError, Limits, Released, ReleasedMany, RemoteProtocolError, Result, ResultMany, SessionClosed,
)
from vmafx.protocol.codec import decode, encode
from vmafxd.buffers import BufferRecord
from vmafxd.core.layout import Geometry
from vmafxd.lanes.device import LaneImport, LaneSession, LaneSummary
from vmafxd.ledger import (
    OUTCOME_TRANSITIONS, RELEASE_TRANSITIONS, FrameEvent, FrameLedger, FrameRecord, FrameState, LedgerError,
    ReleaseState, answer_without_session,
)
from vmafxd.core.release import HostReleaseEvent
from vmafxd.reaper import PendingReleases, ReleaseReaper, complete_pass
from vmafxd.session import Session, build_plan

GEO = Geometry(64, 36, PixelFormat.YUV420P, 8)
RELEASE_EVENTS = {FrameEvent.TRACK, FrameEvent.COMPLETE, FrameEvent.RELEASE_NOW}
OUTCOME_EVENTS = set(FrameEvent) - RELEASE_EVENTS


class Imp(LaneImport):
    def close(self):
        pass


def _buffer(bid):
    return BufferRecord(bid, type("L", (), {"geometry": GEO})(), Imp(), lambda rec: None)


class Host:
    #: the client reads single result and released messages (no outcome runs)
    outcome_runs = False
    max_message_bytes = 65536

    def __init__(self):
        self.pending = PendingReleases()
        self.sent = []
        self.counted = []
        #: (message type, packets) of each emit_packet call: one write each
        self.writes = []

    def emit(self, msg):
        self.sent.append(msg)

    def emit_packet(self, cls, packets):
        self.writes.append((cls.__name__, len(packets)))
        for data in packets:
            msg = decode(data)  # the ledger's own encoding: what a client reads
            assert type(msg) is cls and encode(msg)[0] == data  # the general path's bytes
            self.sent.append(msg)

    def outcomes_sent(self, session, scored, failed, accepted):
        self.counted.append((session, scored, failed, accepted))

    def complete_all(self):
        complete_pass(self.pending.take_completed())


def _frame(index, state=FrameState.RECEIVED, release=ReleaseState.HELD):
    f = FrameRecord(1, index, 10, 11)
    f.state, f.release = state, release
    return f


def _kinds(sent):
    return [(type(m).__name__, m.index) + ((m.role,) if isinstance(m, Released) else ()) for m in sent]


# -- the tables -----------------------------------------------------------------------------------


@pytest.mark.parametrize("state,event", list(OUTCOME_TRANSITIONS))
def test_every_allowed_outcome_transition(state, event):
    f = _frame(0, state)
    f.step(event)
    assert f.state is OUTCOME_TRANSITIONS[(state, event)] and f.release is ReleaseState.HELD


@pytest.mark.parametrize("state,event", list(RELEASE_TRANSITIONS))
def test_every_allowed_release_transition(state, event):
    f = _frame(0, FrameState.QUEUED, state)
    f.step(event)
    assert f.release is RELEASE_TRANSITIONS[(state, event)] and f.state is FrameState.QUEUED


@pytest.mark.parametrize("state,event", [(s, e) for s in FrameState for e in OUTCOME_EVENTS
                                         if (s, e) not in OUTCOME_TRANSITIONS])
def test_every_other_outcome_transition_is_refused(state, event):
    f = _frame(0, state)
    with pytest.raises(LedgerError):
        f.step(event)
    assert f.state is state


@pytest.mark.parametrize("state,event", [(s, e) for s in ReleaseState for e in RELEASE_EVENTS
                                         if (s, e) not in RELEASE_TRANSITIONS])
def test_every_other_release_transition_is_refused(state, event):
    f = _frame(0, FrameState.QUEUED, state)
    with pytest.raises(LedgerError):
        f.step(event)
    assert f.release is state


def test_scored_and_failed_exclude_each_other_and_answered_is_terminal():
    for decided in (FrameState.SCORED, FrameState.FAILED):
        assert not any(s is decided and n is not FrameState.ANSWERED for (s, _), n in OUTCOME_TRANSITIONS.items())
    assert not any(s is FrameState.ANSWERED for s, _ in OUTCOME_TRANSITIONS)
    assert not any(s is ReleaseState.RELEASED for s, _ in RELEASE_TRANSITIONS)


# -- one outcome, one release ------------------------------------------------------------------------


def _accepted(ledger, index, ref, dist):
    f = FrameRecord(1, index, ref.id, dist.id)
    ledger.receive(f, place=True)
    f.ref, f.dist = ref, dist
    ledger.accept(f)
    return f


def test_a_frame_gets_exactly_one_outcome_and_a_late_lane_report_is_dropped():
    host = Host()
    ledger = FrameLedger(1, host, lambda msg: None)
    ref, dist = _buffer(10), _buffer(11)
    f = _accepted(ledger, 0, ref, dist)
    ledger.hand_over(f)
    ledger.lane_scored_many([(0, {"psnr_y": 40.0})])
    ledger.lane_failed(0, ErrorCode.E_INTERNAL, "", "late")  # no longer the lane's: dropped
    ledger.fail(f, ErrorCode.E_SHUTDOWN, "", "shutdown")  # decided already: nothing
    ledger.flush()
    assert _kinds(host.sent) == [("Result", 0)] and host.sent[0].metrics == {"psnr_y": 40.0}
    assert f.state is FrameState.ANSWERED and ledger.in_flight == 0 and ledger.scored == 1
    with pytest.raises(LedgerError):
        f.decide(FrameEvent.FAIL, FrameError(session=1, index=0, code="E_INTERNAL", field="", message="x"))
    with pytest.raises(LedgerError):
        f.send_outcome(host.emit)
    assert len(host.sent) == 1


def test_release_goes_once_per_role_and_drops_references_once():
    host = Host()
    ledger = FrameLedger(1, host, lambda msg: None)
    ref, dist = _buffer(10), _buffer(11)
    f = _accepted(ledger, 0, ref, dist)
    assert (ref.refs, dist.refs) == (2, 2)  # registration + this frame
    ledger.hand_over(f)
    ev = HostReleaseEvent()
    ledger.track(f, ev)
    assert f.release is ReleaseState.PENDING and ledger.releasing == 1
    host.complete_all()
    assert host.sent == []  # not recorded: not even queried (R5)
    ev.complete()
    host.complete_all()
    assert _kinds(host.sent) == [("Released", 0, "ref"), ("Released", 0, "dist")]
    assert (ref.refs, dist.refs) == (1, 1) and f.release is ReleaseState.RELEASED and ledger.releasing == 0
    with pytest.raises(LedgerError):
        ledger._complete_one(f, [])  # a second completion is refused before anything is sent or dropped
    with pytest.raises(LedgerError):
        ledger.track(f, HostReleaseEvent.completed())
    assert len(host.sent) == 2 and (ref.refs, dist.refs) == (1, 1)


def test_the_planted_early_release_sends_released_once_and_references_follow_the_event():
    host = Host()
    ledger = FrameLedger(1, host, lambda msg: None)
    ref, dist = _buffer(10), _buffer(11)
    f = _accepted(ledger, 0, ref, dist)
    ledger.release_early(f)
    assert len(host.sent) == 2 and (ref.refs, dist.refs) == (2, 2)
    ledger.release_unread(f)
    host.complete_all()
    assert len(host.sent) == 2 and (ref.refs, dist.refs) == (1, 1)


def test_outcomes_leave_in_order_and_the_final_message_waits_for_every_release():
    host = Host()
    finals = []
    ledger = FrameLedger(1, host, finals.append)
    ref, dist = _buffer(10), _buffer(11)
    a, b = _accepted(ledger, 0, ref, dist), _accepted(ledger, 1, ref, dist)
    refused = FrameRecord(1, 2, 10, 99)
    ledger.receive(refused, place=True)
    ledger.refuse(refused, RemoteProtocolError(ErrorCode.E_NOENT, "dist", "no buffer 99"))
    unplaced = FrameRecord(1, 3, 10, 11)
    ledger.receive(unplaced, place=False)
    ledger.refuse(unplaced, RemoteProtocolError(ErrorCode.E_NOMEM, "index", "too many"))
    for f in (a, b):
        ledger.hand_over(f)
        ledger.track(f, HostReleaseEvent.completed())
    ledger.lane_scored_many([(1, {"x": 1.0})])
    ledger.flush()
    # the refused frames are released at once; the unplaced one answered at once; 1 and 2 wait for 0
    assert _kinds(host.sent) == [("Released", 2, "ref"), ("Released", 2, "dist"), ("Released", 3, "ref"),
                                 ("Released", 3, "dist"), ("FrameError", 3)]
    ledger.close(lambda: SessionClosed(session=1, frames=ledger.scored, failed=ledger.failed))
    ledger.lane_scored_many([(0, {"x": 0.0})])
    ledger.flush()
    assert _kinds(host.sent[5:]) == [("Result", 0), ("Result", 1), ("FrameError", 2)]
    assert finals == []  # two frames still hold their buffers
    host.complete_all()
    assert isinstance(host.sent[-1], SessionClosed) and (host.sent[-1].frames, host.sent[-1].failed) == (2, 2)
    assert finals == [host.sent[-1]] and ledger.closed and ledger.in_flight == 0
    # every outcome counted once: two results, two frame_errors (the refused 2 and 3 never accepted)
    assert [sum(c[k] for c in host.counted) for k in (1, 2, 3)] == [2, 2, 2]


def test_a_frame_of_no_session_is_released_and_answered_once():
    sent = []
    f = FrameRecord(5, 0, 1, "x")
    answer_without_session(sent.append, f, RemoteProtocolError(ErrorCode.E_NOENT, "session", "no session 5"))
    assert _kinds(sent) == [("Released", 0, "ref"), ("FrameError", 0)]  # "x" names no buffer
    assert f.state is FrameState.ANSWERED and f.release is ReleaseState.RELEASED and f.promise.kept


# -- a ledger error does not leave the session open ----------------------------------------------------


class ScoringLane(LaneSession):
    device = 0

    def __init__(self):
        self.sink = None

    def submit(self, frame):
        self.sink.frames_scored([(frame.index, {"psnr_y": 40.0})])
        return HostReleaseEvent.completed()

    async def finish(self):
        return LaneSummary({}, {})

    def abort(self):
        pass


class SessionHost(Host):
    limits = Limits()

    def __init__(self):
        super().__init__()
        self.finished = []

    def session_finished(self, session):
        self.finished.append(session.id)


async def test_a_ledger_error_closes_the_session_and_still_answers_every_frame():
    host = SessionHost()
    lane = ScoringLane()
    sess = Session(1, host, "cpu", lane, GEO, build_plan([], ["psnr"], Limits()))
    lane.sink = sess
    buffers = {10: _buffer(10), 11: _buffer(11)}
    reaper = ReleaseReaper(host.pending)
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        nursery.start_soon(sess.run)
        ok = FrameRecord(1, 0, 10, 11)
        sess.receive(ok)
        sess.check(ok, buffers)
        sess.accept(ok)
        await trio.sleep(0.05)
        bad = FrameRecord(1, 1, 10, 11)
        sess.receive(bad, room=False)  # a caller's bug: accepting a frame that has no place
        sess.check(bad, buffers)
        sess.accept(bad)
        assert sess.state == Session.CLOSING and "without a place" in sess.broken
        with pytest.raises(RemoteProtocolError) as e:
            sess.check(FrameRecord(1, 2, 10, 11), buffers)
        assert e.value.code is ErrorCode.E_STATE and "failed" in e.value.message
        with trio.fail_after(5):
            await sess.finished.wait()
        nursery.cancel_scope.cancel()
    outcomes = [m for m in host.sent if not isinstance(m, Released)]
    assert [type(m) for m in outcomes] == [Result, FrameError, SessionClosed]
    assert outcomes[1].index == 1 and outcomes[1].code == "E_INTERNAL"
    assert sum(isinstance(m, Released) for m in host.sent) == 4 and host.finished == [1]
    assert sess.state == Session.CLOSED


def test_docs_frame_life_names_every_state_and_event_and_its_straight_edges_are_the_tables():
    import os
    import re

    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "frame-life.md"), encoding="utf-8").read()
    for name in [s.value for s in FrameState] + [s.value for s in ReleaseState] + [e.value for e in FrameEvent]:
        assert f"{name}" in doc, name
    edges = re.findall(r"(\w+) ──(\w+)──▶ (?=(\w+))", doc)
    assert len(edges) >= 6
    tables = {**{(s.value, e.value): n.value for (s, e), n in OUTCOME_TRANSITIONS.items()},
              **{(s.value, e.value): n.value for (s, e), n in RELEASE_TRANSITIONS.items()}}
    for a, event, b in edges:
        assert tables.get((a, event)) == b, (a, event, b)


# -- groups: accepted, tracked, completed and answered in one step each ------------------------------


def _group(host, n, finals=None):
    """A ledger with frames 0..n-1 on buffers 10 and 11, accepted as one group and handed over."""
    ledger = FrameLedger(1, host, finals.append if finals is not None else lambda msg: None)
    ref, dist = _buffer(10), _buffer(11)
    frames = [FrameRecord(1, i, 10, 11) for i in range(n)]
    for f in frames:
        f.ref, f.dist = ref, dist
    ledger.receive_many(frames)
    ledger.accept_many(frames)
    assert ledger.in_flight == n and (ref.refs, dist.refs) == (n + 1, n + 1)
    assert ledger.hand_over_many(frames) == frames
    return ledger, frames, ref, dist


def test_a_group_is_answered_in_order_one_write_per_run_and_its_releases_in_one_write():
    host = Host()
    finals = []
    ledger, frames, ref, dist = _group(host, 6, finals)
    ledger.track_many(frames, [HostReleaseEvent.completed() for _ in frames])
    ledger.lane_failed(3, "E_INTERNAL", "", "the lane failed")
    # 1..5 scored before 0: nothing leaves; then 0: 0-2 in one write, the error, 4-5 in one write
    ledger.lane_scored_many([(i, {"x": float(i), "bad": float("inf")}) for i in (1, 2, 4, 5)])
    assert not any(isinstance(m, (Result, FrameError)) for m in host.sent)
    ledger.lane_scored_many([(0, {"x": 0.0, "bad": float("nan")})])
    outcomes = [m for m in host.sent if isinstance(m, (Result, FrameError))]
    assert [(type(m).__name__, m.index) for m in outcomes] == [
        ("Result", 0), ("Result", 1), ("Result", 2), ("FrameError", 3), ("Result", 4), ("Result", 5)]
    assert all(m.metrics == {"x": float(m.index), "bad": None} for m in outcomes if isinstance(m, Result))
    assert [w for w in host.writes if w[0] == "Result"] == [("Result", 3), ("Result", 2)]
    assert [sum(c[k] for c in host.counted) for k in (1, 2, 3)] == [5, 1, 6] and ledger.in_flight == 0
    assert len(host.counted) == 1  # one account of the whole run
    ledger.close(lambda: SessionClosed(session=1, frames=ledger.scored, failed=ledger.failed))
    host.complete_all()
    assert host.writes[-1] == ("Released", 12)  # every frame's two released in one write
    assert _kinds(host.sent[6:18]) == [("Released", i, role) for i in range(6) for role in ("ref", "dist")]
    assert isinstance(host.sent[-1], SessionClosed) and (host.sent[-1].frames, host.sent[-1].failed) == (5, 1)
    assert (ref.refs, dist.refs) == (1, 1) and finals == [host.sent[-1]]


def test_a_group_with_a_frame_already_tracked_tracks_the_others_and_says_so():
    host = Host()
    ledger = FrameLedger(1, host, lambda msg: None)
    ref, dist = _buffer(10), _buffer(11)
    a, b, c = (_accepted(ledger, i, ref, dist) for i in range(3))
    ledger.hand_over_many([a, b, c])
    ledger.track(b, HostReleaseEvent.completed())
    with pytest.raises(LedgerError):
        ledger.track_many([a, b, c], [HostReleaseEvent.completed() for _ in range(3)])
    assert ledger.releasing == 3 and len(host.pending) == 3  # a and c tracked, b once
    host.complete_all()
    assert sorted(_kinds(host.sent)) == sorted(("Released", i, r) for i in range(3) for r in ("ref", "dist"))


def test_a_client_that_reads_runs_gets_a_group_as_runs_the_error_between_them():
    """The same group as above, to a client whose hello asked for outcome runs: the results before
    and after the frame error each one result_many, the releases one released_many (the protocol's
    bytes: the host checks each write decodes to its message and encodes back the same)."""
    host = Host()
    host.outcome_runs = True
    finals = []
    ledger, frames, ref, dist = _group(host, 6, finals)
    ledger.track_many(frames, [HostReleaseEvent.completed() for _ in frames])
    ledger.lane_failed(3, "E_INTERNAL", "", "the lane failed")
    ledger.lane_scored_many([(i, {"x": float(i), "bad": float("inf")}) for i in (1, 2, 4, 5)])
    ledger.lane_scored_many([(0, {"x": 0.0, "bad": float("nan")})])
    outcomes = [m for m in host.sent if isinstance(m, (ResultMany, FrameError))]
    assert [(type(m).__name__, m.indices if isinstance(m, ResultMany) else m.index) for m in outcomes] == [
        ("ResultMany", (0, 1, 2)), ("FrameError", 3), ("ResultMany", (4, 5))]
    assert outcomes[0].metrics == {"x": [0.0, 1.0, 2.0], "bad": [None, None, None]}
    assert [sum(c[k] for c in host.counted) for k in (1, 2, 3)] == [5, 1, 6] and ledger.in_flight == 0
    ledger.close(lambda: SessionClosed(session=1, frames=ledger.scored, failed=ledger.failed))
    host.complete_all()
    assert host.writes[-1] == ("ReleasedMany", 1)  # every frame's two released in one message
    run = host.sent[-2]
    assert isinstance(run, ReleasedMany) and run.indices == tuple(range(6)) and run.ref == (10,) * 6 \
        and run.dist == (11,) * 6
    assert isinstance(host.sent[-1], SessionClosed) and (host.sent[-1].frames, host.sent[-1].failed) == (5, 1)
    assert (ref.refs, dist.refs) == (1, 1) and finals == [host.sent[-1]]


def test_a_run_of_results_is_cut_where_the_metrics_names_change():
    host = Host()
    host.outcome_runs = True
    ledger, _, _, _ = _group(host, 4)
    ledger.lane_scored_many([(0, {"a": 0.0}), (1, {"a": 1.0}), (2, {"a": 2.0, "b": 5.0}), (3, {"b": 1.0, "a": 3.0})])
    runs = [(m.indices, m.metrics) for m in host.sent if isinstance(m, ResultMany)]
    assert runs == [((0, 1), {"a": [0.0, 1.0]}), ((2,), {"a": [2.0], "b": [5.0]}), ((3,), {"b": [1.0], "a": [3.0]})]


def test_a_run_of_releases_is_cut_around_a_frame_that_goes_the_general_way():
    """Frame 2 released early (the R15 plant: both its released already out) completes amid a run:
    the run before it leaves first, in order, then the rest as a run of its own."""
    host = Host()
    host.outcome_runs = True
    ledger, frames, ref, dist = _group(host, 4)
    ledger.release_early(frames[2])
    ledger.track_many(frames, [HostReleaseEvent.completed() for _ in frames])
    host.complete_all()
    runs = [(type(m).__name__, m.indices if isinstance(m, ReleasedMany) else (m.index, m.role))
            for m in host.sent if isinstance(m, (Released, ReleasedMany))]
    assert runs == [("Released", (2, "ref")), ("Released", (2, "dist")), ("ReleasedMany", (0, 1)),
                    ("ReleasedMany", (3,))]
    assert (ref.refs, dist.refs) == (1, 1)
