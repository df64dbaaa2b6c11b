"""submit_many, sans I/O: round trip, a bad frame decoded as one, packet-level errors, limits, the hello."""

import dataclasses
import msgpack
import pytest

from vmafx.protocol import (
    BadFrame, ClientConnection, ErrorCode, Fence, Hello, HelloReply, Limits, LocalProtocolError, RemoteProtocolError,
    ServerConnection, State, Submit, SubmitFrame, SubmitMany, decode, encode,
)
from vmafx.protocol.limits import MAX_FDS_PER_PACKET, MAX_FRAMES_PER_SUBMIT


def _wire(frames, session=3, **extra):
    return msgpack.packb({"t": "submit_many", "session": session, "frames": frames, **extra}, use_bin_type=True)


def test_round_trip_keeps_every_frame_and_its_fences():
    msg = SubmitMany(session=3, frames=(
        SubmitFrame(0, 1, 2), SubmitFrame(1, 3, 4, ref_fence=Fence("eventfd", fd=1)),
        SubmitFrame(2, 5, 6, Fence("sync_file", fd=0), Fence("cuda_ipc_event", handle=b"h" * 64))), fds=(10, 11))
    data, fds = encode(msg)
    assert fds == (10, 11)
    got = decode(data, (20, 21))
    assert got == SubmitMany(session=3, frames=msg.frames, fds=(20, 21))


@pytest.mark.parametrize("mutate, field", [
    (lambda f: f.update(ref="1"), "frames[1].ref"),
    (lambda f: f.update(dist=-2), "frames[1].dist"),
    (lambda f: f.pop("dist"), "frames[1].dist"),
    (lambda f: f.update(colour=1), "frames[1].colour"),
    (lambda f: f.update(ref_fence={"kind": "smoke"}), "frames[1].ref_fence.kind"),
    (lambda f: f.update(dist_fence={"kind": "eventfd"}), "frames[1].dist_fence.fd"),
])
def test_a_bad_frame_decodes_as_a_bad_frame_naming_its_field_and_the_others_stay(mutate, field):
    frames = [{"index": i, "ref": 2 * i + 1, "dist": 2 * i + 2} for i in range(3)]
    mutate(frames[1])
    msg = decode(_wire(frames))
    assert msg.frames[0] == SubmitFrame(0, 1, 2) and msg.frames[2] == SubmitFrame(2, 5, 6)
    bad = msg.frames[1]
    assert type(bad) is BadFrame and bad.index == 1 and bad.field == field and bad.code is ErrorCode.E_INVAL
    # what could be read of its buffers is kept, so the daemon can still release them
    assert (bad.ref, bad.dist) == (3 if field != "frames[1].ref" else None,
                                   4 if field not in ("frames[1].dist",) else None)


def test_a_fence_fd_named_twice_makes_the_later_frame_bad_and_fd_refs_stay_checked():
    frames = [{"index": 0, "ref": 1, "dist": 2, "ref_fence": {"kind": "eventfd", "fd": 0}},
              {"index": 1, "ref": 1, "dist": 2, "dist_fence": {"kind": "eventfd", "fd": 0}}]
    msg = decode(_wire(frames), (7,))
    assert type(msg.frames[0]) is SubmitFrame and msg.frames[1].field == "frames[1].dist_fence.fd"
    with pytest.raises(RemoteProtocolError) as e:  # an fd index past the packet's fds
        decode(_wire(frames[:1]), ())
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "frames[0].ref_fence.fd"
    with pytest.raises(RemoteProtocolError) as e:  # an fd no frame names
        decode(_wire(frames[:1]), (7, 8))
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "fds[1]"
    # a bad frame's fence fd is named all the same (it is closed with the packet, not "stray")
    bad = [{"index": 0, "ref": "x", "dist": 2, "ref_fence": {"kind": "eventfd", "fd": 0}}]
    assert decode(_wire(bad), (7,)).frames[0].fds == (0,)


