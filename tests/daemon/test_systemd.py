"""systemd: sd_notify READY/STATUS/WATCHDOG/STOPPING, socket activation, journald logging."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from vmafx.protocol import Status
from vmafxd import systemd as sd

from .conftest import ROOT
from .rawclient import RawClient


def _notify_socket(abstract: bool = False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"vmafxd-test-{os.getpid()}-{time.monotonic_ns()}"
        s.bind("\0" + name)
        return s, "@" + name, None
    d = tempfile.mkdtemp(prefix="vxn", dir="/tmp")
    path = os.path.join(d, "notify")
    s.bind(path)
    return s, path, d


def _messages(s, until: str, timeout: float = 20.0) -> list[str]:
    out = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s.settimeout(max(0.01, end - time.monotonic()))
        try:
            out.append(s.recv(4096).decode())
        except socket.timeout:
            break
        if until in out[-1]:
            return out
    raise AssertionError(f"no {until!r} in {out}")


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_sd_notify_ready_status_watchdog_stopping(fresh_daemon, abstract):
    s, addr, d = _notify_socket(abstract)
    try:
        daemon = fresh_daemon(env={"NOTIFY_SOCKET": addr, "WATCHDOG_USEC": "200000"})
        first = _messages(s, "READY=1")
        ready = first[-1]
        assert "READY=1" in ready and "STATUS=serving 0 clients, 0 sessions, 0 frames scored" in ready
        assert f"MAINPID={daemon.pid}" in ready
        pings = _messages(s, "WATCHDOG=1")
        assert any("WATCHDOG=1" in m for m in pings)
        c = RawClient(daemon.socket)
        c.hello()
        status = _messages(s, "STATUS=serving 1 clients")
        assert status
        c.close()
        daemon.proc.send_signal(signal.SIGTERM)
        assert any("STOPPING=1" in m for m in _messages(s, "STOPPING=1"))
        assert daemon.proc.wait(20) == 0
    finally:
        s.close()
        if d:
            shutil.rmtree(d, ignore_errors=True)


def test_notifier_without_systemd_python():
    s, addr, d = _notify_socket(abstract=True)
    try:
        os.environ["NOTIFY_SOCKET"] = addr
        os.environ["WATCHDOG_USEC"] = "4000000"
        n = sd.Notifier(use_library=False)
        assert "NOTIFY_SOCKET" not in os.environ  # children must not notify for us
        assert n.watchdog_interval == 2.0
        assert n.notify("READY=1\nSTATUS=hi")
        s.settimeout(5)
        assert s.recv(100) == b"READY=1\nSTATUS=hi"
        n.status("same")
        n.status("same")  # unchanged status is not resent
        n.stopping()
        assert s.recv(100) == b"STATUS=same"
        assert s.recv(100).startswith(b"STOPPING=1")
    finally:
        os.environ.pop("NOTIFY_SOCKET", None)
        os.environ.pop("WATCHDOG_USEC", None)
        s.close()


def test_listen_fds_without_systemd_python():
    code = (
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        "os.dup2(s.fileno(), 3); os.dup2(s.fileno(), 4)\n"
        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='2', LISTEN_FDNAMES='other:vmafxd')\n"
        "from vmafxd.systemd import listen_fds\n"
        "print([(f.fd, f.name) for f in listen_fds(use_library=False)], 'LISTEN_FDS' in os.environ)\n"
        "os.environ.update(LISTEN_PID='1', LISTEN_FDS='1')\n"
        "print(listen_fds(use_library=False))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), check=True)
    assert out.stdout.splitlines() == ["[(3, 'other'), (4, 'vmafxd')] False", "[]"]


def test_logging_to_the_journal_stream_without_systemd_python(capfd):
    import logging

    st = os.fstat(2)
    os.environ["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    try:
        assert sd.setup_logging("info", use_library=False) == "stderr+priority"
        logging.getLogger("vmafxd.test").warning("careful")
        logging.getLogger("vmafxd.test").info("fine")
    finally:
        os.environ.pop("JOURNAL_STREAM", None)
        logging.getLogger().handlers.clear()
    err = capfd.readouterr().err
    assert "<4>vmafxd.test: careful" in err and "<6>vmafxd.test: fine" in err


ACTIVATE = shutil.which("systemd-socket-activate")


@pytest.mark.skipif(ACTIVATE is None, reason="systemd-socket-activate is not installed (Debian package systemd)")
def test_socket_activation(tmp_path):
    d = tempfile.mkdtemp(prefix="vxa", dir="/tmp")
    path = os.path.join(d, "activated.sock")
    unused = os.path.join(d, "not-used", "vmafxd.sock")
    log = open(os.path.join(d, "log"), "wb")
    proc = subprocess.Popen(
        [ACTIVATE, "--seqpacket", "-l", path, "--fdname=vmafxd",
         sys.executable, "-m", "vmafxd", "--lane", "cpu", "--cpu-workers", "1", "--socket", unused],
        cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(500):  # bound, then listening: retry until it accepts
            try:
                c = RawClient(path)  # the first connection makes systemd-socket-activate exec the daemon
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.02)
        assert c.hello().version == 1
        st = c.request(Status(seq=c.conn.next_seq())).status
        assert st["clients"] == 1 and st["lanes"][0]["lane"] == "cpu"
        c.close()
        assert not os.path.exists(unused)  # the passed socket was used, --socket ignored
        proc.send_signal(signal.SIGTERM)  # the daemon replaced systemd-socket-activate (exec)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        text = open(os.path.join(d, "log"), errors="replace").read()
        shutil.rmtree(d, ignore_errors=True)
    assert "using the socket systemd passed" in text, text
