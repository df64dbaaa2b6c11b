"""SIGTERM: in-flight frames finish (or fail with E_SHUTDOWN at the deadline), goodbye, exit 0."""

import os
import select
import signal

from vmafx.protocol import (
    CloseSession, Error, FrameError, Goodbye, RegisterBuffer, Released, Result, SessionClosed, Status, Submit,
)
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


def test_requests_still_queued_at_sigterm_are_read_and_answered(fresh_daemon, p01):
    """SIGTERM while the client's packets wait unread in the daemon's socket (sent while the daemon
    is stopped): every queued submit is answered in its session's order, before session_closed,
    with both releases; its fence fd is closed; close_session is answered by session_closed; other
    requests get E_SHUTDOWN right before goodbye."""
    _, refs, dists = p01
    d = fresh_daemon("--shutdown-timeout", "3", workers=1, fence_timeout_ms=20000)
    c = RawClient(d.socket)
    c.hello()
    r, dd = frame_memfd(refs[0]), frame_memfd(dists[0])
    extra = frame_memfd(refs[1])
    rid, did = c.register_ok(r), c.register_ok(dd)
    s = c.open_ok(features=["psnr"]).session
    stuck = c.open_ok(features=["psnr"]).session
    never = os.eventfd(0)
    c.submit(stuck, 0, rid, did, ref_fence=never)  # holds the daemon in its drain until the deadline
    n = 30
    pipe_r, pipe_w = os.pipe()
    os.kill(d.pid, signal.SIGSTOP)
    try:
        for i in range(n - 1):
            c.submit(s, i, rid, did)
        # the last frame's "fence" is a pipe: the drain does not look at it, only closes it
        c.submit(s, n - 1, rid, did, dist_fence=pipe_w)
        os.close(pipe_w)
        status_seq = c.conn.next_seq()
        c.send(Status(seq=status_seq))
        register = RegisterBuffer(seq=c.conn.next_seq(), kind="memfd", width=extra.width, height=extra.height,
                                  pixel_format=extra.pixel_format, bitdepth=extra.bitdepth, size=extra.size,
                                  planes=extra.planes, fds=(extra.fd,))
        c.send(register, register.fds)
        close_seq = c.conn.next_seq()
        c.send(CloseSession(seq=close_seq, session=s))
        d.proc.send_signal(signal.SIGTERM)
    finally:
        os.kill(d.pid, signal.SIGCONT)
    msgs = []
    try:
        while True:
            m = c.recv(timeout=30)
            msgs.append(m)
            if isinstance(m, FrameError) and (m.session, m.index) == (s, n - 1):
                # answered: the daemon has closed the fence fd it received (and is still running,
                # waiting for the stuck session until the deadline)
                assert select.select([pipe_r], [], [], 5)[0] and os.read(pipe_r, 1) == b""
                assert d.proc.poll() is None
    except TransportClosed:
        pass
    assert d.proc.wait(30) == 0, d.log()[-3000:]
    outs = [m for m in msgs if isinstance(m, (Result, FrameError)) and m.session == s]
    assert [m.index for m in outs] == list(range(n))  # one outcome each, in order
    refused = [m.index for m in outs if isinstance(m, FrameError)]
    assert all(m.code == "E_SHUTDOWN" for m in outs if isinstance(m, FrameError)), outs
    assert n - 1 in refused and len(refused) >= n // 2  # most were still queued when the drain began
    closed = [i for i, m in enumerate(msgs) if isinstance(m, SessionClosed)]
    assert len(closed) == 1 and msgs[closed[0]].re == close_seq and msgs[closed[0]].session == s
    assert (msgs[closed[0]].frames, msgs[closed[0]].failed) == (n - len(refused), len(refused))
    assert all(i < closed[0] for i, m in enumerate(msgs) if isinstance(m, Released) and m.session == s)
    # the stuck frame failed at the deadline and was released unread
    assert c.outcomes[(stuck, 0)].code == "E_SHUTDOWN"
    errors = [(i, m) for i, m in enumerate(msgs) if isinstance(m, Error)]
    assert [(m.re, m.code) for _, m in errors] == [(status_seq, "E_SHUTDOWN"), (register.seq, "E_SHUTDOWN")]
    assert closed[0] < errors[0][0] and errors[-1][0] == len(msgs) - 2 and isinstance(msgs[-1], Goodbye)
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    for fd in (never, pipe_r):
        os.close(fd)
    c.close()
    for b in (r, dd, extra):
        b.close()


