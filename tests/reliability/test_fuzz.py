"""The protocol fuzzer against a live CPU-lane daemon: no crash, fds/threads back at baseline, RSS bounded.

Bounded for CI (``VMAFX_RELIABILITY_SCALE`` scales the examples); scripts/soak.py
runs it for minutes.  After each example the daemon must still answer a
status request; after all of them its fds and threads are back at their
baseline and its RSS within 10 % (+16 MB) of a warmed-up baseline.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings

from vmafx.protocol import Hello, Status, StatusReply

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient
from .conftest import SCALE, scaled
from .fuzz import health, play, sequences

EXAMPLES = scaled(150)
SCALE_SECONDS = SCALE


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    yield d
    alive = d.proc.poll() is None
    rc = d.stop() if alive else d.proc.returncode
    log = d.log()
    d.close()
    assert alive and rc == 0, log[-3000:]


def _status(path: str) -> dict:
    c = RawClient(path, "fuzz-check")
    try:
        c.hello()
        reply = c.request(Status(seq=c.conn.next_seq()))
        assert isinstance(reply, StatusReply)
        return dict(reply.status)
    finally:
        c.close()


def _settled(d: Daemon, want, timeout: float = 10.0):
    end = time.monotonic() + timeout
    h = health(d.pid)
    while not want(h) and time.monotonic() < end:
        time.sleep(0.05)
        h = health(d.pid)
    return h


def test_fuzzed_conversations_leave_the_daemon_as_it_was(daemon):
    # warm up: the first conversations load code paths and allocator arenas
    from hypothesis import find  # noqa: F401  (hypothesis is importable: the suite needs it)

    _status(daemon.socket)
    base = _settled(daemon, lambda h: h.fds == daemon.baseline)
    counts = {"sent": 0, "read": 0, "examples": 0}

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(sequences())
    def one(seq):
        sent, got = play(daemon.socket, seq)
        counts["sent"] += sent
        counts["read"] += got
        counts["examples"] += 1
        assert daemon.proc.poll() is None, daemon.log()[-3000:]

    one()
    assert counts["sent"] > EXAMPLES  # it did send, and more than one packet a conversation
    st = _status(daemon.socket)
    assert st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0, st
    after = _settled(daemon, lambda h: h.fds == base.fds and h.threads <= base.threads)
    assert after.fds == base.fds, (base, after)
    assert after.threads <= base.threads, (base, after)
    assert after.rss_kb <= base.rss_kb * 1.10 + 16 * 1024, (base, after)
    assert "Traceback" not in daemon.log()


def test_a_flood_of_mutated_packets_leaves_the_daemon_as_it_was(daemon):
    """scripts/soak.py's fuzzer (fuzz_flood.py), briefly: many packets per connection, written
    without waiting, from two processes; the daemon survives, and its fds, threads and status
    come back."""
    from .fuzz_flood import run_fuzzers
    from .trials import wait_clean

    _status(daemon.socket)
    base = _settled(daemon, lambda h: h.fds == daemon.baseline)
    counts = run_fuzzers(daemon.socket, 2.0 * SCALE_SECONDS, 2, seed=5)
    assert counts["errors"] == []
    # both kinds of packet were made, and a connection carried many of them
    assert counts["pool_live"] > 0 and counts["pool_fatal"] > 0
    assert counts["sent"] > 3 * counts["connections"] > 0, counts
    # most of them the daemon is known to have handled (each run ends with a status request answered)
    assert counts["sent"] >= counts["handled"] > counts["sent"] // 2, counts
    assert daemon.proc.poll() is None, daemon.log()[-3000:]
    st = wait_clean(daemon)  # the last connections' teardowns may still be under way
    assert st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0, st
    after = _settled(daemon, lambda h: h.fds == base.fds and h.threads <= base.threads)
    assert after.fds == base.fds and after.threads <= base.threads, (base, after)
    assert "Traceback" not in daemon.log()
