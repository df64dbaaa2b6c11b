"""A run of frames handed to a lane's worker process in one go (``SUBMIT_MANY``), without a process: the
daemon's :class:`ProxySession` on one side, the worker's :class:`Child` on the other, the wire between.

Each frame gets exactly one outcome whatever happens to the others of its group: a frame the daemon's
side refuses (a buffer of another device, of a dead worker; a session that died with its worker), a
frame naming what the worker does not have, a lane that refuses the whole group.
"""

from __future__ import annotations

import itertools
import socket
from types import SimpleNamespace

import pytest
import trio

from vmafxd.lanes.device import LaneFrame
from vmafxd.lanes.errors import InvalidInput, LaneFailure
from vmafxd.lanes.process import wire
from vmafxd.lanes.process.child import Child
from vmafxd.lanes.process.proxy import ProxyImport, ProxySession
from vmafxd.lanes.process.worker import WorkerProcess


class _Sink:
    def __init__(self):
        self.scored: dict[int, dict] = {}
        self.failed: dict[int, Exception] = {}

    def frames_scored(self, items):
        for index, metrics in items:
            assert index not in self.scored and index not in self.failed, index
            self.scored[index] = metrics

    def frame_failed(self, index, error):
        assert index not in self.scored and index not in self.failed, index
        self.failed[index] = error


def _worker(lane, ordinal: int = 0):
    """What a ProxySession and WorkerProcess._dispatch read of a worker process; its outbox kept."""
    w = SimpleNamespace(lane=lane, slot=SimpleNamespace(ordinal=ordinal, sessions=1), releases={}, sessions={},
                        outbox=[], frames_sent=0, groups_sent=0, name=f"emu{ordinal} (test)", alive=True)
    w.send = w.outbox.append
    return w


@pytest.fixture
def daemon_side():
    lane = SimpleNamespace(_tokens=itertools.count(1), services=SimpleNamespace(wake_reaper=lambda: None))
    w = _worker(lane)
    sink = _Sink()
    session = ProxySession(w, 7, sink)
    w.sessions[7] = session
    return SimpleNamespace(lane=lane, worker=w, sink=sink, session=session,
                           imp=lambda i, worker=w: ProxyImport(worker, i, []))


def test_a_group_goes_as_one_message_with_one_event_a_frame_in_order(daemon_side):
    d = daemon_side
    frames = [LaneFrame(i, d.imp(10 + i), d.imp(20 + i)) for i in range(3)]
    frames.append(LaneFrame(3, d.imp(13), d.imp(23), dist_gpu_fence=SimpleNamespace(kind="cuda_ipc_event",
                                                                                    handle=b"\x01" * 64)))
    events = d.session.submit_many(frames)
    assert len(events) == 4 and len({id(e) for e in events}) == 4
    assert not any(e.recorded for e in events)  # unrecorded until the worker says RELEASED
    (msg,) = d.worker.outbox
    assert msg[:2] == [wire.SUBMIT_MANY, 7]
    tokens = [e[0] for e in msg[2]]
    assert [e[1:] for e in msg[2]] == [[0, 10, 20], [1, 11, 21], [2, 12, 22],
                                      [3, 13, 23, None, ["cuda_ipc_event", b"\x01" * 64]]]
    assert [d.worker.releases[t] for t in tokens] == events
    assert d.session.inflight == {0, 1, 2, 3} and (d.worker.frames_sent, d.worker.groups_sent) == (4, 1)
    assert d.sink.failed == {} and d.sink.scored == {}


def test_refused_frames_of_a_group_fail_alone_and_the_others_go(daemon_side):
    """A buffer of another device (InvalidInput) and one a dead worker imported (LaneFailure): each such
    frame gets its one error and a release event complete at once; the others go in the message."""
    d = daemon_side
    other_device = _worker(d.lane, ordinal=1)
    dead_same_device = _worker(d.lane)
    dead_same_device.slot = d.worker.slot  # the device's earlier worker: its slot, another process
    frames = [LaneFrame(0, d.imp(1), d.imp(2)),
              LaneFrame(1, d.imp(3, other_device), d.imp(4)),
              LaneFrame(2, d.imp(5), d.imp(6)),
              LaneFrame(3, d.imp(7), d.imp(8, dead_same_device)),
              LaneFrame(4, d.imp(9), d.imp(10))]
    events = d.session.submit_many(frames)
    (msg,) = d.worker.outbox
    assert [e[1] for e in msg[2]] == [0, 2, 4]
    assert set(d.sink.failed) == {1, 3}
    assert type(d.sink.failed[1]) is InvalidInput and d.sink.failed[1].field == "ref"
    assert "device 1" in d.sink.failed[1].reason
    assert type(d.sink.failed[3]) is LaneFailure and d.sink.failed[3].field == "dist"
    assert "register it again" in d.sink.failed[3].reason
    assert [e.recorded and e.query() for e in events] == [False, True, False, True, False]
    assert d.session.inflight == {0, 2, 4} and d.worker.frames_sent == 3


