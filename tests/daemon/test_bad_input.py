"""The bad-input table, through a real daemon.

Each case checks the typed error code and the field it names, that a client
connected before the bad input is still served correctly afterwards, and that
the daemon's open-fd count returns to its baseline (nothing of the bad client
is left behind: fds, mappings, fences, sessions).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys

import msgpack
import pytest

from vmafx.protocol import (
    Error, Fence, FrameError, Hello, Plane, RegisterBuffer, Released, Result, Status, Submit,
)
from vmafx.protocol.codec import encode
from vmafx.transport import TransportClosed

from .conftest import ROOT
from .rawclient import RawClient, frame_memfd


def _expected_psnr(p01):
    from vmafx.protocol import Limits
    from vmafxd.core.scoring import CpuScorer
    from vmafxd.session import build_plan

    _, refs, dists = p01
    sc = CpuScorer(build_plan([], ["psnr"], Limits()), 576, 324, 8)
    sc.push(0, refs[0], dists[0])
    sc.finish()
    return dict(sc.assembler.frames)[0]


@pytest.fixture(scope="module")
def expected_psnr(p01):
    return _expected_psnr(p01)


class Bystander:
    """A client connected before the bad input; it must be served normally after it."""

    def __init__(self, daemon, p01, expected):
        _, refs, dists = p01
        self.daemon, self.expected = daemon, expected
        self.c = RawClient(daemon.socket, "bystander")
        self.c.hello()
        self.bufs = (frame_memfd(refs[0]), frame_memfd(dists[0]))

    def scores_correctly(self) -> None:
        c = self.c
        rid, did = c.register_ok(self.bufs[0]), c.register_ok(self.bufs[1])
        s = c.open_ok(features=["psnr"]).session
        c.submit(s, 0, rid, did)
        closed = c.close_session(s)
        assert closed.frames == 1
        assert c.outcomes[(s, 0)].metrics == self.expected
        c.unregister(rid)
        c.unregister(did)
        c.close()
        for b in self.bufs:
            b.close()


@pytest.fixture
def check(daemon, p01, expected_psnr):
    """Yields a fresh bad client; afterwards the bystander and the fd count are checked."""
    assert daemon.wait_fds() == daemon.baseline
    bystander = Bystander(daemon, p01, expected_psnr)
    bad = RawClient(daemon.socket, "bad")
    bad.hello()
    yield bad
    bad.close()
    bystander.scores_correctly()
    n = daemon.wait_fds()
    assert n == daemon.baseline, f"daemon fds {n} != baseline {daemon.baseline}: {daemon.fds()}"
    assert daemon.proc.poll() is None


def _fatal(c: RawClient, field: str) -> None:
    """E_PROTO naming ``field``, then the daemon closes the connection."""
    err = c.expect_error()
    assert (err.code, err.field) == ("E_PROTO", field), err
    with pytest.raises(TransportClosed):
        while True:
            c.chan.receive(timeout=5)


def _still_open(c: RawClient) -> None:
    assert "frames_scored" in c.request(Status(seq=c.conn.next_seq())).status


def _refused(reply, code: str, field: str, *words: str) -> None:
    assert isinstance(reply, Error), reply
    assert (reply.code, reply.field) == (code, field), reply
    for w in words:
        assert w in reply.message, reply.message


# ---------------------------------------------------------------- not the protocol (E_PROTO, connection closed)

def test_garbage_bytes(check):
    check.send_raw(b"\xc1\xc1 this is not msgpack")
    _fatal(check, "message")


def test_truncated_msgpack(check):
    data, _ = encode(Status(seq=7))
    check.send_raw(data[:-2])
    _fatal(check, "message")


def test_unknown_message_type(check):
    check.send_raw(msgpack.packb({"t": "frobnicate", "seq": 3}))
    _fatal(check, "t")


def test_oversized_message(check):
    check.send_raw(msgpack.packb({"t": "status", "seq": 1, "pad": "x" * 70000}))
    _fatal(check, "message")


def test_too_many_fds(check):
    fds = [os.eventfd(0) for _ in range(9)]  # the limit is 8: MSG_CTRUNC
    try:
        msg = RegisterBuffer(seq=5, kind="memfd", width=4, height=4, pixel_format="yuv400p", size=16,
                             planes=tuple(Plane(i, 0, 4) for i in range(1)), fds=(0,))
        check.send_raw(encode(msg)[0], fds)
        _fatal(check, "fds")
    finally:
        for fd in fds:
            os.close(fd)


def test_stray_fd_on_a_message_that_takes_none(check):
    fd = os.eventfd(0)
    try:
        check.send_raw(encode(Status(seq=9))[0], [fd])
        _fatal(check, "fds")
    finally:
        os.close(fd)


# ---------------------------------------------------------------- bad buffers (E_INVAL / E_NOTSUP, stays open)

def _register_fd(c: RawClient, fd: int, size: int = 576 * 324 * 3 // 2, **over):
    w, h = 576, 324
    planes = (Plane(0, 0, w), Plane(0, w * h, w // 2), Plane(0, w * h * 5 // 4, w // 2))
    kw = dict(seq=c.conn.next_seq(), kind="memfd", width=w, height=h, pixel_format="yuv420p", size=size,
              planes=planes, fds=(fd,))
    kw.update(over)
    msg = RegisterBuffer(**kw)
    return c.request(msg, msg.fds)


def test_buffer_that_is_a_regular_file(check, tmp_path):
    path = tmp_path / "frame.yuv"
    path.write_bytes(bytes(576 * 324 * 3 // 2))
    fd = os.open(path, os.O_RDONLY)
    try:
        _refused(_register_fd(check, fd), "E_INVAL", "planes[0].fd", "a regular file")
    finally:
        os.close(fd)
    _still_open(check)


def test_buffer_that_is_a_pipe(check):
    r, w = os.pipe()
    try:
        _refused(_register_fd(check, r), "E_INVAL", "planes[0].fd", "a pipe")
    finally:
        os.close(r)
        os.close(w)
    _still_open(check)


def test_buffer_that_is_a_socket(check):
    a, b = socket.socketpair()
    with a, b:
        _refused(_register_fd(check, a.fileno()), "E_INVAL", "planes[0].fd", "a socket")
    _still_open(check)


def test_unsealed_memfd(check, p01):
    buf = frame_memfd(p01[1][0], seal=False)
    try:
        _refused(check.register(buf), "E_INVAL", "planes[0].fd",
                 "memfd lacks F_SEAL_SHRINK: a client could shrink it under the daemon's mapping")
    finally:
        buf.close()
    _still_open(check)


def test_declared_size_larger_than_the_buffer(check, p01):
    buf = frame_memfd(p01[1][0])
    try:
        _refused(check.register(buf, size=buf.size + 4096), "E_INVAL", "size", str(buf.size))
    finally:
        buf.close()
    _still_open(check)


def test_plane_beyond_the_buffer(check, p01):
    buf = frame_memfd(p01[1][0])
    try:
        planes = (buf.planes[0], buf.planes[1], Plane(0, buf.size - 10, buf.planes[2].pitch))
        _refused(check.register(buf, planes=planes), "E_INVAL", "planes[2].offset", "beyond")
    finally:
        buf.close()
    _still_open(check)


@pytest.mark.parametrize("over, field", [
    (dict(width=0), "width"), (dict(height=0), "height"), (dict(width=16385), "width"),
    (dict(pixel_format="rgb565"), "pixel_format"), (dict(pixel_format="nv12", bitdepth=10), "bitdepth"),
])
def test_bad_geometry(check, p01, over, field):
    buf = frame_memfd(p01[1][0])
    try:
        _refused(check.register(buf, **over), "E_INVAL", field)
        _refused(check.open_session(**{"features": ["psnr"], **over}), "E_INVAL", field)
    finally:
        buf.close()
    _still_open(check)


def test_modifier_and_kind_the_cpu_lane_cannot_read(check, p01):
    buf = frame_memfd(p01[1][0])
    try:
        _refused(check.register(buf, modifier=0x0100000000000002), "E_NOTSUP", "modifier", "LINEAR")
        _refused(check.register(buf, kind="cuda_vmm", device=0), "E_NOTSUP", "kind")
    finally:
        buf.close()
    _still_open(check)


@pytest.mark.parametrize("kw, code, field", [
    (dict(models=["version=vmaf_v9"]), "E_INVAL", "models[0].version"),
    (dict(models=["version=vmaf_v0.6.1", "bogus"]), "E_INVAL", "models[1]"),
    (dict(models=["path=/etc/passwd"]), "E_NOTSUP", "models[0].path"),
    (dict(features=["psnr", "nonesuch"]), "E_INVAL", "features[1]"),
    (dict(features=["psnr=enable_chroma=maybe"]), "E_INVAL", "features[0].enable_chroma"),
    (dict(features=["psnr"], lane="cuda"), "E_NOTSUP", "lane"),
    (dict(features=["psnr"], device=7), "E_NOTSUP", "device"),
    (dict(features=["psnr"], width=8, height=8, models=["version=vmaf_v0.6.1"]), "E_INVAL", "width"),
])
def test_bad_sessions(check, kw, code, field):
    _refused(check.open_session(**kw), code, field)
    _still_open(check)


# ---------------------------------------------------------------- bad frames: one outcome, both releases

def _released_roles(c: RawClient, session: int, index: int) -> list[str]:
    """Wait (bounded) until both roles of the frame were released; return the roles seen."""
    import time

    end = time.monotonic() + 10
    while True:
        roles = sorted(m.role for m in c.released if (m.session, m.index) == (session, index))
        if len(roles) >= 2 or time.monotonic() > end:
            return roles
        try:
            c.wait_for(lambda m: isinstance(m, Released) and (m.session, m.index) == (session, index),
                       timeout=max(0.01, end - time.monotonic()))
        except TimeoutError:
            pass


def _frame_refused(c: RawClient, session: int, index: int, code: str, field: str) -> FrameError:
    out = c.outcome(session, index)
    assert isinstance(out, FrameError), out
    assert (out.code, out.field) == (code, field), out
    assert _released_roles(c, session, index) == ["dist", "ref"]
    return out


def _small(picture, n=16):
    planes = (picture.planes[0][:n, :n],) + tuple(p[: n // 2, : n // 2] for p in picture.planes[1:])
    return picture.__class__(planes, picture.bitdepth, picture.subsampling)


def test_bad_frames_each_get_one_error_and_both_releases(check, p01):
    _, refs, dists = p01
    c = check
    r, d = frame_memfd(refs[0]), frame_memfd(dists[0])
    other = frame_memfd(_small(refs[0]))
    try:
        rid, did, oid = c.register_ok(r), c.register_ok(d), c.register_ok(other)
        s = c.open_ok(features=["psnr"]).session
        c.submit(s + 1000, 0, rid, did)
        _frame_refused(c, s + 1000, 0, "E_NOENT", "session")
        c.submit(s, 0, rid, 9999)
        _frame_refused(c, s, 0, "E_NOENT", "dist")
        c.submit(s, 1, oid, did)
        assert "width 16 (session: 576)" in _frame_refused(c, s, 1, "E_INVAL", "ref").message
        c.submit(s, 5, rid, did)
        assert isinstance(c.outcome(s, 5), Result)
        assert _released_roles(c, s, 5) == ["dist", "ref"]  # frame 5 is done: our ledger allows index 5 again
        c.submit(s, 5, rid, did)
        out = c.wait_for(lambda m: isinstance(m, FrameError) and m.index == 5)
        assert (out.code, out.field) == ("E_STATE", "index")
        # GPU interprocess events are not for the CPU lane
        c.send(Submit(session=s, index=6, ref=rid, dist=did, ref_fence=Fence("cuda_ipc_event", handle=b"\0" * 64)))
        _frame_refused(c, s, 6, "E_NOTSUP", "ref_fence")
        # a memfd passed off as an eventfd fence
        fake = os.memfd_create("not-a-fence")
        c.send(Submit(session=s, index=7, ref=rid, dist=did, dist_fence=Fence("eventfd", fd=0), fds=(fake,)), [fake])
        os.close(fake)
        _frame_refused(c, s, 7, "E_INVAL", "dist_fence.fd")
        # an undecodable submit is still answered, and its buffers released
        c.conn.ledger.submitted(s, 8)  # sent raw: tell our ledger, which checks the daemon's answer
        c.send_raw(msgpack.packb({"t": "submit", "session": s, "index": 8, "ref": rid, "dist": did, "bogus": 1}))
        out = c.wait_for(lambda m: isinstance(m, FrameError) and m.index == 8)
        assert (out.code, out.field) == ("E_INVAL", "bogus")
        assert _released_roles(c, s, 8) == ["dist", "ref"]
        c.submit(s, 9, rid, did)
        assert isinstance(c.outcome(s, 9), Result)
        closed = c.close_session(s)
        assert (closed.frames, closed.failed) == (2, 6)
    finally:
        for b in (r, d, other):
            b.close()
    _still_open(check)


def test_fence_that_never_signals(check, p01):
    _, refs, dists = p01
    c = check
    r, d = frame_memfd(refs[0]), frame_memfd(dists[0])
    try:
        rid, did = c.register_ok(r), c.register_ok(d)
        s = c.open_ok(features=["psnr"]).session
        never = os.eventfd(0)
        c.submit(s, 0, rid, did, ref_fence=never)
        os.close(never)  # ours; the daemon holds its own copy until it gives up
        late = os.eventfd(0)
        c.submit(s, 1, rid, did, dist_fence=late)  # behind the stuck one, in order
        os.eventfd_write(late, 1)
        os.close(late)
        out = _frame_refused(c, s, 0, "E_TIMEOUT", "ref_fence")
        assert "300 ms" in out.message
        assert isinstance(c.outcome(s, 1), Result)
        closed = c.close_session(s)
        assert (closed.frames, closed.failed) == (1, 1)
        assert c.conn.ledger.unreleased() == 0
    finally:
        r.close()
        d.close()
    _still_open(check)


def test_client_killed_mid_frame(check, daemon):
    child = subprocess.Popen([sys.executable, "-m", "tests.daemon.child_producer", daemon.socket],
                             cwd=str(ROOT), stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"SUBMITTED"
        assert daemon.fd_count() > daemon.baseline + 8  # its buffers and fence are in the daemon
        for _ in range(100):
            st = check.request(Status(seq=check.conn.next_seq())).status
            if st["frames_in_flight"] > 0:
                break
        assert st["frames_in_flight"] > 0 and st["sessions"] == 2
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    # the bystander / fd checks follow in the fixture; here: its sessions are gone
    import time

    for _ in range(200):
        st = check.request(Status(seq=check.conn.next_seq())).status
        if st["sessions"] == 0 and st["pending_releases"] == 0 and st["buffers"] == 0:
            break
        time.sleep(0.05)
    assert (st["sessions"], st["pending_releases"], st["buffers"], st["clients"]) == (0, 0, 0, 2)  # us and the bystander


def test_hello_first_and_versions(daemon):
    c = RawClient(daemon.socket)
    try:
        c.send_raw(encode(Status(seq=4))[0])
        err = c.expect_error()
        assert (err.code, err.field, err.re) == ("E_STATE", "t", 4)
        c.send_raw(encode(Hello(seq=5, version=2))[0])
        err = c.expect_error()
        assert (err.code, err.field, err.re) == ("E_NOTSUP", "version", 5)
        assert c.hello().version == 1  # still open, and now talking
        c.send_raw(encode(Hello(seq=6, version=1))[0])  # a second hello is not this protocol
        _fatal(c, "t")
    finally:
        c.close()
    assert daemon.wait_fds() == daemon.baseline


def test_client_that_closes_with_our_packets_unread(check, daemon, p01):
    """The client closes its socket with packets of the daemon unread (results, releases), and with
    packets of its own the daemon has not read yet (a buffer's memfd, a fence): the daemon's reader
    gets ConnectionReset before those; everything of the client is released all the same."""
    _, refs, dists = p01
    c = RawClient(daemon.socket, "abrupt")
    c.hello()
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(3)]
    more = frame_memfd(refs[3])
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok().session
    fenced = c.open_ok(features=["psnr"]).session
    fence, late = os.eventfd(0), os.eventfd(0)
    try:
        c.submit(fenced, 0, *ids[0], ref_fence=fence)  # in the daemon's fence wait
        for i in range(6):
            c.submit(s, i, *ids[i % 3])  # on a worker
        # something of the daemon's is waiting for us, unread
        assert select.select([c.chan.sock], [], [], 10)[0]
        os.kill(daemon.pid, signal.SIGSTOP)  # so that what follows is still queued when we close
        try:
            reg = RegisterBuffer(seq=c.conn.next_seq(), kind="memfd", width=more.width, height=more.height,
                                 pixel_format=more.pixel_format, bitdepth=more.bitdepth, size=more.size,
                                 planes=more.planes, fds=(more.fd,))
            c.send(reg, reg.fds)
            c.submit(fenced, 1, *ids[1], dist_fence=late)
            c.close()
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
    finally:
        for fd in (fence, late):
            os.close(fd)
        for b in (*(x for pair in bufs for x in pair), more):
            b.close()
    import time

    for _ in range(200):
        st = check.request(Status(seq=check.conn.next_seq())).status
        if st["clients"] == 2 and st["sessions"] == 0 and st["pending_releases"] == 0 and st["buffers"] == 0:
            break
        time.sleep(0.05)
    assert (st["sessions"], st["pending_releases"], st["buffers"], st["clients"]) == (0, 0, 0, 2)
    assert "abrupt#" in daemon.log() and "(closed abruptly)" in daemon.log()  # the reset path, not EOF
    # the fixture checks the bystander and that the daemon's fds are back to the baseline
