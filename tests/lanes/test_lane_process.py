"""The GPU lane in worker processes (``--lane-process``), over the emulator: what the daemon sees is the
in-process lane's, and a worker's death costs every frame it held one outcome and its release.

The emulated lane runs the GPU lane's code with its kernels on the CPU, so the
worker process, the wire between it and the daemon, and the death of a worker
are all exercised without a GPU.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from vmafx.formats import PixelFormat
from vmafx.transport import TransportClosed
from vmafx.protocol import BufferUnregistered, Error, ErrorCode, FrameError, OpenSession, Result, Status

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient, frame_memfd
from ..daemon.test_daemon_scoring import reference_frames
from ..reference import vendored_pairs
from .conftest import load_runtime


@pytest.fixture(scope="module")
def p01():
    refs, dists = vendored_pairs()[0].pictures()
    return refs, dists


def _children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _worker_pid(socket_path: str) -> int | None:
    """The device 0 worker's pid, from a hello of a client of its own (None while none runs)."""
    c = RawClient(socket_path, "process-pid")
    try:
        return c.hello().lanes[0]["devices"][0].get("worker_pid")
    finally:
        c.close()


def _score(c: RawClient, refs, dists, n: int, features=("psnr",), models=(), pair=None, group: int | None = None):
    """Score frames 0..n-1 with a buffer pair each, one submit a frame or (``group``) submit_many
    groups of that many frames; returns (outcomes by index, session_closed)."""
    fmt = PixelFormat(pair.pix_fmt) if pair is not None else PixelFormat.YUV420P
    bufs = [(frame_memfd(refs[i], fmt), frame_memfd(dists[i], fmt, pitch_pad=64)) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    geometry = {} if pair is None else dict(width=pair.width, height=pair.height, pixel_format=fmt.value,
                                            bitdepth=pair.bitdepth)
    s = c.open_ok(models=list(models), features=list(features), **geometry).session
    if group is None:
        for i, (rid, did) in enumerate(ids):
            c.submit(s, i, rid, did)
    else:
        for start in range(0, n, group):
            c.submit_many(s, [(i, *ids[i]) for i in range(start, min(n, start + group))])
    closed = c.close_session(s, timeout=300)
    for rid, did in ids:
        assert isinstance(c.unregister(rid), BufferUnregistered) and isinstance(c.unregister(did), BufferUnregistered)
    for r, d in bufs:
        r.close()
        d.close()
    return {i: c.outcomes[(s, i)] for i in range(n)}, closed


def test_scores_equal_the_in_process_lane():
    """Each vendored pair (4:2:0, 4:2:2, 4:4:4, 10-bit, an odd size) through a worker process, vmaf_v0.6.1 +
    psnr: every frame's every metric and the pooled mean equal the CPU lane's bit for bit -- what the
    in-process emulated lane is held to (tests/lanes/test_gpu_lane.py) -- and nothing is left unanswered."""
    load_runtime("emu")
    d = Daemon("--lane", "emu", "--lane-process", "--gpu-batch", "4", workers=1, fence_timeout_ms=2000)
    try:
        c = RawClient(d.socket, "process-scores")
        hello = c.hello()
        lane = hello.lanes[0]
        assert lane["lane"] == "emu" and lane["process"] is True
        pid = lane["devices"][0]["worker_pid"]
        assert pid in _children(d.pid)
        for pair in vendored_pairs():
            refs, dists = pair.pictures()
            n = min(3, len(refs))
            want, want_pooled = reference_frames(refs, dists, models=("version=vmaf_v0.6.1",), features=("psnr",),
                                                 n=n)
            got, closed = _score(c, refs, dists, n, models=("version=vmaf_v0.6.1",), pair=pair)
            assert (closed.frames, closed.failed) == (n, 0), pair.id
            for i in range(n):
                assert isinstance(got[i], Result) and got[i].metrics == want[i], (pair.id, i)
            assert closed.pooled["vmaf"]["mean"] == want_pooled["vmaf"]["mean"], pair.id
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        # the worker's refusal of an import crosses with its class and field (memfd without seals)
        unsealed = frame_memfd(vendored_pairs()[0].pictures()[0][0], seal=False)
        refused = c.register(unsealed)
        assert isinstance(refused, Error) and (refused.code, refused.field) == ("E_INVAL", "planes[0].fd")
        assert "F_SEAL_SHRINK" in refused.message
        unsealed.close()
        # status reads the worker's figures: memfds are read in place, the emulator counts its allocations
        status = c.request(Status(seq=c.conn.next_seq())).status
        assert status["host_copies"] == 0
        assert [row["device"] for row in status["device_memory"]] == [0]
        assert "allocations" in status["device_memory"][0]
        c.close()
        rc = d.stop()
        assert rc == 0, d.log()[-3000:]
        # Shutdown leaves no worker behind.
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the lane's worker process outlived the daemon"
        assert "lane worker" in d.log()
    finally:
        d.close()


def test_grouped_submits_score_as_the_in_process_lane(p01):
    """Frames sent in groups (submit_many: the daemon hands each run to the lane in one go; through a
    worker process one SUBMIT_MANY, one job group there): psnr, vif and motion -- temporal, so the
    frames' order within and across groups counts -- equal the in-process emulated lane's for every
    frame and the pooled values, bit for bit; the worker took groups, and nothing is left unanswered."""
    load_runtime("emu")
    refs, dists = p01
    n, features = 11, ("psnr", "vif", "motion")
    runs = {}
    for mode in ("in-process", "lane-process"):
        extra = ("--lane-process",) if mode == "lane-process" else ()
        d = Daemon("--lane", "emu", *extra, "--gpu-batch", "4", workers=1, fence_timeout_ms=2000)
        try:
            c = RawClient(d.socket, "process-groups", submit_many=True)
            c.hello()
            runs[mode] = _score(c, refs, dists, n, features, group=5)
            assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
            c.close()
            assert d.stop() == 0, d.log()[-3000:]
            log = d.log()
        finally:
            d.close()
    (want, want_closed), (got, got_closed) = runs["in-process"], runs["lane-process"]
    assert (got_closed.frames, got_closed.failed) == (want_closed.frames, want_closed.failed) == (n, 0)
    for i in range(n):
        assert isinstance(got[i], Result) and got[i].metrics == want[i].metrics, i
    assert got[n - 1].metrics["integer_motion2"] > 0  # the temporal feature did run
    assert got_closed.pooled == want_closed.pooled and got_closed.aggregate == want_closed.aggregate
    sent = re.search(r"(\d+) frames sent in \d+ packets \((\d+) groups\)", log)
    assert sent is not None and int(sent[1]) == n and int(sent[2]) >= 1, log[-3000:]


def test_a_killed_worker_costs_each_frame_one_outcome_and_its_release(p01):
    """SIGKILL the worker with frames in flight: every frame gets exactly one outcome (a result, or
    E_INTERNAL naming the dead worker), every buffer is released, the session ends (later frames fail at
    once), the daemon keeps no fd of the dead worker, and a new worker scores a new session correctly."""
    load_runtime("emu")
    refs, dists = p01
    n = 8
    d = Daemon("--lane", "emu", "--lane-process", "--gpu-batch", "2", workers=1, fence_timeout_ms=2000)
    try:
        baseline = d.wait_settled()
        c = RawClient(d.socket, "process-kill", submit_many=True)
        pid = _worker_pid(d.socket)
        c.hello()
        bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
        ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
        # vmaf_v0.6.1 on the emulator: each batch takes long enough that frames are in flight at the kill
        s = c.open_ok(models=["version=vmaf_v0.6.1"]).session
        c.submit_many(s, [(i, rid, did) for i, (rid, did) in enumerate(ids)])  # one group in flight
        time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        first_failure = c.wait_for(lambda m: isinstance(m, FrameError), timeout=60)
        c.inbox.appendleft(first_failure)
        assert first_failure.code == ErrorCode.E_INTERNAL.value
        assert "device 0 was killed by SIGKILL" in first_failure.message
        # the session cannot go on: later frames fail at once, and are released (one alone, a group)
        c.submit(s, n, *ids[0])
        c.submit_many(s, [(n + 1, *ids[2]), (n + 2, *ids[3])])
        for i in (n, n + 1, n + 2):
            late = c.outcome(s, i, timeout=30)
            assert isinstance(late, FrameError) and late.code == "E_INTERNAL" and "open a new one" in late.message
        closed = c.close_session(s, timeout=60)
        outcomes = [c.outcomes[(s, i)] for i in range(n + 3)]
        failed = [o for o in outcomes if isinstance(o, FrameError)]
        assert closed.frames + closed.failed == n + 3 and closed.failed == len(failed) >= 4
        assert all(o.code == "E_INTERNAL" for o in failed)
        # exactly one outcome each (the client's ledger refuses a second) and both roles released
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        assert sorted((r.index, r.role) for r in c.released if r.session == s) == \
            sorted((i, role) for i in range(n + 3) for role in ("ref", "dist"))
        log = d.log()
        assert f"pid {pid}) (device 0) died: was killed by SIGKILL (9)" in log, log[-3000:]
        # a buffer the dead worker imported refuses its frames, naming the role: alone, and within a
        # group whose other frames (buffers the new worker imported) score
        s2 = c.open_ok(features=["psnr"]).session
        c.submit(s2, 0, *ids[1])
        stale = c.outcome(s2, 0, timeout=30)
        assert isinstance(stale, FrameError) and stale.code == "E_INTERNAL" and stale.field == "ref"
        assert "register it again" in stale.message
        fresh = [(frame_memfd(refs[k]), frame_memfd(dists[k])) for k in (1, 3)]
        fresh_ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in fresh]
        c.submit_many(s2, [(1, *fresh_ids[0]), (2, *ids[4]), (3, *fresh_ids[1])])
        c.close_session(s2, timeout=30)
        stale = c.outcomes[(s2, 2)]
        assert isinstance(stale, FrameError) and stale.code == "E_INTERNAL" and stale.field == "ref"
        assert "register it again" in stale.message
        psnr, _ = reference_frames(refs, dists, models=(), features=("psnr",), n=4)
        assert [c.outcomes[(s2, i)].metrics for i in (1, 3)] == [psnr[1], psnr[3]]
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        for rid, did in fresh_ids:
            assert isinstance(c.unregister(rid), BufferUnregistered) and isinstance(c.unregister(did), BufferUnregistered)
        for r, dd in fresh:
            r.close()
            dd.close()
        for rid, did in ids:
            assert isinstance(c.unregister(rid), BufferUnregistered) and isinstance(c.unregister(did), BufferUnregistered)
        for r, dd in bufs:
            r.close()
            dd.close()
        # a new worker, and a new session on it scores correctly
        new_pid = _worker_pid(d.socket)
        assert new_pid != pid and new_pid in _children(d.pid) and not _alive(pid)
        # a worker killed while it opens a session: the open is refused, E_INTERNAL (the worker is
        # stopped first, so the open is still in its hands whatever its kernels cost to load)
        os.kill(new_pid, signal.SIGSTOP)
        seq = c.conn.next_seq()
        c.send(OpenSession(seq=seq, width=576, height=324, pixel_format="yuv420p", bitdepth=8,
                           features=("adm", "cambi")))
        time.sleep(0.3)
        os.kill(new_pid, signal.SIGKILL)
        refused = c.wait_for(lambda m: getattr(m, "re", None) == seq, timeout=60)
        assert isinstance(refused, Error) and (refused.code, refused.field) == ("E_INTERNAL", "session"), refused
        assert "was killed by SIGKILL" in refused.message
        deadline = time.monotonic() + 30
        while (newer := _worker_pid(d.socket)) in (new_pid, None) and time.monotonic() < deadline:
            time.sleep(0.1)  # the second young death: the next worker starts after a 1 s back-off
        assert newer != new_pid and newer in _children(d.pid)
        want, _ = reference_frames(refs, dists, models=(), features=("psnr", "vif"), n=3)
        got, closed = _score(c, refs, dists, 3, features=("psnr", "vif"))
        assert (closed.frames, closed.failed) == (3, 0)
        assert all(isinstance(got[i], Result) and got[i].metrics == want[i] for i in range(3))
        c.close()
        # the dead worker's sockets and pidfd are closed; the new one's replace them
        assert d.wait_fds(baseline) == baseline, d.fds()
        assert d.stop() == 0
    finally:
        d.close()


