"""vmafxctl's daemon paths when the daemon fails: one line, a distinct exit status, no traceback, no file.

Each run scores two FIFOs through ``vmafxctl score --socket``: the test writes the
first frames, holds the rest back (so the run cannot end first), SIGKILLs or SIGTERMs
the daemon once the session is open (its debug log says so), then lets the rest through.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vmafx.exceptions import (
    EXIT_STATUS, DaemonLost, DaemonStopped, DaemonUnavailable, InvalidArgument, LimitReached, ProtocolViolation,
    describe,
)

from ..daemon.conftest import ROOT, Daemon
from .inputs import write_y4m


FRAMES = 600  # a clip's frames


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    return write_y4m(d / "ref.y4m", FRAMES, seed=1), write_y4m(d / "dist.y4m", FRAMES, seed=2)


def _held_back(clips, tmp_path: Path, first: int = 40) -> tuple[tuple[Path, Path], threading.Event]:
    """FIFOs carrying ``clips``: the header and ``first`` frames at once, the rest once the
    event is set (a reader gone meanwhile ends the writing)."""
    go = threading.Event()
    fifos = []
    for clip in clips:
        data = clip.read_bytes()
        head = data.index(b"\n") + 1
        cut = head + first * (len(data) - head) // FRAMES
        fifo = tmp_path / f"{clip.stem}.fifo"
        os.mkfifo(fifo)
        fifos.append(fifo)

        def feed(fifo=fifo, data=data, cut=cut):
            try:
                with open(fifo, "wb") as f:
                    f.write(data[:cut])
                    f.flush()
                    go.wait(60)
                    f.write(data[cut:])
            except BrokenPipeError:
                pass

        threading.Thread(target=feed, daemon=True).start()
    return (fifos[0], fifos[1]), go


def _score(socket_path: str, clips, out: Path) -> subprocess.Popen:
    ref, dist = clips
    return subprocess.Popen([sys.executable, "-m", "vmafx.cli", "score", "-r", str(ref), "-d", str(dist),
                             "--socket", socket_path, "-q", "-o", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_session(d: Daemon, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while "session 1 opened" not in d.log():
        assert time.monotonic() < end, d.log()[-2000:]
        time.sleep(0.02)
    time.sleep(0.3)  # frames in flight


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("sig,status,says", [
    (signal.SIGKILL, EXIT_STATUS["lost"], "went away without a goodbye"),
    (signal.SIGTERM, EXIT_STATUS["stopped"], "the daemon is stopping"),
])
def test_a_daemon_killed_or_stopped_mid_run_is_one_line(clips, tmp_path, sig, status, says):
    d = Daemon(workers=1)
    try:
        out = tmp_path / "scores.json"
        fifos, go = _held_back(clips, tmp_path)
        p = _score(d.socket, fifos, out)
        _wait_for_session(d)
        d.proc.send_signal(sig)
        if sig == signal.SIGTERM:
            assert d.proc.wait(30) == 0
        else:
            d.proc.wait(10)
        go.set()
        stdout, stderr = p.communicate(timeout=60)
        line = _one_line(stderr)
        assert p.returncode == status, stderr
        assert says in line and "run the command again" in line, line
        assert not out.exists() and stdout == ""
        # killed: its socket file stays; nothing listens: refused, said as such
        if sig == signal.SIGKILL:
            p = _score(d.socket, clips, out)
            _, stderr = p.communicate(timeout=60)
            line = _one_line(stderr)
            assert p.returncode == EXIT_STATUS["unavailable"] and "Connection refused" in line, line
    finally:
        d.close()


@pytest.mark.parametrize("sig,status,says", [
    (signal.SIGKILL, EXIT_STATUS["lost"], "went away without a goodbye"),
    (signal.SIGTERM, EXIT_STATUS["stopped"], "the daemon is stopping"),
])
def test_a_daemon_killed_or_stopped_while_it_reads_the_files_is_one_line(tmp_path, sig, status, says):
    """Regular files go to the daemon as open files (score_files): it reads and scores them on
    a worker thread; killed or stopped meanwhile, the command says so in one line."""
    ref = write_y4m(tmp_path / "ref.y4m", 300, 640, 360, seed=1)  # seconds of the CPU lane's work
    dist = write_y4m(tmp_path / "dist.y4m", 300, 640, 360, seed=2)
    d = Daemon(workers=1)
    try:
        out = tmp_path / "scores.json"
        p = _score(d.socket, (ref, dist), out)
        end = time.monotonic() + 30
        while "score_files 640x360" not in d.log():
            assert time.monotonic() < end and p.poll() is None, d.log()[-2000:]
            time.sleep(0.02)
        time.sleep(0.3)
        d.proc.send_signal(sig)
        assert d.proc.wait(30) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=60)
        line = _one_line(stderr)
        assert p.returncode == status, stderr
        assert says in line and "run the command again" in line, line
        assert not out.exists() and stdout == ""
    finally:
        d.close()


def test_no_daemon_at_the_socket_is_one_line(clips, tmp_path):
    p = _score(str(tmp_path / "absent.sock"), clips, tmp_path / "o.json")
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == EXIT_STATUS["unavailable"]
    assert "no daemon answers" in _one_line(stderr)


def test_describe_gives_one_line_and_a_distinct_status_per_failure():
    import errno

    cases = [
        DaemonUnavailable("/run/x.sock", OSError(errno.ECONNREFUSED, "Connection refused")),
        DaemonStopped("the daemon is shutting down"),
        DaemonLost("peer closed\nthe connection"),
        ProtocolViolation("E_PROTO", "index", "a second outcome"),
        LimitReached("E_NOMEM", "index", "64 frames in flight"),
        InvalidArgument("E_INVAL", "width", "0 is not a width"),
    ]
    got = [describe(e) for e in cases]
    assert all("\n" not in line for line, _ in got)
    assert [s for _, s in got] == [69, 75, 74, 76, 75, 1]
    # a trio nursery's group: the connection's own reason wins over the tasks' echoes of it
    group = ExceptionGroup("nursery", [ValueError("x"), ExceptionGroup("inner", [DaemonLost("gone")])])
    assert describe(group)[1] == EXIT_STATUS["lost"]
    assert describe(FileNotFoundError(2, "No such file or directory", "a.y4m")) == \
        ("cannot read a.y4m: No such file or directory", EXIT_STATUS["no_input"])


def _refusing_daemon(path: str, code: str) -> "threading.Thread":
    """A stand-in daemon that refuses every connection: an error before hello, our hello unread, close."""
    import threading

    from vmafx.protocol import Error
    from vmafx.protocol.codec import encode

    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.bind(path)
    lsock.listen(4)

    def serve():
        for _ in range(2):
            conn, _ = lsock.accept()
            with conn:
                time.sleep(0.05)  # the client's hello arrives and stays unread
                conn.send(encode(Error(code=code, field="", message="this user holds every connection it may "
                                                                     "(max_connections_per_uid)"))[0])
        lsock.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_a_refused_connection_raises_the_refusal_not_a_lost_daemon(tmp_path):
    import trio

    from vmafx.blocking import BlockingClient
    from vmafx.client import Client
    from vmafx.exceptions import Busy

    path = str(tmp_path / "refusing.sock")
    t = _refusing_daemon(path, "E_BUSY")
    with pytest.raises(Busy) as e:
        BlockingClient.connect(path, timeout=10)
    line, status = describe(e.value)
    assert "refused" in line and "max_connections_per_uid" in line and status == EXIT_STATUS["stopped"]

    async def main():
        await Client.connect(path)

    with pytest.raises(Busy):
        trio.run(main)
    t.join(5)
