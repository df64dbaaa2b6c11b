"""vmafxd under systemd's protocols, without PID 1: socket activation and sd_notify.

``systemd-socket-activate --seqpacket -l PATH --fdname=vmafxd vmafxd --lane cpu``
listens on PATH the way vmafxd.socket does and starts the daemon on the first
connection with LISTEN_FDS/LISTEN_FDNAMES; the daemon must serve that socket
(and not create its own).  For sd_notify the test binds a datagram socket,
passes it as NOTIFY_SOCKET, and reads what a service manager would.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vmafx.blocking import BlockingClient
from vmafx.frames import memfd_buffer_from_planes
from vmafx.io.video import read_all

ROOT = Path(__file__).resolve().parents[2]
VMAFXD = Path(sys.executable).parent / "vmafxd"

pytestmark = [
    pytest.mark.skipif(shutil.which("systemd-socket-activate") is None,
                       reason="systemd-socket-activate is missing (Debian package 'systemd'; "
                              "scripts/bootstrap.sh test installs it)"),
    pytest.mark.skipif(importlib.util.find_spec("vmafxd.__main__") is None,
                       reason="the daemon (python -m vmafxd) is not in this tree yet"),
]

P13 = ROOT / "tests/data/clips"


def _score_one_frame(path: str) -> dict:
    _, refs = read_all(P13 / "src_astronaut_576x324.y4m.xz")
    _, dists = read_all(P13 / "dst_astronaut_576x324_unsharp.y4m.xz")
    with BlockingClient.connect(path, timeout=60) as client:
        session = client.open_session(width=576, height=324, features=["psnr"], lane="cpu", timeout=30)
        bufs = [memfd_buffer_from_planes(refs[0], "yuv420p", 8), memfd_buffer_from_planes(dists[0], "yuv420p", 8)]
        r, d = (client.register_buffer(b, timeout=30) for b in bufs)
        session.submit(0, r, d, timeout=30)
        summary = session.close(timeout=60)
        (result,) = list(session.results())
        status = client.status(timeout=30)
        for b in bufs:
            b.close()
    assert summary.frames == 1
    return {"result": result.metrics, "status": status}


def _activate(tmp_path: Path, setenv: dict | None = None) -> tuple[subprocess.Popen, str]:
    """Start the daemon the way vmafxd.socket would.

    systemd-socket-activate hands its child a clean environment (LISTEN_* and
    what -E names, nothing else), much as the service manager does.
    """
    path = str(tmp_path / "vmafxd.sock")
    extra = [f"--setenv={k}={v}" for k, v in (setenv or {}).items()]
    proc = subprocess.Popen(
        ["systemd-socket-activate", "--seqpacket", "-l", path, "--fdname=vmafxd", *extra, str(VMAFXD),
         "--lane", "cpu", "--socket", str(tmp_path / "not-this-one.sock")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"systemd-socket-activate did not listen:\n{proc.communicate()[0]}")
        time.sleep(0.02)
    return proc, path


def test_socket_activation_serves_a_client_on_the_passed_socket(tmp_path):
    proc, path = _activate(tmp_path)
    try:
        got = _score_one_frame(path)  # the first connection starts the daemon
        assert set(got["result"]) == {"psnr_y", "psnr_cb", "psnr_cr"}
        assert 20 < got["result"]["psnr_y"] < 60
        assert got["status"]["frames_scored"] == 1
        # it served the activated socket and did not make its own --socket
        assert not (tmp_path / "not-this-one.sock").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, out
    assert "using the socket systemd passed" in out


def test_sd_notify_ready_status_watchdog_and_stopping_reach_notify_socket(tmp_path):
    notify_path = str(tmp_path / "notify")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(notify_path)
    sink.settimeout(0.2)
    proc, path = _activate(tmp_path, {"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "400000"})
    messages: list[tuple[float, str]] = []

    def drain(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                messages.append((time.monotonic(), sink.recv(4096).decode()))
            except (socket.timeout, BlockingIOError):
                pass

    try:
        _score_one_frame(path)
        drain(1.5)
        ready_at = len(messages)
        proc.send_signal(signal.SIGTERM)
        drain(1.0)
        out = proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        sink.close()
    assert proc.returncode == 0, out
    fields = [line for _, m in messages for line in m.splitlines()]
    assert "READY=1" in fields
    assert any(f.startswith("MAINPID=") and int(f[8:]) == proc.pid for f in fields)
    assert any(f.startswith("STATUS=") for f in fields)
    # watchdog at half of WATCHDOG_USEC (0.4 s): several pings in the 1.5 s after scoring
    pings = [t for t, m in messages[:ready_at] if "WATCHDOG=1" in m.splitlines()]
    assert len(pings) >= 3, messages
    assert "STOPPING=1" in [line for _, m in messages[ready_at:] for line in m.splitlines()]
    # READY came before STOPPING
    kinds = [m.splitlines()[0] for _, m in messages]
    assert kinds.index("READY=1") < kinds.index("STOPPING=1")
