"""SIGTERM: in-flight frames finish (or fail with E_SHUTDOWN at the deadline), goodbye, exit 0."""

import os
import signal

from vmafx.protocol import FrameError, Goodbye, Result, SessionClosed
from vmafx.transport import TransportClosed

from .rawclient import RawClient, frame_memfd


def _until_closed(c: RawClient) -> list:
    out = []
    try:
        while True:
            out.append(c.recv(timeout=30))
    except TransportClosed:
        return out


def test_sigterm_lets_in_flight_frames_finish(fresh_daemon, p01):
    _, refs, dists = p01
    d = fresh_daemon(workers=1)
    c = RawClient(d.socket)
    c.hello()
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(4)]
    ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
    s = c.open_ok().session  # full VMAF: tens of ms a frame on one worker
    n = 10
    for i in range(n):
        c.submit(s, i, *ids[i % 4])
    c.recv(timeout=10)  # the first releases are coming: frames are in flight now
    d.proc.send_signal(signal.SIGTERM)
    msgs = _until_closed(c)
    kinds = [type(m) for m in msgs]
    # every frame answered with a score, the session closed, then goodbye
    assert sorted(i for (ss, i), m in c.outcomes.items() if ss == s and isinstance(m, Result)) == list(range(n))
    closed = [m for m in msgs if isinstance(m, SessionClosed)]
    assert len(closed) == 1 and closed[0].re is None and closed[0].frames == n
    assert kinds.index(SessionClosed) < kinds.index(Goodbye) == len(kinds) - 1
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    assert d.proc.wait(30) == 0, d.log()[-3000:]
    c.close()
    for r, dd in bufs:
        r.close()
        dd.close()


def test_frames_still_waiting_at_the_deadline_fail_with_e_shutdown(fresh_daemon, p01):
    _, refs, dists = p01
    d = fresh_daemon("--shutdown-timeout", "0.3", fence_timeout_ms=20000)
    c = RawClient(d.socket)
    c.hello()
    r, dd = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(r), c.register_ok(dd)
    s = c.open_ok(features=["psnr"]).session
    c.submit(s, 0, rid, did)
    assert isinstance(c.outcome(s, 0), Result)
    never = os.eventfd(0)
    c.submit(s, 1, rid, did, ref_fence=never)  # stuck in the fence wait
    c.submit(s, 2, rid, did)  # behind it
    d.proc.send_signal(signal.SIGTERM)
    msgs = _until_closed(c)
    for i in (1, 2):
        out = c.outcomes[(s, i)]
        assert isinstance(out, FrameError) and out.code == "E_SHUTDOWN", out
    assert isinstance(msgs[-1], Goodbye)
    # they never reached a worker, so they were released before goodbye
    assert c.conn.ledger.unreleased() == 0
    assert d.proc.wait(30) == 0, d.log()[-3000:]
    os.close(never)
    c.close()
    r.close()
    dd.close()