def test_a_group_for_a_session_whose_worker_died_fails_every_frame_and_sends_nothing(daemon_side):
    d = daemon_side
    d.session._worker_died("the lane's worker process for device 0 was killed by SIGKILL (9)", LaneFailure)
    events = d.session.submit_many([LaneFrame(i, d.imp(1), d.imp(2)) for i in range(3)])
    assert d.worker.outbox == [] and d.worker.releases == {}
    assert set(d.sink.failed) == {0, 1, 2} and all("open a new one" in e.reason for e in d.sink.failed.values())
    assert all(e.recorded and e.query() for e in events)


def test_a_group_after_finish_takes_no_frame(daemon_side):
    """All or none: it raises before any frame is taken (the daemon fails each frame itself then)."""
    d = daemon_side
    d.session.abort()
    d.worker.outbox.clear()
    with pytest.raises(RuntimeError):
        d.session.submit_many([LaneFrame(0, d.imp(1), d.imp(2))])
    assert d.worker.outbox == [] and d.worker.releases == {} and d.sink.failed == {}


# ----------------------------------------------------------------------------- the worker's side


class _Event:
    """A release event of the worker's lane (BatchReleaseHandle's shape); counts the questions it gets."""

    def __init__(self, recorded: bool = False, done: bool = False):
        self.recorded, self.done, self.destroyed = recorded, done, False
        self.asked = 0

    def query(self):
        assert self.recorded, "R5: an event not recorded is never asked"
        self.asked += 1
        return self.done

    def destroy(self):
        self.destroyed = True


class _LaneSession:
    def __init__(self, refuse: Exception | None = None):
        self.groups: list[list[LaneFrame]] = []
        self.singles: list[LaneFrame] = []
        self.refuse = refuse

    def submit_many(self, frames):
        if self.refuse is not None:
            raise self.refuse
        self.groups.append(list(frames))
        return [_Event() for _ in frames]

    def submit(self, frame):
        self.singles.append(frame)
        return _Event()


def _child(sessions, imports) -> Child:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    b.close()
    child = Child(SimpleNamespace(), a)
    child.sessions.update(sessions)
    child.imports.update(imports)
    return child


def _across(messages) -> list:
    """Messages as they arrive on the other side of the stream (one packet)."""
    return wire.decode(wire.encode(messages))


