"""Client churn: forked clients SIGKILLed mid-session leave nothing behind in the daemon."""

from .conftest import scaled
from .fuzz import health
from .trials import Daemon, churn, wait_clean

CLIENTS = scaled(60)


def test_clients_killed_mid_session_leave_fds_and_status_clean():
    d = Daemon(workers=1)
    try:
        churn(d.socket, 3, seed=99)  # warm up: workers and trio's thread cache are made once
        wait_clean(d)
        base = d.wait_settled()
        before = health(d.pid)
        killed = churn(d.socket, CLIENTS, seed=1)
        assert killed == CLIENTS  # every client was alive (mid-session) when it was killed
        st = wait_clean(d)
        assert st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0, st
        assert st["frames_in_flight"] == 0 and st["pending_releases"] == 0, st
        assert d.wait_fds(base) == base
        after = health(d.pid)
        # trio's thread cache keeps an idle thread ~10 s; a leak would grow with the clients
        assert after.threads <= before.threads + 2, (before, after)
        assert d.proc.poll() is None and "Traceback" not in d.log()
        assert d.stop() == 0
    finally:
        d.close()
