"""The transport turns every OSError of the socket into its own errors, in one place."""

import socket

import pytest
import trio

from vmafx.transport import (
    BlockingPacketChannel, ConnectionReset, TransportClosed, TrioPacketChannel, recv_packet_blocking,
    send_packet_blocking,
)


def _pair():
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def test_any_socket_error_becomes_transport_closed():
    # ENOTCONN: neither a broken pipe nor a reset, and still the connection's end
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with s, pytest.raises(TransportClosed) as e:
        send_packet_blocking(s, b"x")
    assert type(e.value) is TransportClosed and "not connected" in str(e.value)
    with s, pytest.raises(TransportClosed):
        recv_packet_blocking(s, 64, 1)


def test_a_send_to_a_closed_peer_is_transport_closed():
    a, b = _pair()
    with a:
        b.close()
        with pytest.raises(TransportClosed):
            send_packet_blocking(a, b"more")


def test_timeout_and_a_full_buffer_are_not_connection_errors():
    a, b = _pair()
    chan = BlockingPacketChannel(a)
    with a, b:
        with pytest.raises(TimeoutError):
            chan.receive(timeout=0.01)
        while chan.try_send(b"x" * 4096):  # fills the buffer; BlockingIOError passes as "not sent"
            pass
        assert not chan.try_send(b"y")


def test_trio_channel_reports_the_peer_reset():
    async def main():
        a, b = _pair()
        chan = TrioPacketChannel(trio.socket.from_stdlib_socket(a))
        with b:
            await chan.send(b"unread")
            b.send(b"from the peer")
        with pytest.raises(ConnectionReset):
            await chan.receive()
        assert (await chan.receive()).data == b"from the peer"  # its last words, after the reset
        with pytest.raises(TransportClosed):
            await chan.receive()
        chan.close()

    trio.run(main)
