"""submit_many through a real daemon: one outcome and both releases per frame, a bad frame alone."""

import os

import msgpack

from vmafx.protocol import Error, ErrorCode, FrameError, Goodbye, Result

from .rawclient import RawClient, frame_memfd
from .test_daemon_scoring import reference_frames


def _released_roles(c: RawClient, s: int) -> dict[int, list[tuple[str, int]]]:
    out: dict[int, list[tuple[str, int]]] = {}
    for r in c.released:
        if r.session == s:
            out.setdefault(r.index, []).append((r.role, r.buffer))
    return {i: sorted(v) for i, v in out.items()}


def test_a_bad_frame_in_the_middle_is_answered_alone_and_the_others_are_scored(daemon, p01):
    pair, refs, dists = p01
    want, _ = reference_frames(refs, dists, features=["psnr"], models=(), n=8)
    c = RawClient(daemon.socket, submit_many=True)
    assert c.hello().submit_many is True
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(8)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(features=["psnr"], models=[], width=refs[0].width, height=refs[0].height).session
    fence = os.eventfd(1)  # already signalled
    frames = [{"index": i, "ref": ids[i][0], "dist": ids[i][1]} for i in range(8)]
    frames[1]["ref_fence"] = {"kind": "eventfd", "fd": 0}
    frames[2]["colour"] = "blue"  # not a field of a frame: refused on its own
    frames[3]["ref"] = 999  # no such buffer: the daemon refuses it (E_NOENT), released all the same
    frames[5]["dist_fence"] = {"kind": "eventfd", "fd": 0}  # frame 1's fence fd: consumed once
    frames[6]["ref_fence"] = {"kind": "smoke_signal", "fd": 1}  # a bad frame's fd still counts as named
    data = msgpack.packb({"t": "submit_many", "session": s, "frames": frames}, use_bin_type=True)
    c.conn.ledger.submitted_many(s, list(range(8)))  # sent raw: booked by hand
    other = os.eventfd(0)
    c.send_raw(data, [fence, other])
    os.close(fence)
    os.close(other)
    closed = c.close_session(s)
    assert list(c.outcomes) == [(s, i) for i in range(8)]  # one outcome each, in index order
    got = {i: c.outcomes[(s, i)] for i in range(8)}
    for i in (0, 1, 4, 7):
        assert isinstance(got[i], Result) and got[i].metrics == want[i], i
    bad = {i: (got[i].code, got[i].field) for i in (2, 3, 5, 6)}
    assert bad == {2: ("E_INVAL", "frames[2].colour"), 3: ("E_NOENT", "ref"),
                   5: ("E_INVAL", "frames[5].dist_fence.fd"), 6: ("E_INVAL", "frames[6].ref_fence.kind")}
    assert (closed.frames, closed.failed) == (4, 4)
    rel = _released_roles(c, s)
    assert rel == {i: [("dist", ids[i][1]), ("ref", 999 if i == 3 else ids[i][0])] for i in range(8)}
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
    for r, d in bufs:
        r.close()
        d.close()
    assert daemon.wait_fds() == daemon.baseline  # every fence fd closed: the waited one, the bad frame's


def _protocol_error(c: RawClient) -> Error:
    err = c.expect_error()
    assert err.code == ErrorCode.E_PROTO.value
    return err


def test_submit_many_without_asking_in_the_hello_is_a_protocol_error(daemon, p01):
    _, refs, dists = p01
    c = RawClient(daemon.socket)  # an older client: it does not ask, the daemon does not offer
    assert c.hello().submit_many is None
    s = c.open_ok(features=["psnr"], models=[], width=refs[0].width, height=refs[0].height).session
    c.send_raw(msgpack.packb({"t": "submit_many", "session": s, "frames": [{"index": 0, "ref": 1, "dist": 2}]}))
    assert _protocol_error(c).field == "t"
    c.close()


def test_a_packet_that_leaves_no_frame_answerable_is_a_protocol_error(daemon):
    c = RawClient(daemon.socket, submit_many=True)
    c.hello()
    frames = [{"index": 0, "ref": 1, "dist": 2}, {"ref": 1, "dist": 2}]
    c.send_raw(msgpack.packb({"t": "submit_many", "session": 1, "frames": frames}))
    assert _protocol_error(c).field == "frames[1].index"
    c.close()


def test_more_frames_than_the_limit_is_a_protocol_error(daemon):
    c = RawClient(daemon.socket, submit_many=True)
    n = c.hello().limits["max_frames_per_submit"] + 1
    frames = [{"index": i, "ref": 1, "dist": 2} for i in range(n)]
    c.send_raw(msgpack.packb({"t": "submit_many", "session": 1, "frames": frames}))
    err = _protocol_error(c)
    assert err.field == "frames" and "max_frames_per_submit" in err.message
    c.close()


def test_frames_of_no_session_each_get_their_frame_error_and_releases(daemon):
    c = RawClient(daemon.socket, submit_many=True)
    c.hello()
    c.submit_many(77, [(0, 1, 2), (4, 3, 5)])
    msgs = c.drain(0.5)
    errors = [m for m in msgs if isinstance(m, FrameError)]
    assert [(m.session, m.index, m.code, m.field) for m in errors] == [(77, 0, "E_NOENT", "session"),
                                                                      (77, 4, "E_NOENT", "session")]
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    assert not any(isinstance(m, Goodbye) for m in msgs)
    c.close()


def test_frames_accepted_as_a_group_are_answered_as_frame_by_frame_and_the_limit_refuses_the_same_frame(
        fresh_daemon, p01):
    """A packet whose frames all pass is accepted in one step (buffers this session has matched
    before); one that the group check does not take goes frame by frame.  Either way each frame's
    outcome is the one a submit of its own gets: scored, or (past max_frames_in_flight) E_NOMEM."""
    _, refs, dists = p01
    want, _ = reference_frames(refs, dists, features=["psnr"], models=(), n=4)
    d = fresh_daemon("--limit", "max_frames_in_flight=4")
    c = RawClient(d.socket, submit_many=True)
    assert c.hello().submit_many is True
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(4)]
    ids = [(c.register_ok(r), c.register_ok(dd)) for r, dd in bufs]
    s = c.open_ok(features=["psnr"], models=[], width=refs[0].width, height=refs[0].height).session

    def send(indices):
        c.submit_many(s, [(i, *ids[i % 4]) for i in indices])
        return [c.outcome(s, i) for i in indices]

    first = send(range(0, 4))  # buffers new to the session: frame by frame
    again = send(range(4, 8))  # the same buffers, all four fit: one group
    over = send(range(8, 13))  # five frames, four fit: frame by frame, the fifth refused
    for i, o in enumerate(first + again + over[:4]):
        assert isinstance(o, Result) and o.metrics == want[i % 4], (i, o)
    assert isinstance(over[4], FrameError) and (over[4].code, over[4].field) == ("E_NOMEM", "index")
    late = send([13, 14])  # room again
    assert [type(o) for o in late] == [Result, Result] and late[1].metrics == want[2]
    closed = c.close_session(s)
    assert (closed.frames, closed.failed) == (14, 1)
    assert _released_roles(c, s) == {i: sorted([("ref", ids[i % 4][0]), ("dist", ids[i % 4][1])]) for i in range(15)}
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
    for r, dd in bufs:
        r.close()
        dd.close()
    assert d.wait_fds() == d.baseline
