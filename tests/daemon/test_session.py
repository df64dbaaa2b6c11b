"""A session in-process with a fake lane: implicit dma-buf fences (R8), order, one release entry per frame,
session_closed after the last released."""

import os

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafx.protocol import FrameError, Limits, Released, RemoteProtocolError, Result, SessionClosed
from vmafx.protocol.codec import decode
from vmafxd.buffers import BufferRecord
from vmafxd.core.layout import Geometry
from vmafxd.core.release import HostReleaseEvent
from vmafxd.features.declaration import FeatureDeclaration
from vmafxd.lanes.device import LaneImport, LaneSession, LaneSummary
from vmafxd.reaper import PendingReleases, ReleaseReaper
from vmafxd.ledger import FrameRecord
from vmafxd.session import Session, build_plan

GEO = Geometry(64, 36, PixelFormat.YUV420P, 8)


class FakeDmabufImport(LaneImport):
    """Stands in for a dma-buf import: an eventfd plays the buffer's implicit write fence."""

    def __init__(self, fence_fd):
        self.fence_fd = fence_fd
        self.closed = False

    def implicit_fence_fds(self):
        return [self.fence_fd]

    def close(self):
        self.closed = True


class FakeLaneSession(LaneSession):
    device = 0

    def __init__(self):
        self.submitted = []
        self.sink = None

    def submit(self, frame):
        self.submitted.append(frame.index)
        self.sink.frames_scored([(frame.index, {"psnr_y": 40.0 + frame.index})])
        return HostReleaseEvent.completed()

    async def finish(self):
        return LaneSummary({"psnr_y": {"mean": 41.0}}, {})

    def abort(self):
        pass


class RecordingTable(PendingReleases):
    """The real pending-release table, noting each entry as it is added."""

    def __init__(self):
        super().__init__()
        self.added = []

    def add(self, event, on_complete, label="", **kw):
        self.added.append(label)
        return super().add(event, on_complete, label, **kw)

    def add_many(self, events, labels, batch):
        self.added.extend(labels)
        return super().add_many(events, labels, batch)


class Host:
    """What a session needs from its client connection (as ClientHandler gives it)."""

    #: the client reads single result and released messages (no outcome runs)
    outcome_runs = False
    max_message_bytes = 65536

    def __init__(self, table=None):
        self.limits = Limits(implicit_fence_timeout_ms=50)
        self.pending = table if table is not None else RecordingTable()
        self.sent, self.finished = [], []

    def emit(self, msg):
        self.sent.append(("released", msg.index) if isinstance(msg, Released) else msg)

    def emit_packet(self, cls, packets):
        for data in packets:
            self.emit(decode(data))  # the ledger's own encoding of a result or a released

    def outcomes_sent(self, session, scored, failed, accepted):
        pass

    def outcomes_settled(self):
        pass

    def session_finished(self, session):
        self.finished.append(session.id)


def _record(imp):
    return BufferRecord(1, type("L", (), {"geometry": GEO})(), imp, lambda rec: None)


async def test_a_dmabuf_without_a_fence_waits_for_its_implicit_fences_and_gives_up_bounded():
    busy = os.eventfd(0)  # "a write fence is pending"
    idle = os.eventfd(1)  # "no pending write fence": polls readable
    host = Host()
    lane = FakeLaneSession()
    sess = Session(7, host, "cpu", lane, GEO, build_plan([], ["psnr"], host.limits))
    lane.sink = sess
    stuck, free = _record(FakeDmabufImport(busy)), _record(FakeDmabufImport(idle))
    buffers = {1: stuck, 2: free}
    reaper = ReleaseReaper(host.pending)
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        nursery.start_soon(sess.run)
        for index, ref in ((0, 1), (1, 2)):
            frame = FrameRecord(7, index, ref, 2)
            sess.receive(frame)
            sess.check(frame, buffers)
            sess.accept(frame)
        t0 = trio.current_time()
        sess.close(99)
        with trio.fail_after(5):
            await sess.finished.wait()
        assert trio.current_time() - t0 >= 0.05  # it did wait, bounded
        nursery.cancel_scope.cancel()
    outcomes = [m for m in host.sent if isinstance(m, (Result, FrameError, SessionClosed))]
    err, res, closed = outcomes
    assert isinstance(err, FrameError) and (err.index, err.code, err.field) == (0, "E_TIMEOUT", "ref")
    assert "implicit write fences" in err.message and "50 ms" in err.message
    assert isinstance(res, Result) and res.index == 1 and res.metrics == {"psnr_y": 41.0}
    assert isinstance(closed, SessionClosed) and (closed.re, closed.frames, closed.failed) == (99, 1, 1)
    assert lane.submitted == [1]  # the timed-out frame never reached the lane
    assert sorted(map(str, host.pending.added)) == ["session 7 frame 0", "session 7 frame 1"]  # one entry per frame
    assert sorted(m[1] for m in host.sent if isinstance(m, tuple)) == [0, 0, 1, 1]  # released once per role
    os.close(busy)
    os.close(idle)


