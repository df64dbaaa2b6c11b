"""Bounded everything: frames in flight, clients, a client that stops reading; outcome order."""

import os
import time

import msgpack

from vmafx.protocol import Error, Fence, FrameError, Result, Status, Submit
from vmafx.protocol.codec import encode
from vmafx.transport import TransportClosed

from .rawclient import RawClient, frame_memfd


def test_frames_in_flight_and_clients_are_bounded(fresh_daemon, p01):
    _, refs, dists = p01
    d = fresh_daemon("--limit", "max_frames_in_flight=2", "--limit", "max_clients=2")
    c = RawClient(d.socket)
    c.hello()
    other = RawClient(d.socket)
    third = RawClient(d.socket)
    err = third.recv(timeout=10)
    assert isinstance(err, Error) and err.code == "E_LIMIT" and "max_clients" in err.message
    third.close()
    r, dd = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(r), c.register_ok(dd)
    s = c.open_ok(features=["psnr"]).session
    never = os.eventfd(0)
    c.submit(s, 0, rid, did, ref_fence=never)  # holds a place for the fence timeout (300 ms)
    c.submit(s, 1, rid, did)
    c.submit(s, 2, rid, did)  # a third frame in flight: refused, but in order
    outs = [c.outcome(s, i) for i in range(3)]
    assert [(type(o).__name__, getattr(o, "code", None), getattr(o, "field", None)) for o in outs] == [
        ("FrameError", "E_TIMEOUT", "ref_fence"), ("Result", None, None), ("FrameError", "E_NOMEM", "index")]
    c.submit(s, 3, rid, did)  # room again
    assert isinstance(c.outcome(s, 3), Result)
    c.close_session(s)
    os.close(never)
    c.close()
    other.close()
    r.close()
    dd.close()
    assert d.wait_fds() == d.baseline


def test_a_frame_error_does_not_overtake_a_lagging_result(daemon, p01):
    """Motion makes frame i final only after later frames: the error of i + 1 must wait for it."""
    _, refs, dists = p01
    c = RawClient(daemon.socket)
    c.hello()
    n = 5
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
    s = c.open_ok().session  # vmaf_v0.6.1 includes motion
    c.submit(s, 0, *ids[0])
    c.submit(s, 1, ids[1][0], 4242)  # unknown buffer: refused at once...
    time.sleep(0.5)
    got = [m for m in c.drain(0.2) if isinstance(m, (Result, FrameError))]
    assert got == []  # ...but held behind frame 0, which is not final yet
    for i in range(2, n):
        c.submit(s, i, *ids[i])  # frame 0 becomes final after motion's lag, then 1's error may go
    first = c.wait_for(lambda m: isinstance(m, (Result, FrameError)))
    second = c.wait_for(lambda m: isinstance(m, (Result, FrameError)))
    assert (type(first), first.index, type(second), second.index) == (Result, 0, FrameError, 1)
    closed = c.close_session(s)
    assert (closed.frames, closed.failed) == (n - 1, 1)
    # the failed frame is left out of the sequence: frame 2's motion continues from frame 0
    # (were frame 1 a gap of zeros or a repeat, frame 2's SAD would differ)
    from .test_daemon_scoring import reference_frames

    kept = [0, 2, 3, 4]
    want, _ = reference_frames([refs[i] for i in kept], [dists[i] for i in kept])
    for k, i in enumerate(kept):
        assert c.outcomes[(s, i)].metrics == want[k], f"frame {i}"
    c.close()
    for r, dd in bufs:
        r.close()
        dd.close()
    assert daemon.wait_fds() == daemon.baseline


def test_a_refused_fence_does_not_overtake_a_lagging_result_either(daemon, p01):
    """Refusals found while taking a submit's fences (a wrong fd kind, a GPU event on the CPU
    lane, one fd named by both fences) are answered in the session's order too."""
    _, refs, dists = p01
    c = RawClient(daemon.socket)
    c.hello()
    n = 5
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
    s = c.open_ok().session  # vmaf_v0.6.1 includes motion: frame 0 is final only after frame 1 scored
    c.submit(s, 0, *ids[0])
    fake = os.memfd_create("not-a-fence")
    c.send(Submit(session=s, index=1, ref=ids[1][0], dist=ids[1][1], dist_fence=Fence("eventfd", fd=0),
                  fds=(fake,)), [fake])
    os.close(fake)
    c.send(Submit(session=s, index=2, ref=ids[2][0], dist=ids[2][1],
                  ref_fence=Fence("cuda_ipc_event", handle=b"\0" * 64)))
    # one fd named by both fences: refused when decoded (our encoder would not send it)
    one = os.eventfd(1)
    c.conn.ledger.submitted(s, 3)
    c.send_raw(msgpack.packb({"t": "submit", "session": s, "index": 3, "ref": ids[3][0], "dist": ids[3][1],
                              "ref_fence": {"kind": "eventfd", "fd": 0}, "dist_fence": {"kind": "eventfd", "fd": 0}}),
               [one])
    os.close(one)
    time.sleep(0.5)
    got = [m for m in c.drain(0.2) if isinstance(m, (Result, FrameError))]
    assert got == []  # all three held behind frame 0, which is not final yet
    c.submit(s, 4, *ids[4])
    closed = c.close_session(s)
    outs = [c.outcomes[(s, i)] for i in range(n)]
    assert [(type(o).__name__, getattr(o, "code", None), getattr(o, "field", None)) for o in outs] == [
        ("Result", None, None), ("FrameError", "E_INVAL", "dist_fence.fd"), ("FrameError", "E_NOTSUP", "ref_fence"),
        ("FrameError", "E_INVAL", "dist_fence.fd"), ("Result", None, None)]
    assert "both fences" in outs[3].message
    assert (closed.frames, closed.failed) == (2, 3)
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
    for r, dd in bufs:
        r.close()
        dd.close()
    assert daemon.wait_fds() == daemon.baseline


def test_a_client_that_stops_reading_is_dropped_and_stalls_nobody(daemon, p01):
    from .test_bad_input import Bystander, _expected_psnr

    slow = RawClient(daemon.socket, "slow")
    slow.hello()
    bystander = Bystander(daemon, p01, _expected_psnr(p01))
    sent = 0
    try:
        for i in range(5000):
            slow.send_raw(encode(Status(seq=100 + i))[0])
            sent += 1
    except TransportClosed:
        pass  # dropped while we were still sending
    bystander.scores_correctly()
    replies = 0
    try:
        while True:
            slow.chan.receive(timeout=10)
            replies += 1
    except TransportClosed:
        pass
    assert replies < sent  # it was cut off, not served forever
    slow.close()
    assert "not reading" in daemon.log()
    assert daemon.wait_fds() == daemon.baseline