def test_a_daemon_killed_outright_leaves_no_worker():
    """SIGKILL the daemon itself: its worker goes too (the end of its stream, and PR_SET_PDEATHSIG)."""
    load_runtime("emu")
    d = Daemon("--lane", "emu", "--lane-process", workers=1)
    try:
        pid = _worker_pid(d.socket)
        assert _alive(pid)
        d.proc.kill()
        d.proc.wait()
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the lane's worker process outlived a killed daemon"
    finally:
        d.close()


def test_sigterm_with_frames_in_flight_answers_each_and_leaves_no_worker(p01):
    """A graceful stop while a worker scores: each frame gets one outcome (scored, or E_SHUTDOWN), each its
    release, the daemon exits 0 and its worker is gone."""
    load_runtime("emu")
    refs, dists = p01
    n = 6
    d = Daemon("--lane", "emu", "--lane-process", "--gpu-batch", "2", workers=1, fence_timeout_ms=2000)
    try:
        pid = _worker_pid(d.socket)
        c = RawClient(d.socket, "process-sigterm")
        c.hello()
        bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
        ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
        s = c.open_ok(models=["version=vmaf_v0.6.1"]).session
        for i, (rid, did) in enumerate(ids):
            c.submit(s, i, rid, did)
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGTERM)
        outcomes = [c.outcome(s, i, timeout=60) for i in range(n)]
        assert all(isinstance(o, Result) or (isinstance(o, FrameError) and o.code == "E_SHUTDOWN") for o in outcomes)
        try:
            c.drain(2.0)  # the last releases, the goodbye
        except TransportClosed:
            pass  # the daemon closed the connection after its goodbye
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        assert d.proc.wait(30) == 0, d.log()[-3000:]
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
        assert "died" not in d.log()
        c.close()
        for r, dd in bufs:
            r.close()
            dd.close()
    finally:
        d.close()


def test_a_worker_that_cannot_be_started_makes_the_lane_unavailable(monkeypatch):
    """No pidfd to be had (a sandbox's syscall filter, say): the lane is unavailable, in one line naming why,
    and the process it had spawned is reaped."""
    load_runtime("emu")
    from types import SimpleNamespace

    from vmafxd.lanes import LaneUnavailable, create_lane
    from vmafxd.lanes.device import LaneServices
    from vmafxd.lanes.process import worker

    spawned = []
    real_popen = worker.subprocess.Popen

    def popen(*a, **kw):
        spawned.append(real_popen(*a, **kw))
        return spawned[-1]

    def refused(pid):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(worker.subprocess, "Popen", popen)
    monkeypatch.setattr(worker.os, "pidfd_open", refused)
    config = SimpleNamespace(lane_process=True, gpu_batch=4, gpu_devices=None, log_level="info")
    with pytest.raises(LaneUnavailable) as e:
        create_lane("emu", config, LaneServices())
    assert "cannot start its worker process" in str(e.value) and "Operation not permitted" in str(e.value)
    assert len(spawned) == 1 and spawned[0].returncode is not None  # killed and reaped
