"""The reliability trials, shared by tests/reliability (a few, in CI) and scripts/soak.py (many).

Each function runs one trial against a live CPU-lane daemon (tests/daemon/conftest.Daemon)
and returns what it measured; the callers assert or tabulate.  Frames are tiny (16x16,
psnr only) so a trial costs the daemon's start and little else.
"""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import time
from dataclasses import dataclass

import numpy as np

from vmafx.formats import Subsampling
from vmafx.protocol import Error, FrameError, Goodbye, Result
from vmafx.protocol.codec import encode
from vmafx.protocol import Hello, Status
from vmafx.transport import TransportClosed
from vmafxd.core.picture import Picture

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient, frame_memfd

TINY = 16


def tiny_picture(seed: int) -> Picture:
    rng = np.random.default_rng(seed)
    planes = (rng.integers(0, 256, (TINY, TINY), dtype=np.uint8),
              rng.integers(0, 256, (TINY // 2, TINY // 2), dtype=np.uint8),
              rng.integers(0, 256, (TINY // 2, TINY // 2), dtype=np.uint8))
    return Picture(planes, 8, Subsampling.S420)


def open_tiny(c: RawClient):
    """Register a ref/dist pair of tiny frames and open a psnr session: (session, ref id, dist id, buffers)."""
    c.hello()
    bufs = (frame_memfd(tiny_picture(1)), frame_memfd(tiny_picture(2)))
    rid, did = c.register_ok(bufs[0]), c.register_ok(bufs[1])
    s = c.open_ok(width=TINY, height=TINY, features=["psnr"], models=[]).session
    return s, rid, did, bufs


@dataclass
class SigtermTrial:
    submitted: int
    answered_once: int
    results: int
    shutdown_errors: int
    unanswered: int
    unreleased: int
    goodbye: bool
    exit_status: int | None


def sigterm_trial(seed: int, *, sigterm_after: int | None = None, extra_after: int = 200,
                  timeout: float = 20.0) -> SigtermTrial:
    """Submit before and during SIGTERM until goodbye; count the answers.

    The client submits as fast as the socket takes them (never more than the
    daemon's in-flight limit ahead of its answers), reading whatever arrives;
    the daemon gets SIGTERM after ``sigterm_after`` submits (random when None)
    and the client goes on submitting until it reads ``goodbye`` (at most
    ``extra_after`` more), then stops sending, reads until every frame is
    answered and released or the daemon closes, and closes.  The client's
    ledger (vmafx.protocol.ClientFrameLedger) raises on a second outcome or
    release, so ``answered_once`` counts frames with exactly one.
    """
    rng = random.Random(seed)
    d = Daemon("--shutdown-timeout", "2", workers=1)
    bufs = ()
    try:
        c = RawClient(d.socket)
        s, rid, did, bufs = open_tiny(c)
        limit = c.conn.limits.max_frames_in_flight
        term_at = rng.randint(0, 40) if sigterm_after is None else sigterm_after
        n = 0
        goodbye = False
        sent_after = 0
        termed = False
        end = time.monotonic() + timeout
        while time.monotonic() < end and not goodbye:
            if not termed and n >= term_at:
                os.kill(d.pid, signal.SIGTERM)
                termed = True
            if termed and sent_after >= extra_after:
                break
            if len(c.conn.ledger.unanswered()) < limit:
                try:
                    c.submit(s, n, rid, did)
                except TransportClosed:
                    c.conn.ledger.frames.pop((s, n), None)  # it did not leave
                    break
                n += 1
                if termed:
                    sent_after += 1
            try:
                while True:
                    m = c.recv(timeout=0.0005 if not termed else 0.0001)
                    if isinstance(m, Goodbye):
                        goodbye = True
                        break
            except (socket.timeout, TimeoutError, BlockingIOError):
                pass
            except TransportClosed:
                break
        # Nothing more is sent: collect what is owed, then close (the daemon waits for our end).
        try:
            while (c.conn.ledger.unanswered() or c.conn.ledger.unreleased()) and time.monotonic() < end:
                m = c.recv(timeout=max(0.01, end - time.monotonic()))
                goodbye = goodbye or isinstance(m, Goodbye)
        except (TransportClosed, socket.timeout, TimeoutError):
            pass
        while c._unread:  # messages of the last bundle the ledger applied but we did not take yet
            c._recv(0)
        unanswered = len(c.conn.ledger.unanswered())
        unreleased = c.conn.ledger.unreleased()
        outs = [m for (ss, _), m in c.outcomes.items() if ss == s]
        c.close()
        try:
            rc = d.proc.wait(timeout)
        except Exception:
            rc = None
        return SigtermTrial(n, len(outs), sum(isinstance(m, Result) for m in outs),
                            sum(isinstance(m, FrameError) and m.code == "E_SHUTDOWN" for m in outs),
                            unanswered, unreleased, goodbye, rc)
    finally:
        for b in bufs:
            b.close()
        d.close()


# --------------------------------------------------------------------------- churn


def _churn_child(path: str, seed: int, ready: int) -> None:
    """In a forked child: a client that scores tiny frames until it is killed.

    Writes one byte to ``ready`` once its session is open and its first frame
    submitted, so the parent kills it mid-session, not while it connects.
    """
    try:
        c = RawClient(path, f"churn{seed}")
        s, rid, did, _ = open_tiny(c)
        c.submit(s, 0, rid, did)
        os.write(ready, b"r")
        i = 1
        while True:
            if len(c.conn.ledger.unanswered()) < 8:
                c.submit(s, i, rid, did)
                i += 1
            try:
                c.recv(timeout=0.001)
            except (socket.timeout, TimeoutError):
                pass
    finally:
        os._exit(0)


@dataclass
class _Churner:
    pid: int
    ready: int  # read end of the child's ready pipe
    kill_at: float | None = None  # set once the child said it is mid-session
    give_up_at: float = 0.0


def churn(path: str, clients: int, *, seed: int = 0, parallel: int = 4, max_life_s: float = 0.05,
          start_timeout_s: float = 20.0) -> int:
    """Fork ``clients`` clients, ``parallel`` alive at a time, each SIGKILLed at a random moment of its session.

    A child says when its session is open and its first frame is submitted; it is killed
    0..``max_life_s`` later.  Returns how many were killed mid-session; a child that died
    on its own or never got that far (refused, too slow: ``start_timeout_s``) is not
    counted, which the callers see as a failed trial.  ``parallel`` stays below the
    daemon's ``max_clients_per_uid`` (32): every child is the caller's uid.
    """
    rng = random.Random(seed)
    killed = started = 0
    live: dict[int, _Churner] = {}
    while started < clients or live:
        while started < clients and len(live) < parallel:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _churn_child(path, started, w)
            os.close(w)
            live[r] = _Churner(pid, r, give_up_at=time.monotonic() + start_timeout_s)
            started += 1
        now = time.monotonic()
        waiting = [c.ready for c in live.values() if c.kill_at is None]
        due = min([c.kill_at for c in live.values() if c.kill_at is not None] +
                  [c.give_up_at for c in live.values() if c.kill_at is None])
        readable, _, _ = select.select(waiting, [], [], max(0.0, due - now)) if waiting else ([], [], [])
        if not waiting:
            time.sleep(max(0.0, due - now))
        now = time.monotonic()
        for fd in readable:
            c = live[fd]
            if os.read(fd, 1):
                c.kill_at = now + rng.uniform(0.0, max_life_s)
            else:  # end-of-file without the byte: the child is gone before its session ran
                c.give_up_at = -1.0
        for fd, c in list(live.items()):
            mid_session = c.kill_at is not None and now >= c.kill_at
            if mid_session or (c.kill_at is None and now >= c.give_up_at):
                done, _ = os.waitpid(c.pid, os.WNOHANG)
                if done == 0:
                    os.kill(c.pid, signal.SIGKILL)
                    os.waitpid(c.pid, 0)
                    killed += int(mid_session)
                os.close(fd)
                del live[fd]
    return killed


def status_of(path: str) -> dict:
    from vmafx.protocol import StatusReply

    c = RawClient(path, "status")
    try:
        c.hello()
        reply = c.request(Status(seq=c.conn.next_seq()))
        assert isinstance(reply, StatusReply)
        return dict(reply.status)
    finally:
        c.close()


def wait_clean(d: Daemon, timeout: float = 15.0) -> dict:
    """The daemon's status once only the asking client is left and nothing is held (or at the timeout)."""
    end = time.monotonic() + timeout
    while True:
        st = status_of(d.socket)
        clean = (st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0
                 and st["frames_in_flight"] == 0 and st["pending_releases"] == 0)
        if clean or time.monotonic() > end:
            return st
        time.sleep(0.05)
