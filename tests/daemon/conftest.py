"""A real daemon process for the tests: ``python -m vmafxd --socket ... --ready-fd N``."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..reference import vendored_pairs

ROOT = Path(__file__).resolve().parents[2]


class Daemon:
    def __init__(self, *args: str, env: dict | None = None, workers: int = 2, fence_timeout_ms: int = 300,
                 socket_path: str | None = None):
        self.dir = tempfile.mkdtemp(prefix="vx", dir="/tmp")  # AF_UNIX paths are short
        self.socket = socket_path or os.path.join(self.dir, "vmafxd.sock")
        self.log_path = os.path.join(self.dir, "vmafxd.log")
        r, w = os.pipe()
        cmd = [sys.executable, "-m", "vmafxd", "--socket", self.socket, "--lane", "cpu",
               "--cpu-workers", str(workers), "--fence-timeout-ms", str(fence_timeout_ms),
               "--log-level", "debug", "--ready-fd", str(w), *args]
        full_env = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
                  "VMAFXD_TEST_EARLY_RELEASE"):
            full_env.pop(k, None)
        full_env.update(env or {})
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, pass_fds=(w,), stdout=self._log, stderr=subprocess.STDOUT,
                                     env=full_env, cwd=str(ROOT))
        os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], 20)
            line = os.read(r, 64) if ready else b""
        finally:
            os.close(r)
        if line != b"READY\n":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the daemon did not get ready ({line!r}):\n{self.log()}")
        self.baseline = self.wait_settled()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        self._log.flush()
        return Path(self.log_path).read_text(errors="replace")

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def fds(self) -> dict[int, str]:
        out = {}
        for name in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                out[int(name)] = os.readlink(f"/proc/{self.pid}/fd/{name}")
            except OSError:
                pass
        return out

    def wait_settled(self, settle: float = 0.3, timeout: float = 10.0) -> int:
        """The fd count once it has not changed for ``settle`` seconds."""
        end = time.monotonic() + timeout
        last, since = self.fd_count(), time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.05)
            n = self.fd_count()
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= settle:
                return n
        return last

    def wait_fds(self, expected: int | None = None, timeout: float = 10.0) -> int:
        """Wait until the fd count is back to ``expected`` (default: the baseline); returns it."""
        expected = self.baseline if expected is None else expected
        end = time.monotonic() + timeout
        n = self.fd_count()
        while n != expected and time.monotonic() < end:
            time.sleep(0.05)
            n = self.fd_count()
        return n

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        alive = d.proc.poll() is None
        rc = d.stop() if alive else d.proc.returncode
        log = d.log()
        d.close()
        assert alive, f"the daemon died during the tests:\n{log[-4000:]}"
        assert rc == 0, f"the daemon exited with {rc}:\n{log[-4000:]}"


@pytest.fixture
def fresh_daemon():
    """A daemon of the test's own (for tests that stop it or change its environment)."""
    made = []

    def make(*args, **kw) -> Daemon:
        d = Daemon(*args, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


@pytest.fixture(scope="session")
def p01():
    pair = next(p for p in vendored_pairs() if p.id.startswith("p01"))
    refs, dists = pair.pictures()
    return pair, refs, dists
