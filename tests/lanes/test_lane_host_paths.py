"""The lane's per-batch host steps taken at once give what the frame-by-frame steps gave.

``BatchReleaseHandle.destroy_completed`` (a run of a submit's handles released in order, a batch's
handles asked once and their shares dropped in one step) against ``recorded and query()`` then
``destroy()`` on each in turn; ``GpuLaneSession._enqueue_plain`` takes only the chunks whose frames
need none of ``_enqueue``'s per-frame steps; the worker's :class:`TrioHops` runs the calls a worker
thread hops to the trio thread in order, with one ``run_sync_soon`` for those queued together.
No device is needed.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import trio

from vmafxd.lanes.device import TrioHops
from vmafxd.lanes.gpu.lane_session import GpuLaneSession
from vmafxd.lanes.gpu.release_events import BatchReleaseHandle, SharedEvent


class _Dev:
    def make_current(self):
        pass


class _Event:
    """A device event: complete or not; counts its closes."""

    def __init__(self, done: bool):
        self.done = done
        self.closed = 0

    def query(self) -> bool:
        return self.done

    def close(self) -> None:
        self.closed += 1


def _scenario(seed: int):
    """Handles as a submit's run holds them: batches' handles side by side, each batch's event
    complete or not and holding the worker's share or not, with handles never bound, completed on
    the host, bound and not yet reading as recorded, or destroyed already among them."""
    rng = random.Random(seed)
    shared_events, handles = [], []
    for _ in range(rng.randint(1, 6)):
        shared = SharedEvent(_Dev(), _Event(rng.random() < 0.7))
        if rng.random() < 0.5:
            shared.add_shares()  # the worker's own, not dropped yet
        shared_events.append(shared)
        for _ in range(rng.randint(1, 5)):
            h = BatchReleaseHandle()
            kind = rng.random()
            if kind < 0.75:
                h.bind(shared)
            elif kind < 0.82:
                h.complete_on_host()
            elif kind < 0.88:
                shared.add_shares()  # bound, its store of "recorded" not made yet
                h._shared = shared
            elif kind < 0.94:
                h.bind(shared)
                h.destroy()
            handles.append(h)  # else: never bound
    return shared_events, handles


def _one_by_one(handles, start: int) -> int:
    i = start
    for h in handles[start:]:
        if not (h.recorded and h.query()):
            break
        h.destroy()
        i += 1
    return i


def _state(shared_events, handles):
    return ([(s.shares, s.done, s.event.closed) for s in shared_events],
            [(h.recorded, h._destroyed, h._shared is None, h._host_done) for h in handles])


@pytest.mark.parametrize("seed", range(300))
def test_destroy_completed_is_the_one_by_one_loop(seed):
    want_events, want_handles = _scenario(seed)
    got_events, got_handles = _scenario(seed)
    start = random.Random(-seed).randint(0, len(want_handles))
    # ... the first `start` handles already released, as a run the reaper passed over before
    _one_by_one(want_handles[:start], 0)
    _one_by_one(got_handles[:start], 0)
    want = _one_by_one(want_handles, start)
    got = BatchReleaseHandle.destroy_completed(got_handles, start)
    assert got == want
    assert _state(got_events, got_handles) == _state(want_events, want_handles)


def test_destroy_completed_asks_a_batch_once_and_never_an_unrecorded_handle():
    asked = []

    class Counted(_Event):
        def query(self):
            asked.append(self)
            return self.done

    first, second = SharedEvent(_Dev(), Counted(True)), SharedEvent(_Dev(), Counted(False))
    handles = [BatchReleaseHandle() for _ in range(7)]
    BatchReleaseHandle.bind_all(handles[:4], first)
    BatchReleaseHandle.bind_all(handles[4:6], second)  # handles[6]: never bound (R5: never asked)
    assert first.shares == 4 and second.shares == 2
    assert BatchReleaseHandle.destroy_completed(handles) == 4
    assert asked == [first.event, second.event] and first.event.closed == 1 and first.shares == 0
    second.event.done = True
    assert BatchReleaseHandle.destroy_completed(handles, 4) == 6 and second.event.closed == 1
    assert BatchReleaseHandle.destroy_completed(handles, 6) == 6


# ----------------------------------------------------------------------------- the plain batch


class _Imp(SimpleNamespace):
    pass


def _job(device=0, zero_copy=True, fence=False, closed=False, other_dist_device=None):
    def imp(dev):
        return _Imp(device=dev, device_source=object() if zero_copy else None, closed=closed)

    frame = SimpleNamespace(index=0, ref=imp(device), dist=imp(device if other_dist_device is None
                                                                else other_dist_device),
                            ref_gpu_fence=SimpleNamespace(kind="cuda_ipc_event", handle=b"") if fence else None,
                            dist_gpu_fence=None)
    return SimpleNamespace(frame=frame, handle=BatchReleaseHandle())


@pytest.mark.parametrize("odd", [dict(zero_copy=False), dict(fence=True), dict(closed=True),
                                 dict(device=1), dict(other_dist_device=1)])
def test_a_chunk_with_any_frame_needing_the_per_frame_steps_is_left_to_them(odd):
    """A host upload, a producer fence, a closed import or a buffer of another device: the plain path
    does nothing (no batch enqueued, no handle bound) and _enqueue checks each frame as before."""
    enqueued = []
    session = SimpleNamespace(device=0, worker=SimpleNamespace(wait_slot=lambda s: None),
                              scorer=SimpleNamespace(enqueue=lambda frames: enqueued.append(frames)))
    chunk = [_job(), _job(**odd), _job()]
    assert GpuLaneSession._enqueue_plain(session, chunk) is False
    assert enqueued == [] and not any(j.handle.recorded for j in chunk)


def test_a_plain_chunk_is_one_batch_of_its_frames_in_order():
    batches, kept = [], []
    session = SimpleNamespace(device=0, worker=SimpleNamespace(wait_slot=lambda s: None),
                              scorer=SimpleNamespace(enqueue=lambda frames: batches.append(frames) or "batch"),
                              _enqueued=lambda chunk, batch: kept.append((chunk, batch)))
    chunk = [_job() for _ in range(5)]
    assert GpuLaneSession._enqueue_plain(session, chunk) is True
    (frames,) = batches
    assert [(f.ref, f.dist, list(f.waits)) for f in frames] == [
        (j.frame.ref.device_source, j.frame.dist.device_source, []) for j in chunk]
    assert kept == [(chunk, "batch")]


# ----------------------------------------------------------------------------- hops to trio


class _Token:
    """A trio token that queues what run_sync_soon is given (run by the test, as trio would)."""

    def __init__(self):
        self.queued = []
        self.finished = False

    def run_sync_soon(self, fn, *args):
        if self.finished:
            raise trio.RunFinishedError("the run has finished")
        self.queued.append((fn, args))

    def run_queued(self):
        queued, self.queued = self.queued, []
        for fn, args in queued:
            fn(*args)


def test_hops_run_in_order_with_one_wake_up_for_those_queued_together():
    token, ran = _Token(), []
    hops = TrioHops(token)
    for i in range(3):
        hops.call(ran.append, (i,))
    assert len(token.queued) == 1 and ran == []
    token.run_queued()
    assert ran == [0, 1, 2]
    hops.call(ran.append, (3,))  # a new run: a new wake-up
    assert len(token.queued) == 1
    token.run_queued()
    assert ran == [0, 1, 2, 3]


def test_a_call_hopped_while_the_trio_thread_runs_the_others_is_run_after_them():
    token, ran = _Token(), []
    hops = TrioHops(token)

    def first():
        ran.append("first")
        hops.call(ran.append, ("during",))  # as a worker thread would, while the run goes on

    hops.call(first, ())
    hops.call(ran.append, ("second",))
    token.run_queued()
    assert ran == ["first", "second"] and len(token.queued) == 1
    token.run_queued()
    assert ran == ["first", "second", "during"]


def test_hops_after_the_run_finished_are_dropped_as_run_sync_soon_drops_them():
    token, ran = _Token(), []
    hops = TrioHops(token)
    token.finished = True
    hops.call(ran.append, (1,))
    token.finished = False
    hops.call(ran.append, (2,))  # nothing of the refused call is left to run
    token.run_queued()
    assert ran == [2]


def test_worker_sessions_hop_through_one_queue_per_worker():
    from vmafxd.lanes.device import DeviceWorker, WorkerLaneSession

    class Session(WorkerLaneSession):
        def submit(self, frame):
            raise NotImplementedError

        def _finish_job(self, deliver):
            raise NotImplementedError

        def _abort_job(self):
            raise NotImplementedError

    token, ran = _Token(), []
    worker = DeviceWorker(0, "w")
    a, b = Session(worker, None, token), Session(worker, None, token)
    a._hop(ran.append, "a1")
    b._hop(ran.append, "b1")
    a._hop(ran.append, "a2")
    assert len(token.queued) == 1
    token.run_queued()
    assert ran == ["a1", "b1", "a2"]


def test_a_sessions_results_queued_one_after_the_other_are_one_call_in_order():
    """call_joined: the results of a session's batches queued back to back reach its sink in one call,
    end to end; a call between them, or another session's results, keeps them apart."""
    token, ran = _Token(), []

    class Session:
        def __init__(self, name):
            self.name = name

        def deliver(self, items):
            ran.append((self.name, list(items)))

    a, b = Session("a"), Session("b")
    hops = TrioHops(token)
    hops.call_joined(a.deliver, [1, 2])
    hops.call_joined(a.deliver, [3])
    hops.call_joined(b.deliver, [1])
    hops.call_joined(a.deliver, [4])
    hops.call(ran.append, ("failed 5",))
    hops.call_joined(a.deliver, [6])
    assert len(token.queued) == 1
    token.run_queued()
    assert ran == [("a", [1, 2, 3]), ("b", [1]), ("a", [4]), "failed 5", ("a", [6])]
    hops.call_joined(a.deliver, [7])  # a new run: nothing left to join
    token.run_queued()
    assert ran[-1] == ("a", [7])
