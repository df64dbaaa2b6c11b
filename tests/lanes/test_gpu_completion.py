"""The GPU worker hears of completions from its watcher thread, not by polling.

On the emulator with an event lag (``EmuDevice.event_lag``: a recorded event
completes only that long later, as on a GPU whose stream still runs), a
batch that completes while nothing new reaches the worker must still be
noticed: its results and its frames' releases arrive, with the worker's
timed wake-ups turned off altogether.  With batches in flight the worker
does not wake by itself more than its slow safety net does; and a lane
stopped with batches in flight answers every frame once and leaves no
thread behind.  The watcher alone, on stand-in events: stream order, one
wake-up for a burst, none for a batch the worker already completed, a failed
wait passed on rather than waited on forever.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafx.protocol import Goodbye, Result, SessionClosed
from vmafx.transport import TransportClosed
from vmafxd.core.layout import Geometry
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
from vmafxd.lanes.gpu.worker import GpuWorker
from vmafxd.offline import resolve_models

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient, frame_memfd
from .conftest import RecordingSink, import_picture, load_runtime




class _Reaper:
    """LaneServices.wake_reaper: counts the wake-ups (any thread)."""

    def __init__(self):
        self.wakes = 0
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            self.wakes += 1




@pytest.fixture(scope="module")
def frames():
    from ..reference import vendored_pairs

    refs, dists = vendored_pairs()[0].pictures()
    geo = Geometry(refs[0].width, refs[0].height, PixelFormat.YUV420P, 8)
    return geo, refs[:4], dists[:4]


@pytest.fixture
def lagging(monkeypatch):
    """The emulated device 0 with its events completing ``lag`` seconds after their record."""
    rt, dev = load_runtime("emu")

    def set_lag(lag: float):
        monkeypatch.setattr(dev, "event_lag", lag)
        return dev

    return set_lag


def _lane(reaper):
    from vmafxd.lanes import create_lane

    return create_lane("emu", type("C", (), {"gpu_batch": 2})(), LaneServices(wake_reaper=reaper))


def _wake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("-wake")]


def test_an_emulated_event_with_lag_completes_later_in_stream_order(lagging):
    dev = lagging(0.05)
    st = dev.create_stream()
    a, b, never = dev.create_event(), dev.create_event(), dev.create_event()
    try:
        a.record(st)
        b.record(st)
        assert never.query()  # R5's trap, as on CUDA and HIP: never recorded answers "done"
        assert not a.query() and not b.query()
        t0 = time.monotonic()
        a.synchronize()
        assert a.query() and time.monotonic() - t0 > 0.02
        st.synchronize()
        assert b.query()
    finally:
        for h in (a, b, never, st):
            h.close()


def test_a_batch_completing_with_no_new_job_is_noticed(monkeypatch, lagging, frames):
    """No timed wake-up at all (poll_timeout None): the frames are scored and released all the same,
    before the session's finish (a new job) reaches the worker."""
    geo, refs, dists = frames
    lagging(0.03)
    monkeypatch.setattr(GpuWorker, "poll_timeout", lambda self: None)
    reaper = _Reaper()
    lane = _lane(reaper)
    imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs, dists)]
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    sink = RecordingSink()

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(lane.run)
            sess = await lane.open_session(SessionSpec(plan, geo), sink)
            handles = [sess.submit(LaneFrame(i, r, d)) for i, (r, d) in enumerate(imports)]
            # every frame but the last, which the frame assembler makes final at the finish
            # (psnr's plan keeps one frame of lag): so the last batch has been completed
            with trio.fail_after(10):
                while len(sink.scored) < len(imports) - 1 or not all(h.recorded and h.query() for h in handles):
                    await trio.sleep(0.005)
            assert reaper.wakes >= 1  # the gathers' completions were announced to the reaper
            # three frames final and sent: a daemon session keeps none of them (memory flat)
            assert sess.scorer.assembler.frames == [] and len(sink.scored) >= 3
            await sess.finish()
            for h in handles:
                h.destroy()
            nursery.cancel_scope.cancel()

    trio.run(main)
    for pair in imports:
        for i in pair:
            i.close()
    assert sorted(i for i, _ in sink.scored) == [0, 1, 2, 3] and not sink.failed
    assert not _wake_threads()