def test_a_group_crosses_the_wire_into_one_submit_many_and_its_answers_come_back(daemon_side):
    """ProxySession.submit_many -> SUBMIT_MANY -> the worker's session's submit_many (one call, frames in
    order, their imports and fences), a frame naming a buffer the worker lacks failed alone; then the
    worker's FAILED / SCORED / RELEASED answers back through the daemon's receiver: each frame one
    outcome, each event complete."""
    d = daemon_side
    fence = SimpleNamespace(kind="cuda_ipc_event", handle=b"\x02" * 64)
    frames = [LaneFrame(i, d.imp(100 + i), d.imp(200 + i)) for i in range(4)]
    frames[2].ref_gpu_fence = fence
    events = d.session.submit_many(frames)
    lane_session = _LaneSession()
    imports = {i: f"imp{i}" for k in range(4) if k != 3 for i in (100 + k, 200 + k)}
    imports[103] = "imp103"  # frame 3's dist (203) was never imported here

    async def main():
        child = _child({7: lane_session}, imports)
        for msg in _across(d.worker.outbox):
            child.dispatch(msg, None)
        return child

    child = trio.run(main)
    (group,) = lane_session.groups
    assert lane_session.singles == []
    assert [(f.index, f.ref, f.dist) for f in group] == [(i, f"imp{100 + i}", f"imp{200 + i}") for i in range(3)]
    assert group[2].ref_gpu_fence.kind == "cuda_ipc_event" and group[2].ref_gpu_fence.handle == b"\x02" * 64
    assert group[0].ref_gpu_fence is None and group[2].dist_gpu_fence is None
    (run,) = _runs(child)  # the group's frames, one run
    assert [t for t, _ in run] == [t for t, ev in d.worker.releases.items() if ev in events[:3]]
    assert child._reap.is_set()  # the reaper polls now
    failed, released = child._outbox
    assert failed == [wire.FAILED, 7, [[3, ["LaneFailure", "", "the worker has no such session or buffer"]]]]
    assert released[0] == wire.RELEASED and len(released[1]) == 1

    # the lane scores frames 0..2 and their reads complete: the worker's reaper sends their releases
    for _, ev in run:
        ev.recorded = ev.done = True
    child.reap()
    child.send([wire.SCORED, 7, [[i, {"psnr_y": 40.0 + i}] for i in range(3)]])
    woken = []
    WorkerProcess._dispatch(d.worker, _across(child._outbox), lambda: woken.append(1))
    assert d.sink.scored == {i: {"psnr_y": 40.0 + i} for i in range(3)}
    assert set(d.sink.failed) == {3} and type(d.sink.failed[3]) is LaneFailure
    assert all(e.recorded and e.query() for e in events) and d.worker.releases == {}
    assert d.session.inflight == set() and woken


def _runs(child) -> list[list[tuple[int, object]]]:
    """The worker's pending runs as (token, release event) pairs, those not released yet."""
    return [list(zip(tokens[k:], events[k:])) for tokens, events, k in child._pending]


def _run(pairs) -> list:
    """A pending run (the worker's form: tokens, events, how many released) of (token, event) pairs."""
    return [[t for t, _ in pairs], [e for _, e in pairs], 0]


def test_a_group_for_an_unknown_session_fails_each_frame():
    async def main():
        child = _child({}, {1: "a", 2: "b"})
        child.dispatch([wire.SUBMIT_MANY, 9, [[11, 0, 1, 2], [12, 1, 1, 2]]], None)
        return child

    child = trio.run(main)
    assert child._pending == []
    assert child._outbox == [[wire.FAILED, 9, [[0, wire.error_to_wire(LaneFailure("", "the worker has no such "
                                                                                        "session or buffer"))],
                                               [1, wire.error_to_wire(LaneFailure("", "the worker has no such "
                                                                                        "session or buffer"))]]],
                             [wire.RELEASED, [11, 12]]]


def test_a_group_the_lane_refuses_fails_every_frame_of_it():
    """The lane's submit_many is all or none: when it raises, every frame fails and is released."""
    lane_session = _LaneSession(refuse=RuntimeError("submit after finish or abort"))

    async def main():
        child = _child({5: lane_session}, {1: "a", 2: "b"})
        child.dispatch([wire.SUBMIT_MANY, 5, [[21, 4, 1, 2], [22, 5, 1, 2], [23, 6, 1, 9]]], None)
        return child

    child = trio.run(main)
    assert child._pending == []
    failed, released = child._outbox
    assert failed[:2] == [wire.FAILED, 5]
    assert sorted(i for i, _ in failed[2]) == [4, 5, 6]  # 6 names no buffer here; 4 and 5 the lane refused
    assert dict(failed[2])[4] == ["LaneFailure", "", "submit after finish or abort"]
    assert sorted(released[1]) == [21, 22, 23]


def test_single_submits_still_cross():
    lane_session = _LaneSession()

    async def main():
        child = _child({5: lane_session}, {1: "a", 2: "b"})
        child.dispatch([wire.SUBMIT, 5, 31, 0, 1, 2, None, None], None)
        return child

    child = trio.run(main)
    assert [(f.index, f.ref, f.dist) for f in lane_session.singles] == [(0, "a", "b")]
    assert [[t for t, _ in run] for run in _runs(child)] == [[31]] and child._outbox == []