# -- session_closed after every released (the ordering rule) ---------------------------------


class LateEventLane(LaneSession):
    """A lane whose outcomes (and finish) come before its release events complete.

    Allowed by the lane interface: an event must complete eventually, not before the
    lane reports -- a device copy event polled by the reaper, a reaper that is behind.
    Here the events are recorded at once and completed by the test, long after finish.
    """

    device = 0

    def __init__(self, wake):
        self.sink = None
        self.wake = wake  # the reaper's, as LaneServices.wake_reaper
        self.events = []

    def submit(self, frame):
        ev = HostReleaseEvent(self.wake)
        ev.record()
        self.events.append(ev)
        self.sink.frames_scored([(frame.index, {"psnr_y": 40.0})])
        return ev

    async def finish(self):
        return LaneSummary({}, {})

    def abort(self):
        pass


async def test_session_closed_waits_for_releases_that_complete_after_the_lane_finished(autojump_clock):
    table = PendingReleases()
    reaper = ReleaseReaper(table)
    host = Host(table)
    lane = LateEventLane(reaper.wake_threadsafe)
    sess = Session(9, host, "cpu", lane, GEO, build_plan([], ["psnr"], host.limits))
    lane.sink = sess
    buf = _record(FakeDmabufImport(-1))
    buf.imp.implicit_fence_fds = lambda: ()
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        nursery.start_soon(sess.run)
        for index in range(4):
            frame = FrameRecord(9, index, 1, 1)
            sess.receive(frame)
            sess.check(frame, {1: buf})
            sess.accept(frame)
        sess.close(5)
        await trio.sleep(30)  # every outcome is out and the lane has finished; no event has completed
        assert [type(m) for m in host.sent] == [Result] * 4
        for ev in lane.events[:3]:
            ev.complete()
        await trio.sleep(1)
        assert not any(isinstance(m, SessionClosed) for m in host.sent)  # one frame still holds its buffer
        lane.events[3].complete()
        with trio.fail_after(1):
            await sess.finished.wait()
        nursery.cancel_scope.cancel()
    kinds = ["released" if isinstance(m, tuple) else type(m).__name__ for m in host.sent]
    assert kinds == ["Result"] * 4 + ["released"] * 8 + ["SessionClosed"]  # both roles of each frame
    assert host.sent[-1].re == 5 and host.finished == [9]


def test_a_plan_resolves_each_feature_once(monkeypatch):
    """build_plan resolves options in one place (ScoringPlan.build), errors still name features[i]."""
    calls = []
    real = FeatureDeclaration.resolve_options

    def counting(self, given):
        calls.append(self.name)
        return real(self, given)

    monkeypatch.setattr(FeatureDeclaration, "resolve_options", counting)
    plan = build_plan(["version=vmaf_v0.6.1"], ["psnr", "float_ssim"], Limits())
    # vmaf_v0.6.1's inputs (adm, motion, vif at 4 scales sharing one instance): one call per input;
    # each request once, not once more to check it first
    assert sorted(calls) == sorted(["vif"] * 4 + ["adm", "motion", "psnr", "float_ssim"])
    assert [i.decl.name for i in plan.instances] == ["adm", "motion", "vif", "psnr", "float_ssim"]
    calls.clear()
    with pytest.raises(RemoteProtocolError) as e:
        build_plan([], ["psnr", "psnr=enable_chroma=maybe"], Limits())
    assert (e.value.code.value, e.value.field) == ("E_INVAL", "features[1].enable_chroma")
    assert calls == ["psnr", "psnr"]


# -- frames handed over in groups (LaneSession.submit_many) --------------------------------------


class GroupLaneSession(FakeLaneSession):
    """A lane that takes runs of frames at once: it notes each group it was given."""

    def __init__(self, refuse: bool = False):
        super().__init__()
        self.groups = []
        self.refuse = refuse

    def submit_many(self, frames):
        if self.refuse:
            raise RuntimeError("the device is gone")
        self.groups.append([f.index for f in frames])
        self.sink.frames_scored([(f.index, {"psnr_y": 40.0 + f.index, "nan": float("nan")}) for f in frames])
        return [HostReleaseEvent.completed() for _ in frames]


