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
        self.batch = batch
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


def test_auto_batch_holds_about_as_many_pixels_as_32_frames_of_1080p():
    from vmafxd.core.batch_size import batch_for, check_batch_setting

    assert [batch_for("auto", w, h) for w, h in ((1920, 1080), (3840, 2160), (1280, 720), (576, 324), (64, 64))] == [
        32, 32, 72, 128, 128]
    assert batch_for(8, 64, 64) == 8 and batch_for(200, 3840, 2160) == 200  # a number is taken as it is
    assert check_batch_setting("Auto") == "auto" and check_batch_setting(5) == 5
    for bad in (0, -3, True, "8", 2.0):
        try:
            check_batch_setting(bad)
        except ValueError as e:
            assert "gpu_batch" in str(e)
        else:
            raise AssertionError(f"{bad!r} accepted")


def test_an_auto_session_on_the_emulated_lane_batches_by_picture_size(monkeypatch):
    """``gpu_batch = "auto"`` on a real (emulated) lane: a session of small pictures gets batches
    of up to 128 frames, the scorer sized for them, and every frame scored once; a number stays."""
    import trio

    from vmafx.formats import PixelFormat
    from vmafxd.core.layout import Geometry
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.lanes import create_lane
    from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
    from vmafxd.lanes.gpu.engine import GpuScorer
    from vmafxd.offline import resolve_models

    from ..reference import vendored_pairs
    from .conftest import RecordingSink, import_picture

    refs, dists = vendored_pairs()[0].pictures()
    geo = Geometry(refs[0].width, refs[0].height, PixelFormat.YUV420P, 8)
    sizes: list[int] = []
    enqueue = GpuScorer.enqueue
    monkeypatch.setattr(GpuScorer, "enqueue", lambda self, frames: sizes.append(len(frames)) or enqueue(self, frames))
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])

    def run(setting, count):
        lane = create_lane("emu", type("C", (), {"gpu_batch": setting})(), LaneServices())
        ref, dist = import_picture(lane, refs[0]), import_picture(lane, dists[0])
        sink = RecordingSink()
        got = {}

        async def main():
            async with trio.open_nursery() as nursery:
                await nursery.start(lane.run)
                sess = await lane.open_session(SessionSpec(plan, geo), sink)
                got["batch"], got["max_batch"] = sess.batch, sess.scorer.max_batch
                handles = sess.submit_many([LaneFrame(i, ref, dist) for i in range(count)])
                await sess.finish()
                for h in handles:
                    h.destroy()
                nursery.cancel_scope.cancel()

        sizes.clear()
        trio.run(main)
        ref.close()
        dist.close()
        assert sorted(i for i, _ in sink.scored) == list(range(count)) and not sink.failed
        return got, list(sizes)

    got, batches = run("auto", 130)
    assert geo.width * geo.height <= 1920 * 1080 // 4  # (a picture a quarter of 1080p's or less: 128)
    assert got == {"batch": 128, "max_batch": 128} and batches == [128, 2]
    got, batches = run(16, 40)
    assert got == {"batch": 16, "max_batch": 16} and batches == [16, 16, 8]
