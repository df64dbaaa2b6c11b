"""A private vmafxd for one process: started on a socket in a fresh directory, stopped afterwards.

``vmafxctl score`` uses one when no daemon answers (and the client library
offers it to anyone who wants a daemon without installing the service)::

    with PrivateDaemon(lane="cpu") as socket_path:
        with BlockingClient.connect(socket_path) as client:
            ...

Readiness is the daemon's own word, not a poll of the socket path: it gets
the write end of a pipe as ``--ready-fd N`` and writes ``READY\\n`` once it
listens.  EOF on the pipe before that means it died (its log -- kept in the
private directory -- says why).  Stopping is SIGTERM, which drains the
frames in flight and exits 0, then a bounded wait, then SIGKILL.  The
private directory (socket, log) is removed either way.

The daemon runs in its own session, so a Ctrl-C at the terminal reaches only
us and we stop it in order; and it gets ``PR_SET_PDEATHSIG``, so it does not
outlive us if we are killed outright.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Mapping, Sequence

__all__ = ["PrivateDaemon", "PrivateDaemonError"]

_PR_SET_PDEATHSIG = 1


class PrivateDaemonError(RuntimeError):
    """The private daemon did not start (or did not stop); the message carries its log's tail.

    ``summary`` is what happened, on one line; ``log`` the log's tail (for ``describe``'s one line, its
    last line is enough).
    """

    def __init__(self, summary: str, log: str = ""):
        self.summary = summary
        self.log = log
        super().__init__(summary + (f"; its log ends:\n{log}" if log else ""))


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass  # best effort: stop() still stops it on every ordinary path


class PrivateDaemon:
    def __init__(self, lane: str = "auto", *, extra_args: Sequence[str] = (), ready_timeout: float = 60.0,
                 stop_timeout: float = 30.0, python: str | None = None, environment: Mapping[str, str] | None = None):
        self.lane = lane
        self.extra_args = list(extra_args)
        #: variables added to (or, with value None, removed from) the daemon's environment
        self.environment = dict(environment or {})
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.python = python or sys.executable
        self.directory: str | None = None
        self.socket_path: str | None = None
        self.process: subprocess.Popen | None = None
        self.returncode: int | None = None
        #: the log's tail when the daemon exited non-zero (the directory holding it is gone)
        self.final_log: str = ""
        self._terminated = False
        self._ready_fd = -1

    @property
    def log_path(self) -> str | None:
        return os.path.join(self.directory, "vmafxd.log") if self.directory else None

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path or "", encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:]).rstrip()
        except OSError:
            return ""

    def start(self) -> str:
        """Start the daemon and wait until it listens; returns its socket path."""
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the daemon without waiting for it: the caller does other work (opens its
        inputs, reads its models) while the daemon imports, then calls :meth:`wait_ready`.
        Most of a start is the daemon's imports (numpy, trio, the lane), so overlapping them
        is what keeps a private run from waiting on it (scripts/bench_private_start.py)."""
        if self.process is not None:
            raise RuntimeError("already started")
        self.directory = tempfile.mkdtemp(prefix="vmafxd-private-")
        self.socket_path = os.path.join(self.directory, "vmafxd.sock")
        env = dict(os.environ)
        # A NOTIFY_SOCKET or LISTEN_FDS meant for us must not make the private daemon talk to systemd.
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            env.pop(k, None)
        for k, v in self.environment.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        self._ready_fd = read_end
        try:
            with open(self.log_path, "wb") as log:  # type: ignore[arg-type]
                self.process = subprocess.Popen(
                    [self.python, "-m", "vmafxd", "--socket", self.socket_path, "--lane", self.lane,
                     "--ready-fd", str(write_end), *self.extra_args],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(write_end,), start_new_session=True, preexec_fn=_die_with_parent, env=env,
                )
        except BaseException:
            os.close(read_end)
            self._ready_fd = -1
            self.stop()
            raise
        finally:
            # Our copy of the write end must go, or EOF (the daemon died) could never be seen.
            os.close(write_end)

    def wait_ready(self) -> str:
        """Wait until the launched daemon listens; returns its socket path (stops it on failure)."""
        fd, self._ready_fd = self._ready_fd, -1
        if fd < 0:
            raise RuntimeError("launch() first")
        try:
            self._wait_ready(fd)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(fd)
        assert self.socket_path is not None
        return self.socket_path

    def _wait_ready(self, fd: int) -> None:
        deadline = time.monotonic() + self.ready_timeout
        got = b""
        while b"\n" not in got:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PrivateDaemonError(f"vmafxd did not become ready within {self.ready_timeout:.0f} s",
                                         self.log_tail())
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                continue
            chunk = os.read(fd, 64)
            if not chunk:
                assert self.process is not None
                try:
                    rc = self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    rc = None
                raise PrivateDaemonError(f"vmafxd exited before it was ready (exit status {rc})", self.log_tail())
            got += chunk
        if not got.startswith(b"READY"):
            raise PrivateDaemonError(f"vmafxd wrote {got!r} on its ready fd, not READY", self.log_tail())

    def terminate(self) -> None:
        """Send SIGTERM once: the daemon drains its frames in flight and exits 0.

        Only once: a second SIGTERM tells vmafxd to stop at once (exit 1).
        """
        if self.process is not None and not self._terminated and self.process.poll() is None:
            self._terminated = True
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> int | None:
        """SIGTERM (unless :meth:`terminate` sent it), a bounded wait (then SIGKILL), remove the
        private directory.  Safe twice.  Returns the daemon's exit status (0 after a clean drain).
        """
        self.terminate()
        proc, self.process = self.process, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.returncode = proc.returncode
            if self.returncode:
                self.final_log = self.log_tail()
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        return self.returncode

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