async def _run_frames(lane, fenced=(), n=6, accept_many=True):
    """A session over ``lane``: frames 0..n-1 queued before its task runs (``fenced``: with an
    eventfd acquire fence, already signalled), then closed; what it sent."""
    from vmafxd.fences import AcquireFence
    from vmafx.protocol.messages import Fence
    from vmafx.transport import OwnedFd

    host = Host()
    sess = Session(7, host, "cpu", lane, GEO, build_plan([], ["psnr"], host.limits))
    lane.sink = sess
    buf = _record(FakeDmabufImport(-1))
    buf.imp.implicit_fence_fds = lambda: ()
    buf.implicit_fences = False
    buf.matched = GEO
    reaper = ReleaseReaper(host.pending)
    frames = [FrameRecord(7, i, 1, 1) for i in range(n)]
    for f in frames:
        f.ref, f.dist = buf, buf
        if f.index in fenced:
            f.ref_fence = AcquireFence.take(Fence("eventfd", fd=0), OwnedFd(os.eventfd(1)), "ref_fence")
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        if accept_many and not fenced:
            assert sess.receive_many(frames) == n
        else:
            for f in frames:
                sess.receive(f)
                sess.accept(f)
        nursery.start_soon(sess.run)
        sess.close(3)
        with trio.fail_after(5):
            await sess.finished.wait()
        nursery.cancel_scope.cancel()
    return host, sess


async def test_a_run_of_frames_without_fences_goes_to_the_lane_as_one_group():
    lane = GroupLaneSession()
    host, sess = await _run_frames(lane)
    assert lane.groups == [[0, 1, 2, 3, 4, 5]] and lane.submitted == []  # one hand-over, no submit
    results = [m for m in host.sent if isinstance(m, Result)]
    assert [(r.index, r.metrics) for r in results] == [(i, {"psnr_y": 40.0 + i, "nan": None}) for i in range(6)]
    assert sorted(m[1] for m in host.sent if isinstance(m, tuple)) == sorted(list(range(6)) * 2)
    assert isinstance(host.sent[-1], SessionClosed) and (host.sent[-1].frames, sess.accepted) == (6, 6)
    assert sorted(map(str, host.pending.added)) == [f"session 7 frame {i}" for i in range(6)]


async def test_a_fenced_frame_splits_the_run_and_waits_alone():
    lane = GroupLaneSession()
    host, _ = await _run_frames(lane, fenced=(2,))
    assert lane.groups == [[0, 1], [3, 4, 5]] and lane.submitted == [2]  # in order, the fenced one alone
    assert [m.index for m in host.sent if isinstance(m, Result)] == list(range(6))


async def test_a_lane_that_refuses_a_group_fails_each_frame_once_and_releases_it():
    lane = GroupLaneSession(refuse=True)
    host, sess = await _run_frames(lane)
    errors = [m for m in host.sent if isinstance(m, FrameError)]
    assert [(e.index, e.code) for e in errors] == [(i, "E_INTERNAL") for i in range(6)]
    assert "the device is gone" in errors[0].message
    assert sorted(m[1] for m in host.sent if isinstance(m, tuple)) == sorted(list(range(6)) * 2)
    assert isinstance(host.sent[-1], SessionClosed) and (host.sent[-1].frames, host.sent[-1].failed) == (0, 6)


async def test_frames_taken_but_not_handed_over_are_released_when_the_task_is_cancelled():
    from vmafxd.fences import AcquireFence
    from vmafx.protocol.messages import Fence
    from vmafx.transport import OwnedFd

    host = Host()
    lane = GroupLaneSession()
    sess = Session(7, host, "cpu", lane, GEO, build_plan([], ["psnr"], host.limits))
    lane.sink = sess
    buf = _record(FakeDmabufImport(-1))
    buf.imp.implicit_fence_fds = lambda: ()
    buf.implicit_fences = False
    never = os.eventfd(0)
    frames = [FrameRecord(7, i, 1, 1) for i in range(4)]
    for f in frames:
        f.ref, f.dist = buf, buf
    frames[1].ref_fence = AcquireFence.take(Fence("eventfd", fd=0), OwnedFd(never), "ref_fence")
    reaper = ReleaseReaper(host.pending)
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        for f in frames:
            sess.receive(f)
            sess.accept(f)
        nursery.start_soon(sess.run)
        await trio.sleep(0.05)  # frame 0 handed over; frame 1 waits on its fence; 2 and 3 taken with it
        assert lane.groups == [] and lane.submitted == [0]
        sess.cancel()
        with trio.fail_after(5):
            await sess.finished.wait()
        await reaper.drain(1)
        nursery.cancel_scope.cancel()
    # every frame released once per role: the handed-over one, the waiting one, the two behind it
    assert sorted(m[1] for m in host.sent if isinstance(m, tuple)) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert buf.refs == 1
