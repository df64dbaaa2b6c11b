"""The sans-I/O protocol core: round trips, typed errors naming fields, state tables."""

import subprocess
import sys

import msgpack
import pytest

from vmafx.protocol import (
    ClientConnection, CloseSession, ErrorCode, FrameError, Goodbye, Fence, Hello, HelloReply, Limits, LocalProtocolError, Plane,
    RegisterBuffer, Released, RemoteProtocolError, Result, ServerConnection, SessionClosed, State, Status,
    Submit, decode, encode, peek,
)
from vmafx.protocol.codec import bundle as messages_bundle


def test_importing_the_protocol_loads_no_trio_numpy_or_gpu_binding():
    code = (
        "import sys, vmafx.protocol\n"
        "bad = [m for m in ('trio', 'numpy', 'cuda', 'hip', 'OpenGL') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _buffer(**kw):
    base = dict(seq=1, kind="memfd", width=4, height=2, pixel_format="yuv420p", size=12,
                planes=(Plane(0, 0, 4), Plane(0, 8, 2), Plane(0, 10, 2)), fds=(5,))
    base.update(kw)
    return RegisterBuffer(**base)


def test_register_buffer_round_trip_keeps_fields_and_fd_count():
    data, fds = encode(_buffer())
    assert fds == (5,)
    msg = decode(data, (9,))
    assert isinstance(msg, RegisterBuffer)
    assert msg.planes[2] == Plane(0, 10, 2) and msg.fds == (9,)


@pytest.mark.parametrize(
    "mutate, code, field",
    [
        (lambda d: d.update(width=-1), ErrorCode.E_INVAL, "width"),
        (lambda d: d.update(width="4"), ErrorCode.E_INVAL, "width"),
        (lambda d: d["planes"][1].update(pitch=-3), ErrorCode.E_INVAL, "planes[1].pitch"),
        (lambda d: d["planes"][1].pop("offset"), ErrorCode.E_INVAL, "planes[1].offset"),
        (lambda d: d.update(kind="file"), ErrorCode.E_INVAL, "kind"),
        (lambda d: d.pop("size"), ErrorCode.E_INVAL, "size"),
        (lambda d: d.update(extra=1), ErrorCode.E_INVAL, "extra"),
        (lambda d: d["planes"][0].update(fd=3), ErrorCode.E_PROTO, "planes[0].fd"),
        (lambda d: d.update(flags=6), ErrorCode.E_INVAL, "flags"),
    ],
)
def test_bad_fields_are_named(mutate, code, field):
    d = _buffer().to_wire()
    mutate(d)
    with pytest.raises(RemoteProtocolError) as e:
        decode(msgpack.packb(d, use_bin_type=True), (9,))
    assert e.value.code is code and e.value.field == field


def test_unreferenced_and_stray_fds_are_protocol_errors():
    data, _ = encode(_buffer())
    with pytest.raises(RemoteProtocolError) as e:
        decode(data, (9, 10))
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "fds[1]"
    data, _ = encode(Status(seq=3))
    with pytest.raises(RemoteProtocolError) as e:
        decode(data, (9,))
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "fds"


@pytest.mark.parametrize("data", [b"\xc1garbage", b"\x92\x01", msgpack.packb({"t": "hello", "seq": 1})[:-2],
                                  msgpack.packb({"t": "launch_missiles"}), msgpack.packb([1, 2])])
def test_garbage_truncated_and_unknown_are_fatal(data):
    with pytest.raises(RemoteProtocolError) as e:
        decode(data)
    assert e.value.fatal


def test_submit_fences_reference_distinct_fds():
    s = Submit(session=1, index=0, ref=1, dist=2, ref_fence=Fence("eventfd", fd=0),
               dist_fence=Fence("sync_file", fd=1), fds=(7, 8))
    msg = decode(*encode(s))
    assert msg.dist_fence == Fence("sync_file", fd=1)
    bad = Submit(session=1, index=0, ref=1, dist=2, ref_fence=Fence("eventfd", fd=0),
                 dist_fence=Fence("eventfd", fd=0), fds=(7,))
    with pytest.raises(LocalProtocolError) as e:
        encode(bad)
    assert e.value.field == "dist_fence.fd"


def test_peek_recovers_session_and_index_of_a_bad_submit():
    d = {"t": "submit", "session": 3, "index": 9, "ref": 1, "dist": 2, "ref_fence": {"kind": "smoke"}}
    assert peek(msgpack.packb(d)) == {"t": "submit", "session": 3, "index": 9}


def test_server_requires_hello_first_and_checks_version():
    conn = ServerConnection(Limits(), "test")
    with pytest.raises(RemoteProtocolError) as e:
        conn.receive(encode(Status(seq=1))[0])
    assert e.value.code is ErrorCode.E_STATE and conn.state is State.AWAIT_HELLO
    with pytest.raises(RemoteProtocolError) as e:
        conn.receive(encode(Hello(seq=1, version=99))[0])
    assert e.value.code is ErrorCode.E_NOTSUP and e.value.field == "version"
    conn.receive(encode(Hello(seq=2, version=1))[0])
    assert conn.state is State.OPEN


def test_server_refuses_oversized_and_ctrunc_packets_fatally():
    conn = ServerConnection(Limits(), "test")
    with pytest.raises(RemoteProtocolError) as e:
        conn.receive(b"x", truncated=True)
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "message"
    assert conn.state is State.ERROR  # a fatal breach by the peer: sticky ERROR, as in h11
    conn = ServerConnection(Limits(), "test")
    with pytest.raises(RemoteProtocolError) as e:
        conn.receive(b"x", (1, 2), ctrunc=True)
    assert e.value.field == "fds" and conn.state is State.ERROR


def _hello_done() -> ClientConnection:
    c = ClientConnection()
    c.send(Hello(seq=c.next_seq(), version=1))
    c.receive(encode(HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    assert c.state is State.OPEN
    return c


def test_client_ledger_catches_double_outcomes_and_unexpected_releases():
    c = _hello_done()
    c.send(Submit(session=1, index=0, ref=1, dist=1))
    c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    c.receive(encode(Result(session=1, index=0, metrics={"vmaf": 1.0}))[0])
    c.receive(encode(Released(buffer=1, session=1, index=0, role="dist"))[0])
    assert c.ledger.unreleased() == 0 and not c.ledger.frames
    # A second outcome: the daemon broke its promise, and the connection is in ERROR for good.
    c = _hello_done()
    c.send(Submit(session=1, index=0, ref=1, dist=1))
    c.receive(encode(Result(session=1, index=0, metrics={"vmaf": 1.0}))[0])
    with pytest.raises(RemoteProtocolError):
        c.receive(encode(Result(session=1, index=0, metrics={}))[0])
    assert c.state is State.ERROR
    with pytest.raises(RemoteProtocolError):  # nothing is applied any more
        c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    assert c.ledger.unreleased() == 2
    # A second release of one role: the same.
    c = _hello_done()
    c.send(Submit(session=1, index=0, ref=1, dist=1))
    c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    with pytest.raises(RemoteProtocolError):
        c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    assert c.state is State.ERROR


def test_client_refuses_session_closed_with_unanswered_frames():
    c = ClientConnection()
    c.send(Hello(seq=c.next_seq(), version=1))
    c.receive(encode(HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    c.send(Submit(session=4, index=7, ref=1, dist=2))
    close = CloseSession(seq=c.next_seq(), session=4)
    c.send(close)
    with pytest.raises(RemoteProtocolError) as e:
        c.receive(encode(SessionClosed(re=close.seq, session=4, frames=0))[0])
    assert e.value.field == "session" and c.state is State.ERROR  # not left OPEN


def test_a_shutdown_session_closed_may_cross_submits_answered_after_it_and_after_goodbye():
    """The daemon's own session_closed (re absent, at shutdown) may precede the E_SHUTDOWN
    answers of submits it had not read yet; they may even come after goodbye."""
    c = ClientConnection()
    c.send(Hello(seq=c.next_seq(), version=1))
    c.receive(encode(HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    c.send(Submit(session=4, index=7, ref=1, dist=2))
    c.receive(encode(SessionClosed(session=4, frames=0))[0])
    c.receive(encode(Goodbye(reason="stopping"))[0])
    assert c.state is State.CLOSED and c.ledger.unanswered() == [(4, 7)]
    for role, buf in (("ref", 1), ("dist", 2)):
        c.receive(encode(Released(buffer=buf, session=4, index=7, role=role))[0])
    c.receive(encode(FrameError(session=4, index=7, code="E_SHUTDOWN", field="", message="stopping"))[0])
    assert c.ledger.frames == {} and c.state is State.CLOSED
    with pytest.raises(RemoteProtocolError):  # but never a second answer
        c.receive(encode(FrameError(session=4, index=7, code="E_SHUTDOWN", field="", message="again"))[0])


# -- bundles: several of the daemon's messages in one packet ------------------------------


def _opened(bundles: bool) -> ClientConnection:
    c = ClientConnection("t")
    seq = c.next_seq()
    c.send(Hello(seq=seq, version=1, bundles=bundles or None))
    c.receive(encode(HelloReply(re=seq, version=1, server="s", limits={}, bundles=bundles or None))[0])
    return c


@pytest.mark.parametrize("n", [3, 15, 16, 300])
def test_a_bundle_is_its_messages_in_order_and_each_is_applied(n):
    c = _opened(True)
    c.ledger.submitted(1, 0)
    parts = [encode(Released(buffer=7, session=1, index=0, role="ref"))[0]]
    parts += [encode(Result(session=1, index=0, metrics={"psnr_y": 40.5}))[0]]
    while len(parts) < n - 1:
        c.ledger.submitted(2, len(parts))
        parts.append(encode(Released(buffer=7, session=2, index=len(parts), role="dist"))[0])
    parts.append(encode(Released(buffer=8, session=1, index=0, role="dist"))[0])
    data = messages_bundle(parts)
    assert data[0] == (0x90 | n if n < 16 else 0xDC)
    got = c.receive_packet(data)
    assert len(got) == n and isinstance(got[0], Released) and isinstance(got[1], Result)
    assert [type(m) for m in got[2:-1]] == [Released] * (n - 3)
    # each was applied to the ledger: frame (1, 0) answered and both its roles released
    assert (1, 0) not in c.ledger.frames
    if n > 3:
        assert c.ledger.frames[(2, 2)].unreleased == {"ref"}


def test_a_bundle_is_refused_unless_the_hello_asked_for_it():
    c = _opened(False)
    data = messages_bundle([encode(Status(seq=1))[0], encode(Status(seq=2))[0]])
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(data)
    assert e.value.code is ErrorCode.E_PROTO and "did not ask for bundles" in e.value.message


def test_a_bad_bundle_names_the_message_and_single_receive_refuses_a_bundle():
    c = _opened(True)
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(msgpack.packb([]))
    assert e.value.code is ErrorCode.E_PROTO and "empty bundle" in e.value.message
    assert c.state is State.ERROR  # any breach of the daemon's is final
    c = _opened(True)
    with pytest.raises(RemoteProtocolError) as e:
        c.receive_packet(msgpack.packb([{"t": "released", "buffer": 1, "session": 1, "index": 0, "role": "ref"}, 5]))
    assert e.value.code is ErrorCode.E_PROTO and e.value.field == "message[1]"
    c = _opened(True)
    c.ledger.submitted(1, 0)
    two = messages_bundle([encode(Released(buffer=1, session=1, index=0, role="ref"))[0]] * 2)
    with pytest.raises(RemoteProtocolError) as e:
        c.receive(two)
    assert "a bundle of 2 messages" in e.value.message
    assert c.ledger.frames[(1, 0)].unreleased == {"ref", "dist"}  # nothing of the refused packet was applied


def test_hello_bundles_is_a_boolean_field():
    with pytest.raises(RemoteProtocolError) as e:
        decode(msgpack.packb({"t": "hello", "seq": 1, "version": 1, "bundles": 1}))
    assert e.value.field == "bundles"
    assert decode(encode(Hello(seq=1, version=1, bundles=True))[0]).bundles is True
