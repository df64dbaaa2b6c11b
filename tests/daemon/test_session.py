"""A session in-process with a fake lane: implicit dma-buf fences (R8), order, one release entry per frame,
session_closed after the last released."""

import os

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafx.protocol import FrameError, Limits, Released, RemoteProtocolError, Result, SessionClosed
from vmafx.protocol.messages import decode
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
