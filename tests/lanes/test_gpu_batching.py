"""The GPU worker's batching policy, on stand-in sessions (no device, no thread).

An idle device gets a session's frames at once; while the device has AHEAD
batches in flight and the session one of its own, frames gather and go as one
batch when one of its batches completes or a full batch has gathered; any other
job first launches everything before it."""

from types import SimpleNamespace

from vmafxd.lanes.device import Job
from vmafxd.lanes.gpu.lane_session import FrameJob
from vmafxd.lanes.gpu.worker import GpuWorker


class _Batch:
    def __init__(self):
        self.finished = False
        self.done = SimpleNamespace(query=lambda: self.finished, synchronize=lambda: setattr(self, "finished", True))


class _Session:
    """Records the chunks it is asked to enqueue; each chunk is a batch in flight."""

    def __init__(self, worker: GpuWorker, batch: int):
        self.worker = worker
        self.lane = SimpleNamespace(batch=batch)
        self.chunks: list[list[int]] = []
        self.completed = 0

    def _enqueue(self, jobs) -> None:
        self.chunks.append([j.frame for j in jobs])
        self.worker.inflight.append((self, _Batch()))

    def _complete(self, batch) -> None:
        self.completed += 1


class _Other(Job):
    def __init__(self, log):
        self.log = log

    def run(self) -> None:
        self.log.append("other")


def _worker() -> GpuWorker:
    lane = SimpleNamespace(name="test")
    return GpuWorker(lane, SimpleNamespace(info=SimpleNamespace(ordinal=0)))


def _frames(sess, first, n):
    return [FrameJob(sess, first + i, None) for i in range(n)]


def _finish_oldest(w: GpuWorker) -> None:
    w.inflight[0][1].finished = True
    w.poll()


def test_an_idle_device_starts_at_once_and_a_busy_one_gathers():
    w = _worker()
    s = _Session(w, batch=8)
    w.run_batch(_frames(s, 0, 1))
    w.run_batch(_frames(s, 1, 1))
    assert s.chunks == [[0], [1]]  # fewer than AHEAD in flight: straight away
    for i in range(2, 7):
        w.run_batch(_frames(s, i, 1))
    assert s.chunks == [[0], [1]] and w.busy() and w.poll_timeout() is not None
    _finish_oldest(w)  # a batch completes: what gathered goes as one batch
    assert s.completed == 1 and s.chunks == [[0], [1], [2, 3, 4, 5, 6]]


def test_a_full_batch_goes_without_waiting_and_order_is_kept():
    w = _worker()
    s = _Session(w, batch=4)
    w.run_batch(_frames(s, 0, 2))
    w.run_batch(_frames(s, 2, 1))
    w.run_batch(_frames(s, 3, 9))  # AHEAD in flight; 9 gathered: two full batches go, one frame waits
    assert s.chunks == [[0, 1], [2], [3, 4, 5, 6], [7, 8, 9, 10]]
    _finish_oldest(w)
    _finish_oldest(w)
    _finish_oldest(w)
    assert s.chunks[-1] == [11] and not w._waiting


def test_another_job_launches_what_came_before_it_first():
    w = _worker()
    s = _Session(w, batch=8)
    log: list = []
    w.run_batch(_frames(s, 0, 1) + _frames(s, 1, 1) + _frames(s, 2, 3))
    assert s.chunks == [[0, 1, 2, 3, 4]]
    w.run_batch(_frames(s, 5, 1))
    w.run_batch(_frames(s, 6, 2) + [_Other(log)] + _frames(s, 8, 1))
    assert s.chunks == [[0, 1, 2, 3, 4], [5], [6, 7]] and log == ["other"]
    assert [j.frame for j in w._waiting[s]] == [8]


def test_a_stopping_worker_launches_what_waits():
    w = _worker()
    s = _Session(w, batch=8)
    w.run_batch(_frames(s, 0, 2))
    w.run_batch(_frames(s, 2, 1))
    w.run_batch(_frames(s, 3, 1))
    assert s.chunks == [[0, 1], [2]] and w.busy()
    while w.busy():  # what DeviceWorker.run_forever does after a stop
        w.poll(block=True)
    assert s.chunks == [[0, 1], [2], [3]] and s.completed == 3


def test_with_the_device_busy_a_session_gathers_behind_its_own_batch_only():
    w = _worker()
    a, b = _Session(w, batch=8), _Session(w, batch=8)
    w.run_batch(_frames(a, 0, 1))
    w.run_batch(_frames(a, 1, 1))
    assert a.chunks == [[0], [1]]  # the device had fewer than AHEAD in flight
    w.run_batch(_frames(b, 0, 1))  # AHEAD in flight, none of them b's: b's frame goes at once
    w.run_batch(_frames(b, 1, 2))  # a busy device and one of b's own in flight: b gathers
    w.run_batch(_frames(a, 2, 1))  # and so does a
    assert b.chunks == [[0]] and a.chunks == [[0], [1]]
    _finish_oldest(w)  # a's first ends: still AHEAD in flight, one of each session's
    assert a.chunks == [[0], [1]] and b.chunks == [[0]]
    _finish_oldest(w)  # a's second ends: what both gathered goes, a batch each
    assert a.chunks == [[0], [1], [2]] and b.chunks == [[0], [1, 2]] and not w._waiting