def test_the_worker_does_not_poll_while_a_batch_runs(monkeypatch, lagging, frames):
    """One long batch in flight: the worker wakes for it once (plus its slow safety net), not
    every fraction of a millisecond; and it notices the end within a few milliseconds."""
    geo, refs, dists = frames
    lagging(0.3)
    polls = []
    real_poll = GpuWorker.poll

    def counting_poll(self, block=False):
        polls.append(block)
        real_poll(self, block)

    monkeypatch.setattr(GpuWorker, "poll", counting_poll)
    lane = _lane(_Reaper())
    imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs[:2], dists[:2])]
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    sink = RecordingSink()

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(lane.run)
            sess = await lane.open_session(SessionSpec(plan, geo), sink)
            before = len(polls)
            t0 = time.monotonic()
            # one job group, one batch (frame 0 is final once frame 1 is in: psnr's lag)
            handles = sess.submit_many([LaneFrame(i, r, d) for i, (r, d) in enumerate(imports)])
            with trio.fail_after(10):
                while not sink.scored:
                    await trio.sleep(0.01)
            # 0.3 s in flight: a wake-up for the frame, one for the watcher's news, and the
            # safety net's (SAFETY_POLL_S); polling every 0.2 ms made it ~1,500
            assert len(polls) - before <= 2 + 0.3 / GpuWorker.SAFETY_POLL_S + 2
            assert time.monotonic() - t0 < 0.3 + 0.25  # (a loaded 2-core box: generous)
            await sess.finish()
            for h in handles:
                h.destroy()
            nursery.cancel_scope.cancel()

    trio.run(main)
    for pair in imports:
        for i in pair:
            i.close()


def test_stopping_with_batches_in_flight_answers_every_frame_once_and_ends_the_watcher(lagging, frames):
    geo, refs, dists = frames
    lagging(0.2)
    lane = _lane(_Reaper())
    imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs, dists)]
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    sink = RecordingSink()
    handles = []

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(lane.run)
            sess = await lane.open_session(SessionSpec(plan, geo), sink)
            assert len(_wake_threads()) == 1  # (started by the worker's thread, which opened it)
            handles.extend(sess.submit(LaneFrame(i, r, d)) for i, (r, d) in enumerate(imports))
            await trio.sleep(0.05)  # the worker has launched; the device is still "running"
            assert not sink.scored
            nursery.cancel_scope.cancel()  # the lane stops with batches in flight

    t0 = time.monotonic()
    trio.run(main)
    assert time.monotonic() - t0 < 10
    outcomes = [i for i, _ in sink.scored] + [i for i, _ in sink.failed]
    # each frame at most once, every batch's frames answered; the last one stays with the frame
    # assembler (psnr's lag) for the session's finish, which the daemon runs at its own stop
    # (test_sigterm_with_batches_in_flight_answers_every_frame below)
    assert len(outcomes) == len(set(outcomes)) and set(outcomes) >= {0, 1, 2}
    assert all(h.recorded and h.query() for h in handles)
    for h in handles:
        h.destroy()
    for pair in imports:
        for i in pair:
            i.close()
    assert not _wake_threads()


@pytest.mark.parametrize("mode", ["in-process", "lane-process"])
def test_sigterm_with_batches_in_flight_answers_every_frame(mode, frames):
    """The daemon stopped while its device still "runs" batches (an event lag of 100 ms, inherited
    by a lane worker process): every frame is scored once, every buffer released, exit 0."""
    load_runtime("emu")
    _, refs, dists = frames
    extra = ("--lane-process",) if mode == "lane-process" else ()
    d = Daemon("--lane", "emu", "--gpu-batch", "2", *extra, workers=1, env={"VMAFXD_EMU_EVENT_LAG_MS": "100"})
    try:
        c = RawClient(d.socket)
        c.hello()
        bufs = [(frame_memfd(r), frame_memfd(x)) for r, x in zip(refs, dists)]
        ids = [(c.register_ok(r), c.register_ok(x)) for r, x in bufs]
        s = c.open_ok(features=["psnr"]).session
        n = 8
        for i in range(n):
            c.submit(s, i, *ids[i % len(ids)])
        c.recv(timeout=10)  # the first answers are coming: batches are in flight
        d.proc.send_signal(signal.SIGTERM)
        msgs = []
        try:
            while True:
                msgs.append(c.recv(timeout=30))
        except TransportClosed:
            pass
        assert sorted(i for (ss, i), m in c.outcomes.items() if ss == s and isinstance(m, Result)) == list(range(n))
        assert [type(m) for m in msgs].count(SessionClosed) == 1 and isinstance(msgs[-1], Goodbye)
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        assert d.proc.wait(30) == 0, d.log()[-3000:]
        c.close()
        for r, x in bufs:
            r.close()
            x.close()
    finally:
        d.close()


