"""The pending-release table and its reaper (R4, R5)."""

import threading

import trio

from vmafxd.core.release import HostReleaseEvent, ReleaseEvent
from vmafxd.reaper import PendingReleases, ReleaseReaper


class DeviceLikeEvent:
    """What HIP's and CUDA's event query does: success for an event that was never recorded."""

    signals_completion = False

    def __init__(self):
        self.recorded = False
        self.done = False
        self.queries = 0
        self.destroyed = 0

    def query(self) -> bool:
        self.queries += 1
        return self.done or not self.recorded  # the trap: never-recorded reads as complete

    def destroy(self) -> None:
        self.destroyed += 1


def test_a_never_recorded_event_stays_pending_and_is_not_even_queried():
    table = PendingReleases()
    ev = DeviceLikeEvent()
    completed = []
    table.add(ev, lambda: completed.append(1))
    assert isinstance(ev, ReleaseEvent)
    for _ in range(3):
        assert table.take_completed() == []
    assert len(table) == 1 and completed == [] and ev.queries == 0
    ev.recorded = True  # recorded, still running on the device
    assert table.take_completed() == [] and ev.queries == 1
    ev.done = True
    done = table.take_completed()
    assert len(done) == 1 and len(table) == 0
    done[0].on_complete()
    assert completed == [1] and ev.destroyed == 1
    assert table.take_completed() == [] and ev.destroyed == 1  # destroyed exactly once


def test_host_event_is_recorded_before_it_completes():
    ev = HostReleaseEvent()
    assert not ev.recorded and not ev.query()
    ev.record()
    assert ev.recorded and not ev.query()
    ev.complete()
    assert ev.recorded and ev.query()
    done = HostReleaseEvent.completed()
    assert done.recorded and done.query()


async def test_reaper_completes_an_event_set_from_another_thread_without_polling():
    table = PendingReleases()
    reaper = ReleaseReaper(table, poll_interval=3600)  # polling would never come in time
    order = []
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        events = [HostReleaseEvent(reaper.wake_threadsafe) for _ in range(3)]
        for i, ev in enumerate(events):
            table.add(ev, lambda i=i: order.append(i))

        def worker():
            for ev in events:
                ev.record()
                ev.complete()

        await trio.to_thread.run_sync(worker)
        with trio.fail_after(2):
            while len(order) < 3:
                await trio.sleep(0.001)
        assert sorted(order) == [0, 1, 2] and len(table) == 0
        nursery.cancel_scope.cancel()


async def test_reaper_polls_device_events_and_frees_after_completion():
    table = PendingReleases()
    reaper = ReleaseReaper(table, poll_interval=0.001)
    log = []

    class Import:
        def close(self):
            log.append(("closed", threading.current_thread() is not threading.main_thread()))

    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        ev = DeviceLikeEvent()
        table.add(ev, lambda: reaper.free_later(Import(), lambda: log.append("then")))
        await trio.sleep(0.02)
        assert log == [] and len(table) == 1  # unrecorded: pending, nothing freed
        ev.recorded = True
        ev.done = True
        with trio.fail_after(2):
            while "then" not in log:
                await trio.sleep(0.001)
        # freed off the trio thread (R4), and only then the follow-up
        assert log == [("closed", True), "then"]
        nursery.cancel_scope.cancel()


async def test_drain_wakes_on_the_reapers_passes_and_waits_for_the_frees():
    table = PendingReleases()
    reaper = ReleaseReaper(table)
    done, freed = [], []

    class Closeable:
        def close(self):
            freed.append(1)

    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        ev = HostReleaseEvent(reaper.wake_threadsafe)
        ev.record()
        table.add(ev, lambda: (done.append(1), reaper.free_later(Closeable(), lambda: done.append(2))))
        assert not await reaper.drain(0.05)  # the event has not completed: bounded, and False
        threading.Timer(0.05, ev.complete).start()
        with trio.fail_after(5):
            assert await reaper.drain(5)
        assert done == [1, 2] and freed == [1] and reaper.idle  # the free and its follow-up ran too
        nursery.cancel_scope.cancel()