@pytest.mark.parametrize("packet, field", [
    (_wire([]), "frames"),
    (_wire({"index": 0}), "frames"),
    (_wire([{"index": 0, "ref": 1, "dist": 2}, 5]), "frames[1]"),
    (_wire([{"index": 0, "ref": 1, "dist": 2}, {"index": -1, "ref": 1, "dist": 2}]), "frames[1].index"),
    (_wire([{"ref": 1, "dist": 2}]), "frames[0].index"),
    (_wire([{"index": 0, "ref": 1, "dist": 2}], session="1"), "session"),
    (_wire([{"index": 0, "ref": 1, "dist": 2}], extra=1), "extra"),
    (msgpack.packb({"t": "submit_many", "session": 1}), "frames"),
    (_wire([{"index": i, "ref": 1, "dist": 2} for i in range(MAX_FRAMES_PER_SUBMIT + 1)]), "frames"),
])
def test_a_packet_that_leaves_no_frame_answerable_is_fatal(packet, field):
    with pytest.raises(RemoteProtocolError) as e:
        decode(packet)
    assert e.value.code is ErrorCode.E_PROTO and e.value.fatal and e.value.field == field


def test_encode_refuses_what_the_peer_would_refuse():
    with pytest.raises(LocalProtocolError) as e:
        encode(SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2), SubmitFrame(1, 1, -2))))
    assert e.value.field == "frames[1].dist"
    same = Fence("eventfd", fd=0)
    with pytest.raises(LocalProtocolError) as e:
        encode(SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2, same), SubmitFrame(1, 1, 2, same)), fds=(5,)))
    assert e.value.field == "frames[1].ref_fence.fd"
    with pytest.raises(LocalProtocolError) as e:
        encode(SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2, Fence("eventfd", fd=MAX_FDS_PER_PACKET)),),
                          fds=tuple(range(MAX_FDS_PER_PACKET + 1))))
    assert e.value.field == "frames[0].ref_fence.fd"


def _pair(ask: bool, offer: bool = True, **limits):
    """A client and a server connection after the hello (the server's reply as the daemon makes it)."""
    c, srv = ClientConnection("t"), ServerConnection(Limits(**limits), "d")
    seq = c.next_seq()
    srv.receive(c.send(Hello(seq=seq, version=1, submit_many=ask or None))[0])
    reply = HelloReply(re=seq, version=1, server="d", limits=srv.limits.to_wire(),
                       submit_many=True if ask and offer else None)
    c.receive(encode(reply)[0])
    return c, srv


def test_the_hello_negotiates_submit_many_and_the_server_refuses_it_unasked():
    c, srv = _pair(ask=True)
    assert c.submit_many and srv.submit_many
    data, _ = c.send(SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2), SubmitFrame(1, 1, 2))))
    assert len(srv.receive(data).frames) == 2
    assert set(c.ledger.frames) == {(1, 0), (1, 1)}  # each frame booked: one outcome, two releases each
    c, srv = _pair(ask=False)
    assert not c.submit_many and not srv.submit_many
    with pytest.raises(LocalProtocolError):
        c.send(SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2),)))
    assert c.ledger.frames == {}
    with pytest.raises(RemoteProtocolError) as e:
        srv.receive(_wire([{"index": 0, "ref": 1, "dist": 2}]))
    assert e.value.code is ErrorCode.E_PROTO and srv.state is State.ERROR
    c, srv = _pair(ask=True, offer=False)  # an older daemon: no word of submit_many in its reply
    assert not c.submit_many
    c.send(Submit(session=1, index=0, ref=1, dist=2))  # the single submit works unchanged


def test_the_daemons_frame_and_fd_limits_bound_a_packet():
    c, srv = _pair(ask=True, max_frames_per_submit=2, max_fds_per_message=1)
    three = SubmitMany(session=1, frames=tuple(SubmitFrame(i, 1, 2) for i in range(3)))
    with pytest.raises(LocalProtocolError) as e:
        c.send(three)
    assert e.value.field == "frames"
    with pytest.raises(RemoteProtocolError) as e:
        srv.receive(encode(three)[0])
    assert e.value.code is ErrorCode.E_PROTO and "max_frames_per_submit" in e.value.message
    two_fenced = SubmitMany(session=1, frames=(SubmitFrame(0, 1, 2, Fence("eventfd", fd=0)),
                                               SubmitFrame(1, 1, 2, Fence("eventfd", fd=1))), fds=(5, 6))
    with pytest.raises(LocalProtocolError) as e:
        c.send(two_fenced)
    assert e.value.field == "fds"