# --------------------------------------------------------------------------- the watcher alone


class _FakeEvent:
    """A stand-in device event: completes when the test says; a wait blocks until then."""

    def __init__(self, fail: bool = False):
        self._set = threading.Event()
        self.fail = fail
        self.closed = False

    def finish(self):
        self._set.set()

    def record(self, stream):
        self._set.clear()

    def query(self):
        return self._set.is_set()

    def synchronize(self):
        if self.fail:
            raise RuntimeError("the device is lost")
        self._set.wait()

    def close(self):
        self.closed = True


class _FakeDevice:
    def __init__(self):
        self.made: list[_FakeEvent] = []

    def make_current(self):
        pass

    def create_event(self, *, blocking=False):
        ev = _FakeEvent()
        self.made.append(ev)
        return ev


class _FakeShared:
    """SharedEvent's part the watcher uses."""

    def __init__(self, event):
        self.event = event
        self.done = False
        self.dropped = 0

    def drop_shares(self):
        self.dropped += 1


def _watcher(monkeypatch, prepared=2):
    from vmafxd.lanes.gpu.completion import CompletionWatcher

    monkeypatch.setattr(CompletionWatcher, "PREPARED", prepared)
    wakes = {"worker": 0, "reaper": 0}

    def count(who):
        def wake():
            wakes[who] += 1
        return wake

    w = CompletionWatcher("test-wake", _FakeDevice(), count("worker"), count("reaper"))
    w.start()
    return w, wakes


def _until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_the_watcher_wakes_in_stream_order_and_once_for_a_burst(monkeypatch):
    w, wakes = _watcher(monkeypatch)
    stream = type("S", (), {"submit": lambda self: None})()
    copied = _FakeShared(_FakeEvent())
    w.watch_copied(copied)
    end = w.mark_end(stream)
    time.sleep(0.02)
    assert wakes == {"worker": 0, "reaper": 0}  # nothing completed: nobody woken
    copied.event.finish()
    _until(lambda: wakes["reaper"] == 1)
    assert copied.done and copied.dropped == 1 and wakes["worker"] == 0
    end.event.finish()
    _until(lambda: wakes["worker"] == 1)
    # a burst: three batches that completed while the watcher waited on an earlier point: one
    # wake-up each way for all of them
    blocker = _FakeShared(_FakeEvent())
    w.watch_copied(blocker)
    for _ in range(3):
        c = _FakeShared(_FakeEvent())
        c.event.finish()
        w.watch_copied(c)
        w.mark_end(stream).event.finish()
    blocker.event.finish()
    _until(lambda: wakes["worker"] == 2)
    time.sleep(0.02)
    assert wakes == {"worker": 2, "reaper": 2} and not w._points
    # end events are recycled: the first batch's end and two of the burst's on the two prepared
    # ones, one more made for the third batch in flight at once
    assert len(w.device.made) == 3
    w.stop()
    w.close()
    assert all(ev.closed for ev in w.device.made)


def test_a_batch_the_worker_completed_itself_needs_no_wake_up_and_a_failed_wait_still_passes(monkeypatch):
    w, wakes = _watcher(monkeypatch)
    stream = type("S", (), {"submit": lambda self: None})()
    mark = w.mark_end(stream)
    mark.needed = False  # GpuWorker.batch_ended: the worker found it complete on its own
    mark.event.finish()
    _until(lambda: not w._points)
    assert wakes["worker"] == 0
    lost = _FakeShared(_FakeEvent(fail=True))  # a device error: counted as complete, not waited forever
    w.watch_copied(lost)
    _until(lambda: wakes["reaper"] == 1)
    assert not lost.done and lost.dropped == 1
    # stop with a point still pending: stop() waits for it (the worker drained its stream first)
    pending = w.mark_end(stream)
    threading.Timer(0.05, pending.event.finish).start()
    w.stop()
    assert wakes["worker"] == 1 and not w._points
    w.close()