def test_entries_of_a_batch_complete_in_one_call_per_pass_in_the_order_they_were_added():
    from vmafxd.reaper import complete_pass

    table = PendingReleases()
    calls, alone = [], []
    events = [DeviceLikeEvent() for _ in range(4)]
    table.add_many(events[:3], ["a", "b", "c"], calls.append)
    table.add(events[3], lambda: alone.append("d"))
    for ev in events:
        ev.recorded = True
    events[1].done = events[0].done = events[3].done = True
    complete_pass(table.take_completed())
    assert calls == [["a", "b"]] and alone == ["d"] and len(table) == 1
    assert events[2].queries == 1 and events[2].destroyed == 0  # still pending, asked once
    events[2].done = True
    complete_pass(table.take_completed())
    assert calls == [["a", "b"], ["c"]] and len(table) == 0 and all(ev.destroyed == 1 for ev in events)


def test_add_many_wakes_the_reaper_once_when_polling_starts_and_never_asks_an_unrecorded_event():
    table = PendingReleases()
    wakes = []
    table.bind(lambda: wakes.append(1))
    polled = [DeviceLikeEvent() for _ in range(3)]
    table.add_many(polled, [0, 1, 2], lambda labels: None)
    assert wakes == [1] and table.needs_polling() and all(ev.queries == 0 for ev in polled)
    table.add_many([DeviceLikeEvent()], [3], lambda labels: None)
    assert wakes == [1]  # already polling: found on its next pass
    done = HostReleaseEvent.completed()
    table.add_many([HostReleaseEvent(), done], [4, 5], lambda labels: None)
    assert wakes == [1, 1]  # one of them completed already


def test_a_run_is_taken_in_order_and_its_later_frames_are_not_asked_before_it():
    """add_many's frames are a run: a pass stops at the first not complete (a lane reads a session's
    frames in order), so a table of many frames in flight costs a few queries a pass, not one a
    frame; a frame complete out of order goes with the frames before it."""
    from vmafxd.reaper import complete_pass

    table = PendingReleases()
    calls = []
    events = [DeviceLikeEvent() for _ in range(5)]
    table.add_many(events, list("abcde"), calls.append)
    for ev in events:
        ev.recorded = True
    events[2].done = True  # out of order
    complete_pass(table.take_completed())
    assert calls == [] and len(table) == 5
    assert [ev.queries for ev in events] == [1, 0, 0, 0, 0]
    events[0].done = events[1].done = True
    complete_pass(table.take_completed())
    assert calls == [["a", "b", "c"]] and len(table) == 2 and events[3].queries == 1 and events[4].queries == 0
    events[3].done = events[4].done = True
    complete_pass(table.take_completed())
    assert calls == [["a", "b", "c"], ["d", "e"]] and len(table) == 0 and not table.needs_polling()
    assert [ev.destroyed for ev in events] == [1] * 5


def test_a_run_whose_query_raises_waits_and_goes_on_next_pass():
    class Flaky(DeviceLikeEvent):
        fail = True

        def query(self) -> bool:
            if Flaky.fail:
                Flaky.fail = False
                raise RuntimeError("driver said no")
            return super().query()

    from vmafxd.reaper import complete_pass

    table = PendingReleases()
    calls = []
    events = [DeviceLikeEvent(), Flaky(), DeviceLikeEvent()]
    for ev in events:
        ev.recorded = ev.done = True
    table.add_many(events, [0, 1, 2], calls.append)
    complete_pass(table.take_completed())
    assert calls == [[0]] and len(table) == 2  # the query raised: the run stops there, nothing lost
    complete_pass(table.take_completed())
    assert calls == [[0], [1, 2]] and len(table) == 0 and [ev.destroyed for ev in events] == [1, 1, 1]
