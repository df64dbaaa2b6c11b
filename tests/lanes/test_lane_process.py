"""The GPU lane in worker processes (``--lane-process``), over the emulator: what the daemon sees is the
in-process lane's, and a worker's death costs every frame it held one outcome and its release.

The emulated lane runs the GPU lane's code with its kernels on the CPU, so the
worker process, the wire between it and the daemon, and the death of a worker
are all exercised without a GPU.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from vmafx.protocol import BufferUnregistered, ErrorCode, FrameError, Released, Result, SessionClosed

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


def _worker_pid(client: RawClient) -> int:
    devices = client.hello().lanes[0]["devices"]
    return devices[0]["worker_pid"]


def _score(c: RawClient, refs, dists, n: int, features=("psnr",), models=()):
    """Score frames 0..n-1 with a buffer pair each; returns (outcomes by index, session_closed)."""
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i], pitch_pad=64)) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(models=list(models), features=list(features)).session
    for i, (rid, did) in enumerate(ids):
        c.submit(s, i, rid, did)
    closed = c.close_session(s, timeout=300)
    for rid, did in ids:
        assert isinstance(c.unregister(rid), BufferUnregistered) and isinstance(c.unregister(did), BufferUnregistered)
    for r, d in bufs:
        r.close()
        d.close()
    return {i: c.outcomes[(s, i)] for i in range(n)}, closed


def test_scores_equal_the_in_process_lane(p01):
    """vmaf_v0.6.1 + psnr through a worker process: every frame's every metric, and the pooled mean, equal the
    CPU lane's -- the in-process emulated lane's (tests/lanes/test_gpu_lane.py) -- bit for bit."""
    load_runtime("emu")
    refs, dists = p01
    n = 5
    want, want_pooled = reference_frames(refs, dists, models=("version=vmaf_v0.6.1",), features=("psnr",), n=n)
    d = Daemon("--lane", "emu", "--lane-process", "--gpu-batch", "4", workers=1, fence_timeout_ms=2000)
    try:
        c = RawClient(d.socket, "process-scores")
        hello = c.hello()
        lane = hello.lanes[0]
        assert lane["lane"] == "emu" and lane["process"] is True
        pid = lane["devices"][0]["worker_pid"]
        assert pid in _children(d.pid)
        got, closed = _score(c, refs, dists, n, models=("version=vmaf_v0.6.1",))
        assert (closed.frames, closed.failed) == (n, 0)
        for i in range(n):
            assert isinstance(got[i], Result) and got[i].metrics == want[i], i
        assert closed.pooled["vmaf"]["mean"] == want_pooled["vmaf"]["mean"]
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
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