def test_a_socket_full_of_submits_at_sigterm_is_answered_without_dropping_the_client(fresh_daemon, p01):
    """Each submit read in the drain is three packets out (frame_error, two released): more than the
    client's send queue holds, so the drain lets the sender catch up instead of overflowing it
    (which would drop the client as one that is not reading)."""
    _, refs, dists = p01
    d = fresh_daemon(workers=1)
    c = RawClient(d.socket)
    c.hello()
    r, dd = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(r), c.register_ok(dd)
    s = c.open_ok(features=["psnr"]).session
    os.kill(d.pid, signal.SIGSTOP)
    sent = 0
    try:
        for i in range(400):  # until the socket is full
            data, _ = c.conn.send(Submit(session=s, index=i, ref=rid, dist=did))
            if not c.chan.try_send(data):
                c.conn.ledger.frames.pop((s, i))  # not sent after all
                break
            sent += 1
        d.proc.send_signal(signal.SIGTERM)
    finally:
        os.kill(d.pid, signal.SIGCONT)
    bound = 4 * 64 + 64  # the daemon's send queue per client (ClientHandler.outgoing)
    assert 3 * sent > bound, f"only {sent} submits fit in the socket"
    msgs = _until_closed(c)
    assert d.proc.wait(30) == 0, d.log()[-3000:]
    assert "not reading" not in d.log()
    assert sorted(i for (ss, i) in c.outcomes if ss == s) == list(range(sent))
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    assert isinstance(msgs[-1], Goodbye)
    c.close()
    r.close()
    dd.close()


def test_a_stop_during_a_first_native_build_kills_the_compiler_and_does_not_wait_for_it(fresh_daemon, tmp_path):
    """A session's open builds the native kernels in a fresh cache (here a "compiler" that takes a
    minute); SIGTERM meanwhile: the daemon stops within seconds, the compiler and its children are
    gone, and the cache holds no temporary folder."""
    import time

    from vmafx.protocol import OpenSession

    children = tmp_path / "children"
    cxx = tmp_path / "slowcxx"
    cxx.write_text(f'#!/bin/sh\n[ "$1" = "--version" ] && {{ echo "slowcxx 1"; exit 0; }}\n'
                   f'sleep 60 &\necho $! >> {children}\nwait\n')
    cxx.chmod(0o755)
    cache = tmp_path / "cache"
    d = fresh_daemon("--cpu-engine", "auto", env={"CXX": str(cxx), "VMAFXD_KERNEL_CACHE": str(cache)})
    c = RawClient(d.socket, "first-build")
    try:
        c.hello()
        c.send(OpenSession(seq=c.conn.next_seq(), width=64, height=64, pixel_format="yuv420p", bitdepth=8,
                           features=("psnr",), models=()))
        deadline = time.monotonic() + 20
        while not (children.exists() and children.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children.exists(), "no build started:\n" + d.log()[-3000:]
        started = time.monotonic()
        rc = d.stop(timeout=30)
        took = time.monotonic() - started
    finally:
        c.close()
    assert rc == 0, d.log()[-3000:]
    assert took < 8, f"the daemon waited {took:.1f} s for the compiler"
    pids = [int(p) for p in children.read_text().split()]
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), "a compiler outlived the daemon"
    leftovers = [p.name for p in (cache / "native").iterdir()] if (cache / "native").exists() else []
    assert leftovers == [], leftovers


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
