"""A typed error the daemon decides to send reaches the client before the close.

* ``E_PROTO`` with packets following: the daemon stops the client sending
  (``shutdown(SHUT_RD)``), drops what it queued, then closes -- so the client
  reads the error, never ``ECONNRESET`` first.
* A zero-length packet is a protocol error, said as one (not mistaken for EOF).
* A second ``hello`` is told so.
"""

from __future__ import annotations

import socket

import msgpack
import pytest

from vmafx.protocol import Error, Hello, Status
from vmafx.protocol.codec import decode_packet, encode

from ..daemon.conftest import Daemon
from .conftest import scaled

TRIALS = scaled(100)


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    yield d
    alive = d.proc.poll() is None
    rc = d.stop() if alive else d.proc.returncode
    d.close()
    assert alive and rc == 0


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(path)
    return s


def _hello(s: socket.socket) -> None:
    s.send(encode(Hello(seq=1, version=1, client="rel", bundles=True))[0])
    assert s.recv(65536)


def _first_error(s: socket.socket) -> tuple[str, Error | None]:
    """('error', msg) for the first error read, or ('reset' | 'eof', None)."""
    while True:
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return "reset", None
        if not data:
            return "eof", None
        for msg in decode_packet(data, bundles=True):
            if isinstance(msg, Error):
                return "error", msg


def eproto_trial(path: str, following: int = 4) -> str:
    """Hello, a garbage packet, ``following`` more packets at once; what the client reads first."""
    s = _connect(path)
    try:
        _hello(s)
        s.send(b"\xc1 not msgpack")
        for i in range(following):
            try:
                s.send(encode(Status(seq=10 + i))[0])
            except (BrokenPipeError, ConnectionResetError):
                break  # the daemon already stopped our sending: fine, the error still waits for us
        kind, msg = _first_error(s)
        if kind == "error" and msg.code == "E_PROTO":
            # and after it, the end of the stream (not a reset)
            try:
                while s.recv(65536):
                    pass
                return "delivered"
            except ConnectionResetError:
                return "reset after the error"
        return kind
    finally:
        s.close()


def test_e_proto_is_delivered_with_four_packets_following(daemon):
    got = [eproto_trial(daemon.socket) for _ in range(TRIALS)]
    assert got.count("delivered") == TRIALS, {k: got.count(k) for k in set(got)}
    assert daemon.wait_fds() == daemon.baseline


@pytest.mark.parametrize("after_hello", [False, True])
def test_a_zero_length_packet_is_a_protocol_error(daemon, after_hello):
    s = _connect(daemon.socket)
    try:
        if after_hello:
            _hello(s)
        s.send(b"")
        kind, msg = _first_error(s)
        assert kind == "error" and msg.code == "E_PROTO" and msg.field == "message", (kind, msg)
        assert "empty packet" in msg.message
    finally:
        s.close()


def test_a_second_hello_is_told_so(daemon):
    s = _connect(daemon.socket)
    try:
        _hello(s)
        s.send(encode(Hello(seq=2, version=1, client="rel"))[0])
        kind, msg = _first_error(s)
        assert kind == "error" and msg.code == "E_PROTO" and msg.re == 2
        assert "second hello" in msg.message, msg
    finally:
        s.close()
