"""The sans-I/O protocol core: round trips, typed errors naming fields, state tables."""

import subprocess
import sys

import msgpack
import pytest

from vmafx.protocol import (
    ClientConnection, ErrorCode, Fence, Hello, HelloReply, Limits, LocalProtocolError, Plane,
    RegisterBuffer, Released, RemoteProtocolError, Result, ServerConnection, SessionClosed, State, Status,
    Submit, decode, encode, peek,
)


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
    assert conn.state is State.CLOSED
    conn = ServerConnection(Limits(), "test")
    with pytest.raises(RemoteProtocolError) as e:
        conn.receive(b"x", (1, 2), ctrunc=True)
    assert e.value.field == "fds" and conn.state is State.CLOSED


def test_client_ledger_catches_double_outcomes_and_unexpected_releases():
    c = ClientConnection()
    c.send(Hello(seq=c.next_seq(), version=1))
    c.receive(encode(HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    assert c.state is State.OPEN
    c.send(Submit(session=1, index=0, ref=1, dist=1))
    c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    c.receive(encode(Result(session=1, index=0, metrics={"vmaf": 1.0}))[0])
    with pytest.raises(RemoteProtocolError):
        c.receive(encode(Result(session=1, index=0, metrics={}))[0])
    with pytest.raises(RemoteProtocolError):
        c.receive(encode(Released(buffer=1, session=1, index=0, role="ref"))[0])
    c.receive(encode(Released(buffer=1, session=1, index=0, role="dist"))[0])
    assert c.ledger.unreleased() == 0 and not c.ledger.frames


def test_client_refuses_session_closed_with_unanswered_frames():
    c = ClientConnection()
    c.send(Hello(seq=c.next_seq(), version=1))
    c.receive(encode(HelloReply(re=1, version=1, server="s", limits=Limits().to_wire()))[0])
    c.send(Submit(session=4, index=7, ref=1, dist=2))
    with pytest.raises(RemoteProtocolError) as e:
        c.receive(encode(SessionClosed(session=4, frames=0))[0])
    assert e.value.field == "session"
