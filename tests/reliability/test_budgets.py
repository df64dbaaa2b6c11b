"""Memory and fd budgets: a frame's cost from its geometry and plan, refusals naming the limit, E_NOFD."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafx.protocol import Error, ErrorCode, FrameError, Limits, RegisterBuffer, Result, SessionOpened, Status, \
    StatusReply
from vmafxd.admission import (
    FD_RESERVE, FDS_PER_BUFFER, FDS_PER_FILE_JOB, FDS_PER_FRAME, MAX_FILE_JOBS, Admission, fd_needs,
)
from vmafxd.core.layout import Geometry
from vmafxd.core.picture import Picture
from vmafxd.core.working_set import batched_frame_bytes, frame_bytes, picture_bytes
from vmafxd.session import build_plan

from ..daemon.conftest import ROOT, Daemon
from ..daemon.rawclient import RawClient, frame_memfd

UHD8K_444_10 = Geometry(7680, 4320, PixelFormat.YUV444P, 10)
HUGE = Geometry(16384, 16384, PixelFormat.YUV420P, 8)


def _picture(value: int, size: int = 64) -> Picture:
    c = np.full((size // 2, size // 2), 128, np.uint8)
    return Picture((np.full((size, size), value, np.uint8), c, c.copy()), 8, Subsampling.S420)


def test_a_frame_costs_its_pictures_and_the_plans_working_set():
    plan = build_plan([], [], Limits())  # the default model: vif, adm, motion
    assert picture_bytes(UHD8K_444_10) == 7680 * 4320 * 2 * 3
    psnr = build_plan([], ["psnr"], Limits())
    assert frame_bytes(plan, UHD8K_444_10) - frame_bytes(psnr, UHD8K_444_10) == 7680 * 4320 * (48 - 8)
    adm = Admission(Limits())
    adm.check_frame_cost(frame_bytes(plan, UHD8K_444_10), "8K")  # accepted by default
    with pytest.raises(Exception) as ei:
        adm.check_frame_cost(frame_bytes(plan, HUGE), "16384x16384")
    assert (ei.value.code, ei.value.field) == (ErrorCode.E_NOMEM, "width")
    assert "limits.max_frame_bytes (4.0 GiB)" in ei.value.message


def test_a_batching_lane_counts_a_queued_frame_without_the_working_set():
    """A GPU lane allocates its working set per batch: 128 frames of 1080p in flight (the
    benchmark's load) must fit one client's default budget, which the per-frame working set
    of the CPU lane's estimate (~100 MiB a frame) would exceed."""
    plan = build_plan([], [], Limits())
    hd = Geometry(1920, 1080, PixelFormat.YUV420P, 8)
    assert batched_frame_bytes(hd) == 2 * 1920 * 1080 * 3 // 2 + (64 << 10)
    assert 128 * frame_bytes(plan, hd) > Limits().max_bytes_in_flight_per_client
    from vmafxd.lanes.gpu.lane import GpuLane  # the GPU lanes' cost is this one (trio imported lazily)
    assert GpuLane.frame_bytes(None, plan, hd) == batched_frame_bytes(hd)
    adm = Admission(Limits())
    for held in range(128):  # frame by frame, as the client handler admits them
        adm.check_frame(1000, held * batched_frame_bytes(hd), batched_frame_bytes(hd))


def test_the_daemon_refuses_a_geometry_no_budget_holds_and_accepts_8k(tmp_path):
    d = Daemon()
    try:
        c = RawClient(d.socket)
        c.hello()
        err = c.open_session(width=16384, height=16384)
        assert isinstance(err, Error) and (err.code, err.field) == ("E_NOMEM", "width"), err
        assert "limits.max_frame_bytes" in err.message and "16384x16384" in err.message
        ok = c.open_session(width=7680, height=4320, pixel_format="yuv444p", bitdepth=10)
        assert isinstance(ok, SessionOpened), ok
        c.close_session(ok.session)
        c.close()
    finally:
        d.close()


def test_byte_budgets_per_client_and_for_the_daemon():
    geo = Geometry(64, 64, PixelFormat.YUV420P, 8)
    cost = frame_bytes(build_plan([], ["psnr"], Limits()), geo)
    d = Daemon("--limit", f"max_bytes_in_flight_per_client={cost * 3 // 2}",
               "--limit", f"max_bytes_in_flight_total={cost * 5 // 2}", fence_timeout_ms=1500)
    fences = []
    try:
        clients = []
        for _ in range(3):
            c = RawClient(d.socket)
            c.hello()
            r, t = frame_memfd(_picture(100)), frame_memfd(_picture(110))
            s = c.open_ok(width=64, height=64, features=["psnr"]).session
            clients.append((c, s, c.register_ok(r), c.register_ok(t)))
        a, b, third = clients

        def hold(client) -> None:  # a frame in flight until its fence times out
            fences.append(os.eventfd(0))
            client[0].submit(client[1], 0, client[2], client[3], ref_fence=fences[-1])

        def handled(client) -> None:  # a round trip: what the client sent before has been handled
            assert isinstance(client[0].request(Status(seq=client[0].conn.next_seq())), StatusReply)

        # (Outcomes come in each session's order: a's frame 1 is answered after its frame 0.)
        hold(a)
        a[0].submit(a[1], 1, a[2], a[3])
        handled(a)
        hold(b)
        handled(b)
        third[0].submit(third[1], 0, third[2], third[3])
        over_total = third[0].outcome(third[1], 0)
        over_client = a[0].outcome(a[1], 1)
        assert isinstance(over_client, FrameError) and (over_client.code, over_client.field) == ("E_NOMEM", "index")
        assert "limits.max_bytes_in_flight_per_client" in over_client.message
        assert isinstance(over_total, FrameError) and "limits.max_bytes_in_flight_total" in over_total.message
        assert a[0].outcome(a[1], 0).code == "E_TIMEOUT"  # the held frames end; the budget comes back
        assert b[0].outcome(b[1], 0).code == "E_TIMEOUT"
        third[0].submit(third[1], 1, third[2], third[3])
        res = third[0].outcome(third[1], 1)
        assert isinstance(res, Result) and res.metrics["psnr_y"] == pytest.approx(28.1308, abs=1e-3)
        for c, s, *_ in clients:
            c.close_session(s)
            c.close()
    finally:
        for f in fences:
            os.close(f)
        d.close()


def test_the_emulated_gpu_lane_budgets_its_device_memory():
    from vmafxd.lanes import LaneUnavailable, create_lane
    from vmafxd.lanes.device import LaneServices

    try:
        lane = create_lane("emu", type("C", (), {"gpu_batch": 2})(), LaneServices())
    except LaneUnavailable as e:
        pytest.skip(f"no emulator: {e}")
    dev = lane.devices[0]
    before = lane.memory_budget()
    assert before == int((dev.info.total_memory - dev.allocated_bytes) * lane.DEVICE_BUDGET_FRACTION)
    ptr = dev.alloc(1 << 30)  # np.zeros: pages are not touched
    try:
        assert before - lane.memory_budget() == pytest.approx(0.8 * (1 << 30), rel=1e-3)
    finally:
        dev.free(ptr)
    # With every configured limit out of the way, the device's own budget refuses a 16384x16384 frame.
    unbounded = Limits(max_frame_bytes=1 << 50, max_bytes_in_flight_per_client=1 << 50,
                       max_bytes_in_flight_total=1 << 50)
    adm = Admission(unbounded, lane.memory_budget())
    assert adm.bytes_total_limit == lane.memory_budget() < unbounded.max_bytes_in_flight_total
    plan = build_plan(["version=vmaf_v0.6.1"], ["psnr"], Limits())  # 56 bytes per pixel: 15 GB at 16384^2
    assert lane.scoring_bytes(plan, HUGE) > adm.bytes_total_limit
    with pytest.raises(Exception) as ei:
        adm.check_frame_cost(lane.scoring_bytes(plan, HUGE), "16384x16384")
    assert ei.value.code is ErrorCode.E_NOMEM and "the lane's memory budget" in ei.value.message
    adm.check_frame_cost(lane.scoring_bytes(plan, UHD8K_444_10), "8K")
    # a frame waiting in the queue holds its pictures only (the working set is per batch)
    assert lane.frame_bytes(plan, HUGE) == batched_frame_bytes(HUGE) < lane.scoring_bytes(plan, HUGE)


def test_fd_needs_follow_the_limits_and_a_low_hard_limit_refuses_to_start():
    lim = Limits()
    assert fd_needs(lim) == (lim.max_clients * (1 + lim.max_fds_per_message) + lim.max_buffers_total * FDS_PER_BUFFER
                             + lim.max_frames_in_flight_total * FDS_PER_FRAME + MAX_FILE_JOBS * FDS_PER_FILE_JOB
                             + FD_RESERVE)
    small = Limits(max_clients=4, max_buffers_per_client=8, max_frames_in_flight=4)
    assert fd_needs(small) == (4 * 9 + 32 * FDS_PER_BUFFER + 16 * FDS_PER_FRAME + MAX_FILE_JOBS * FDS_PER_FILE_JOB
                               + FD_RESERVE)

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'client'}")
    out = subprocess.run([sys.executable, "-m", "vmafxd", "--lane", "cpu", "--socket", "/nonexistent/x.sock"],
                         capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT), preexec_fn=low)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "RLIMIT_NOFILE's hard limit is 300" in lines[0] and "max_clients=256" in lines[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="lowering another process's fd limit needs root")
