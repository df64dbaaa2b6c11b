"""A GPU event handle the driver refuses is the client's error and fails only its own frame.

On the emulated GPU lane (``--lane emu``; VMAFXD_EMU_IPC_EVENTS=1 makes it take
``cuda_ipc_event`` fences and refuse, as CUDA does, a handle it did not issue).
Two clients submit while the daemon is stopped, so their frames are read and
batched together; one client's frames 2 and 4 carry a garbage handle.  That frame
gets ``E_INVAL`` naming ``ref_fence.handle``; every other frame -- its own batch
mates and the other client's -- scores, equal to the exact PSNR; the log has one
warning for the client (not one per frame) and no traceback.
"""

from __future__ import annotations

import math
import os
import signal

import numpy as np
import pytest

from vmafx.protocol import Fence, FrameError, Result, Submit

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient
from .trials import open_tiny, tiny_picture


#: the bad client's frames with a garbage handle: two, and still one warning in the log
BAD = (2, 4)


def _psnr_y() -> float:
    a = tiny_picture(1).luma.astype(np.float64)
    b = tiny_picture(2).luma.astype(np.float64)
    mse = np.mean((a - b) ** 2)
    return min(10 * math.log10(255.0 ** 2 / mse), 60.0)


@pytest.fixture(params=["in-process", "lane-process"])
def emu_daemon(request):
    """The lane in the daemon, and in a worker process (--lane-process: the handles cross to it)."""
    pytest.importorskip("vmafxd.lanes.emulated")
    try:
        from vmafxd.lanes.emulated import EmulatedRuntime
        EmulatedRuntime()
    except Exception as e:  # no g++: the emulator cannot run here
        pytest.skip(f"the emulated lane is not available: {e}")
    extra = ("--lane-process",) if request.param == "lane-process" else ()
    d = Daemon("--lane", "emu", "--gpu-batch", "8", *extra, workers=1, fence_timeout_ms=2000,
               env={"VMAFXD_EMU_IPC_EVENTS": "1"})
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        rc = d.stop() if alive else d.proc.returncode
        log = d.log()
        d.close()
        assert alive and rc == 0, log[-3000:]


def test_a_refused_event_handle_fails_only_its_frame(emu_daemon):
    from vmafxd.lanes.emulated import EMU_IPC_EVENT_PREFIX

    good = EMU_IPC_EVENT_PREFIX + bytes(64 - len(EMU_IPC_EVENT_PREFIX))
    clients = [RawClient(emu_daemon.socket, name) for name in ("bad-handles", "neighbour")]
    opened = [open_tiny(c) for c in clients]
    n = 6
    os.kill(emu_daemon.pid, signal.SIGSTOP)
    try:
        for i in range(n):
            for k, (c, (s, rid, did, _)) in enumerate(zip(clients, opened)):
                handle = bytes(range(64)) if (k == 0 and i in BAD) else good
                c.send(Submit(session=s, index=i, ref=rid, dist=did, ref_fence=Fence("cuda_ipc_event", handle=handle)))
    finally:
        os.kill(emu_daemon.pid, signal.SIGCONT)
    expected = _psnr_y()
    for k, (c, (s, _, _, bufs)) in enumerate(zip(clients, opened)):
        outs = [c.outcome(s, i, timeout=120) for i in range(n)]
        for i, out in enumerate(outs):
            if k == 0 and i in BAD:
                assert isinstance(out, FrameError) and out.code == "E_INVAL", out
                assert out.field == "ref_fence.handle" and "refused" in out.message, out
            else:
                assert isinstance(out, Result), (k, i, out)
                assert out.metrics["psnr_y"] == pytest.approx(expected, abs=1e-4)
        c.close_session(s)
        assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
        c.close()
        for b in bufs:
            b.close()
    log = emu_daemon.log()
    assert "Traceback" not in log and "E_INTERNAL" not in log
    assert log.count("the driver refused its ref_fence.handle") == 1 and "client bad-handles#" in log