def test_the_reaper_reads_a_run_up_to_its_first_frame_not_complete():
    """A submit's frames are asked in order, up to the first one not complete (the device reads them in
    order): the frames after it are not asked, a frame completed out of order waits for it, an event not
    recorded is never asked (R5), and each run goes its own way."""
    async def main():
        child = _child({}, {})
        stuck, host_done, later = _Event(recorded=True), _Event(recorded=True, done=True), _Event(recorded=True)
        first_run = [(1, _Event(recorded=True, done=True)), (2, stuck), (3, host_done), (4, later)]
        unrecorded = [(5, _Event()), (6, _Event())]
        second_run = [(7, _Event(recorded=True, done=True)), (8, _Event(recorded=True, done=True))]
        child._pending = [_run(first_run), _run(unrecorded), _run(second_run)]
        child.reap()
        assert child._outbox == [[wire.RELEASED, [1, 7, 8]]]
        assert (stuck.asked, host_done.asked, later.asked) == (1, 0, 0)
        assert [[t for t, _ in run] for run in _runs(child)] == [[2, 3, 4], [5, 6]]
        assert first_run[0][1].destroyed and not host_done.destroyed
        child._outbox.clear()
        stuck.done = True
        child.reap()  # frame 4 is recorded and still running: 2 and 3 go, 4 waits
        assert child._outbox == [[wire.RELEASED, [2, 3]]] and stuck.destroyed and host_done.destroyed
        child._outbox.clear()
        later.done = True
        for _, ev in unrecorded:
            ev.recorded = ev.done = True
        child.reap()
        assert child._outbox == [[wire.RELEASED, [4, 5, 6]]] and child._pending == []

    trio.run(main)


def test_a_lane_wake_up_reaps_at_once_and_one_on_its_way_covers_the_next():
    """The lane's wake-up (a batch's reads completed) reaps in the trio thread when it runs, not
    through the reaper task; wake-ups made while one is on its way and not started add nothing
    (it reaps all that completed before it runs); once it has run, the next one is sent again."""
    class Token:
        def __init__(self):
            self.queued = []

        def run_sync_soon(self, fn, *args):
            self.queued.append((fn, args))

    async def main():
        child = _child({}, {})
        token = child._token = Token()
        first, second = _Event(recorded=True), _Event(recorded=True)
        child._pending = [_run([(1, first)]), _run([(2, second)])]
        child.wake_threadsafe()
        first.done = True
        child.wake_threadsafe()  # the first is on its way: it will see this one's completion too
        assert len(token.queued) == 1
        fn, args = token.queued.pop()
        fn(*args)
        assert child._outbox == [[wire.RELEASED, [1]]] and first.destroyed
        assert not child._reap.is_set()  # no pass of the reaper task was asked for
        second.done = True
        child.wake_threadsafe()
        assert len(token.queued) == 1
        fn, args = token.queued.pop()
        fn(*args)
        assert child._outbox == [[wire.RELEASED, [1]], [wire.RELEASED, [2]]] and child._pending == []

    trio.run(main)


def test_results_of_a_session_that_follow_each_other_in_the_outbox_are_one_message():
    """The batches' results of a session queued one after the other leave as one SCORED, in order;
    anything between them (a failure, another session's results) keeps them apart, so the order of
    every outcome is the one they were reported in."""
    from vmafxd.lanes.process.child import _Sink

    async def main():
        child = _child({}, {})
        a, b = _Sink(child, 1, None), _Sink(child, 2, None)
        first = [(0, {"psnr_y": 1.0})]
        a.frames_scored(first)
        a.frames_scored([(1, {"psnr_y": 2.0}), (2, {"psnr_y": 3.0})])
        assert first == [(0, {"psnr_y": 1.0})]  # the lane's list is not changed
        b.frames_scored([(0, {"psnr_y": 4.0})])
        a.frames_scored([(3, {"psnr_y": 5.0})])
        a.frame_failed(4, LaneFailure("", "no"))
        a.frames_scored([(5, {"psnr_y": 6.0})])
        return child._outbox

    outbox = trio.run(main)
    assert [(m[0], m[1], [i for i, _ in m[2]]) for m in outbox] == [
        (wire.SCORED, 1, [0, 1, 2]), (wire.SCORED, 2, [0]), (wire.SCORED, 1, [3]), (wire.FAILED, 1, [4]),
        (wire.SCORED, 1, [5])]