def test_out_of_fds_is_e_nofd_on_accept_and_on_receive():
    d = Daemon()
    try:
        a = RawClient(d.socket)
        a.hello()
        fds = d.fds()
        soft, hard = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
        limit = max(fds) + 1
        if limit - len(fds) >= 4:
            pytest.skip("the daemon's fd numbers have gaps; cannot make it run out")
        resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (limit, hard))
        try:
            # accept() fails with EMFILE: the spare fd takes the client, which is told so.
            b = RawClient(d.socket)
            err = b.recv(timeout=10)
            assert isinstance(err, Error) and (err.code, err.field) == ("E_NOFD", "connection"), err
            b.close()
            # A packet whose fds cannot be received: E_NOFD naming fds, and the connection stays.
            memfds = [frame_memfd(_picture(1)) for _ in range(8)]
            buf = memfds[0]
            msg = RegisterBuffer(seq=a.conn.next_seq(), kind="memfd", width=64, height=64, pixel_format="yuv420p",
                                 bitdepth=8, size=buf.size, planes=buf.planes, fds=(buf.fd,))
            a.send_raw(a.conn.send(msg)[0], [m.fd for m in memfds])
            err = a.wait_for(lambda m: isinstance(m, Error), 10)
            assert (err.re, err.code, err.field) == (msg.seq, "E_NOFD", "fds"), err
            assert "out of file descriptors" in err.message
            for m in memfds:
                m.close()
        finally:
            resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (soft, hard))
        reply = a.request(Status(seq=a.conn.next_seq()))
        assert isinstance(reply, StatusReply) and reply.status["clients"] == 1
        a.close()
        assert d.wait_fds() == d.baseline
    finally:
        d.close()
