"""The ordering rule: every ``released`` of a session's frames goes out before its ``session_closed``.

A producer reads ``session_closed`` as "no buffer of this session is held".
The daemon guarantees it where ``session_closed`` is sent (the session's
outbox waits for every pending release, tests/daemon/test_session.py shows a
lane whose events complete late); here the whole daemon is checked under
load: several clients, several sessions each sharing buffers, frames that
score (motion lags), frames refused at once, frames failed by a fence
timeout, the close pipelined right behind the submits -- repeated.
"""

import os
import threading

from vmafx.protocol import CloseSession, FrameError, Released, Result, SessionClosed

from .rawclient import RawClient, frame_memfd


def _one_client(path, p01, rounds: int, problems: list, k: int) -> None:
    _, refs, dists = p01
    c = RawClient(path, f"order{k}")
    c.hello()
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(6)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    fences = []
    try:
        for rnd in range(rounds):
            # full VMAF (motion's lag keeps results behind releases) and cheap psnr sessions
            sessions = [c.open_ok(**({} if j == 0 else {"features": ["psnr"]})).session for j in range(4)]
            n = 24
            for i in range(n):
                for j, s in enumerate(sessions):
                    if i % 9 == 4 and j == 1:
                        c.submit(s, i, ids[0][0], 4242)  # unknown buffer: refused, released at once
                    elif i % 11 == 7 and j == 2:
                        never = os.eventfd(0)
                        fences.append(never)
                        c.submit(s, i, *ids[i % 6], dist_fence=never)  # fence timeout: released unread
                    else:
                        c.submit(s, i, *ids[i % 6])
            for s in sessions:  # pipelined right behind the submits
                c.send(CloseSession(seq=c.conn.next_seq(), session=s))
            closed: set[int] = set()
            while len(closed) < len(sessions):
                m = c.recv(timeout=60)
                if isinstance(m, SessionClosed):
                    closed.add(m.session)
                    # everything of that session is answered and released by now
                    left = [key for key in c.conn.ledger.frames if key[0] == m.session]
                    if left:
                        problems.append(f"round {rnd}: session {m.session} closed with {len(left)} frames "
                                        f"not released: {left[:4]}")
                elif isinstance(m, (Released, Result, FrameError)) and m.session in closed:
                    problems.append(f"round {rnd}: {m} after session_closed of {m.session}")
            assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
            for fd in fences:
                os.close(fd)
            fences.clear()
    except BaseException as e:  # reported by the test, not lost in the thread
        problems.append(f"client {k}: {type(e).__name__}: {e}")
    finally:
        c.close()
        for fd in fences:
            os.close(fd)
        for r, d in bufs:
            r.close()
            d.close()


def test_every_released_goes_out_before_its_session_closed_under_load(fresh_daemon, p01):
    d = fresh_daemon(workers=2, fence_timeout_ms=20)
    problems: list[str] = []
    threads = [threading.Thread(target=_one_client, args=(d.socket, p01, 3, problems, k)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert problems == []
    assert d.wait_fds() == d.baseline
    assert "unreleased" not in d.log()