def test_the_wire_bounds_are_the_kernels():
    assert MAX_FDS_PER_PACKET == 253  # SCM_MAX_FD
    assert Limits().max_frames_per_submit <= MAX_FRAMES_PER_SUBMIT


# -- the daemon's per-frame messages: written-out checks, the general path's bytes -----------------

from vmafx.protocol import Released, Result  # noqa: E402
from vmafx.protocol.codec import _PLAIN_MAPS  # noqa: E402


@pytest.mark.parametrize("msg", [
    Released(buffer=7, session=3, index=100, role="dist"),
    Released(buffer=(1 << 32) - 1, session=0, index=0, role="ref"),
    Result(session=3, index=5, metrics={"psnr_y": 40.5, "vmaf": None}),
    Result(session=3, index=5, metrics={}),
])
def test_the_per_frame_messages_encode_to_the_general_paths_bytes(msg):
    plain = _PLAIN_MAPS[type(msg)](msg)
    assert plain is not None
    general = msgpack.packb(msg.to_wire(), use_bin_type=True)
    assert encode(msg)[0] == general and decode(general) == msg


@pytest.mark.parametrize("msg, field", [
    (Released(buffer=-1, session=3, index=1, role="ref"), "buffer"),
    (Released(buffer=1, session=3, index=1 << 32, role="ref"), "index"),
    (Released(buffer=1, session=3, index=1, role="luma"), "role"),
    (Result(session=3, index=1, metrics={"psnr_y": "40"}), "metrics.psnr_y"),
    (Result(session=True, index=1, metrics={}), "session"),
])
def test_what_the_written_out_checks_do_not_take_still_fails_naming_the_field(msg, field):
    assert _PLAIN_MAPS[type(msg)](msg) is None
    with pytest.raises(LocalProtocolError) as e:
        encode(msg)
    assert e.value.field == field


def test_an_integer_metric_goes_the_general_way_and_arrives_a_float():
    msg = Result(session=1, index=2, metrics={"n": 3})
    assert _PLAIN_MAPS[Result](msg) is None
    assert decode(encode(msg)[0]).metrics == {"n": 3.0}


def test_a_decoded_frame_is_the_frame_its_constructor_makes():
    fence = Fence(kind="sync_file", fd=0)
    for frame in (SubmitFrame(4, 1, 2), SubmitFrame(5, 1, 2, fence, None)):
        got = SubmitFrame.check(frame.to_wire(), "frames[0]")
        assert type(got) is SubmitFrame and got == frame and hash(got) == hash(frame)
        assert vars(got) == vars(frame)
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.index = 9


@pytest.mark.parametrize("wire, field", [
    ({"t": "released", "buffer": 1, "session": 2, "index": 3, "role": "luma"}, "role"),
    ({"t": "released", "buffer": 1, "session": 2, "index": 3, "role": "ref", "extra": 0}, "extra"),
    ({"t": "released", "buffer": 1, "session": 2, "index": -3, "role": "ref"}, "index"),
    ({"t": "result", "session": 2, "index": 3, "metrics": {"x": "1"}}, "metrics.x"),
    ({"t": "result", "session": 2, "index": 3}, "metrics"),
])
def test_received_per_frame_messages_are_checked_as_before(wire, field):
    with pytest.raises(RemoteProtocolError) as e:
        decode(msgpack.packb(wire))
    assert e.value.field == field


def test_received_per_frame_messages_decode_as_the_general_path_does():
    assert decode(msgpack.packb({"t": "released", "buffer": 1, "session": 2, "index": 3, "role": "dist"})) == \
        Released(buffer=1, session=2, index=3, role="dist")
    got = decode(msgpack.packb({"t": "result", "session": 2, "index": 3, "metrics": {"a": 1.5, "b": None, "c": 2}}))
    assert got == Result(session=2, index=3, metrics={"a": 1.5, "b": None, "c": 2.0})
    assert type(got.metrics["c"]) is float


def test_plain_frames_of_a_submit_many_decode_to_the_frames_their_constructor_makes():
    frames = [{"index": 4, "ref": 1, "dist": 2}, {"index": 5, "ref": (1 << 32) - 1, "dist": 0},
              {"index": 6, "ref": 1, "dist": 2, "ref_fence": {"kind": "eventfd", "fd": 0}},
              {"index": 7, "ref": True, "dist": 2}, {"index": 8, "ref": 1, "colour": 2},
              {"index": 9, "ref": 1 << 32, "dist": 2}]
    got = decode(_wire(frames), (5,)).frames
    want = (SubmitFrame(4, 1, 2), SubmitFrame(5, (1 << 32) - 1, 0), SubmitFrame(6, 1, 2, Fence("eventfd", fd=0)))
    assert got[:3] == want and [hash(f) for f in got[:3]] == [hash(f) for f in want]
    assert all(type(f) is SubmitFrame and f.ref_fence is None and f.dist_fence is None for f in got[:2])
    assert got[0].to_wire() == frames[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].index = 9
    assert [(type(f).__name__, f.field) for f in got[3:]] == [
        ("BadFrame", "frames[3].ref"), ("BadFrame", "frames[4].colour"), ("BadFrame", "frames[5].ref")]


def _bundle(*maps):
    return msgpack.packb(list(maps), use_bin_type=True)


def test_a_bundles_per_frame_messages_decode_as_each_alone_does():
    from vmafx.protocol import Goodbye, Released, Result
    from vmafx.protocol.codec import decode_packet

    maps = [{"t": "released", "buffer": 1, "session": 2, "index": 3, "role": "ref"},
            {"t": "result", "session": 2, "index": 3, "metrics": {"a": 1.5, "b": None}},
            {"t": "result", "session": 2, "index": 4, "metrics": {"c": 2}},  # an integer: the general way
            {"t": "goodbye", "reason": "bye"}]
    got = decode_packet(_bundle(*maps), bundles=True)
    assert got == [Released(buffer=1, session=2, index=3, role="ref"),
                   Result(session=2, index=3, metrics={"a": 1.5, "b": None}),
                   Result(session=2, index=4, metrics={"c": 2.0}), Goodbye(reason="bye")]
    assert [decode(msgpack.packb(m)) for m in maps] == got
    assert type(got[2].metrics["c"]) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].index = 9
    for bad, field in (({"t": "released", "buffer": 1, "session": 2, "index": 3, "role": "luma"}, "role"),
                       ({"t": "result", "session": 2, "index": -1, "metrics": {}}, "index"),
                       ({"t": "result", "session": 2, "index": 1, "metrics": {"x": "1"}}, "metrics.x"),
                       ({"t": ["released"], "buffer": 1}, "t")):
        with pytest.raises(RemoteProtocolError) as e:
            decode_packet(_bundle(maps[0], bad), bundles=True)
        assert e.value.field == field, bad


def test_the_clients_frame_ledger_checks_every_message_of_a_bundle():
    c = ClientConnection("t")
    c.state, c.bundles = State.OPEN, True
    c.ledger.submitted_many(2, [3, 4])
    released = [{"t": "released", "buffer": 1, "session": 2, "index": i, "role": r}
                for i in (3, 4) for r in ("ref", "dist")]
    result = {"t": "result", "session": 2, "index": 3, "metrics": {}}
    assert len(c.receive_packet(_bundle(*released, result))) == 5
    assert c.ledger.unanswered() == [(2, 4)] and c.ledger.unreleased() == 0
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(_bundle({**result, "index": 4}, result))  # frame 3 answered twice
    assert e.value.field == "index" and "not outstanding" in e.value.message and c.state is State.ERROR
