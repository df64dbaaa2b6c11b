"""Packets and file descriptors over ``AF_UNIX``/``SOCK_SEQPACKET``, for trio and for blocking code.

This is the one place where ``OSError`` from the socket becomes a transport
error (:func:`_translated`, written out inline on each send and receive: a
context manager per packet costs a generator each time): :class:`ConnectionReset` for ``ECONNRESET``,
:class:`TransportClosed` for every other error of the socket (the peer or
the kernel ended the connection, or it cannot carry packets any more).  Two
are not errors of the connection and pass unchanged: ``BlockingIOError`` (a
non-blocking send found the buffer full) and ``TimeoutError`` (a blocking
receive's timeout ran out).  A socket *we* closed keeps
``trio.ClosedResourceError`` semantics.

File descriptors received with SCM_RIGHTS arrive as :class:`OwnedFd`
objects: exactly one owner, ``close()`` is idempotent and forgets the
integer at once (so a double close of a reused number cannot happen), and a
``weakref.finalize`` safety net closes a forgotten one.  ``MSG_CMSG_CLOEXEC``
keeps received fds out of child processes.

When a sender attaches more fds than our ancillary buffer holds, the kernel
sets ``MSG_CTRUNC`` and closes the excess itself; we close the ones we did
get and report the packet as truncated so the protocol layer refuses it.
"""

from __future__ import annotations

import array
import os
import select
import socket
import weakref
from dataclasses import dataclass
from typing import Self

__all__ = [
    "ClosedOnExit", "HeldFd", "OwnedFd", "Packet", "TransportClosed", "ConnectionReset", "recv_packet_blocking", "send_packet_blocking",
    "TrioPacketChannel", "BlockingPacketChannel", "ancillary_size", "open_fd_count",
]

_FD_SIZE = array.array("i").itemsize


class TransportClosed(Exception):
    """The peer closed the connection, or the kernel broke it."""


class ConnectionReset(TransportClosed):
    """ECONNRESET: the peer closed with packets of ours unread.

    On AF_UNIX the kernel reports this error *once*, before the packets the
    peer sent us and that are still queued (a goodbye, say); reading on
    returns them, then end-of-file.  A reader that wants the peer's last
    words keeps reading after this one.
    """


def _translated(e: OSError) -> BaseException:
    """The transport error for the socket's ``OSError`` ``e`` (see the module docstring)."""
    if isinstance(e, (BlockingIOError, TimeoutError)):
        return e
    if isinstance(e, ConnectionResetError):
        return ConnectionReset(str(e))
    return TransportClosed(str(e))


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class ClosedOnExit:
    """What owns something and closes it with an idempotent ``close()``: ``with obj:`` gives
    ``obj`` and closes it at the end of the block, however the block ends."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]


class HeldFd:
    """An fd number held until let go; what owned and borrowed fds share.

    ``fileno()`` raises ValueError once it is gone (the subclass's ``_gone``
    says how: closed, released)."""

    __slots__ = ("_fd",)
    _gone = "closed"

    @property
    def closed(self) -> bool:
        return self._fd is None

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError(f"fd already {self._gone}")
        return self._fd


class OwnedFd(ClosedOnExit, HeldFd):
    """An fd with exactly one owner."""

    __slots__ = ("_finalizer", "__weakref__")

    def __init__(self, fd: int):
        if fd < 0:
            raise ValueError("invalid fd")
        self._fd: int | None = fd
        self._finalizer = weakref.finalize(self, _close_quietly, fd)

    def detach(self) -> int:
        """Give the integer away: the caller owns it now."""
        fd = self.fileno()
        self._finalizer.detach()
        self._fd = None
        return fd

    def dup(self) -> "OwnedFd":
        return OwnedFd(os.dup(self.fileno()))

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            self._finalizer.detach()
            _close_quietly(fd)

    def __repr__(self) -> str:
        return f"OwnedFd({self._fd if self._fd is not None else 'closed'})"


@dataclass
class Packet:
    data: bytes
    fds: list[OwnedFd]
    truncated: bool = False
    ctrunc: bool = False

    def close_fds(self) -> None:
        for fd in self.fds:
            fd.close()
        self.fds = []


def ancillary_size(max_fds: int) -> int:
    return socket.CMSG_SPACE(max_fds * _FD_SIZE)


def _unpack(data: bytes, ancdata, flags: int) -> Packet:
    fds: list[OwnedFd] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(payload[: len(payload) - (len(payload) % _FD_SIZE)])
            fds.extend(OwnedFd(fd) for fd in arr)
    return Packet(
        data=data,
        fds=fds,
        truncated=bool(flags & socket.MSG_TRUNC),
        ctrunc=bool(flags & socket.MSG_CTRUNC),
    )


def _ancillary(fds) -> list:
    if not fds:
        return []
    ints = [fd.fileno() if hasattr(fd, "fileno") else int(fd) for fd in fds]
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", ints))]


def recv_packet_blocking(sock: socket.socket, max_bytes: int, max_fds: int) -> Packet:
    try:
        data, anc, flags, _ = sock.recvmsg(max_bytes, ancillary_size(max_fds), socket.MSG_CMSG_CLOEXEC)
    except OSError as e:
        err = _translated(e)
        if err is e:
            raise
        raise err from None
    return _received(data, anc, flags, sock.fileno())


def _peer_may_send(fd: int) -> bool:
    """The peer can still send to us: neither it closed or shut down its sending side, nor we ours for reading.

    ``recvmsg`` returns ``b""`` both for a zero-length SEQPACKET record and for
    end-of-file, with the same flags (Linux sets no ``MSG_EOR`` on AF_UNIX), and
    ``FIONREAD`` says 0 for both.  What differs is the socket's shutdown state,
    which ``poll`` reports as ``POLLRDHUP`` (af_unix.c, ``unix_dgram_poll``: set
    once ``RCV_SHUTDOWN`` is, which the peer's close or ``shutdown(SHUT_WR)`` and
    our own ``shutdown(SHUT_RD)`` set).  So an empty read with no ``POLLRDHUP``
    is an empty packet.  (An empty packet sent just before the peer closed reads
    as the end of the stream: the peer is gone either way.)
    """
    if fd < 0:
        return False  # closed on our side meanwhile (another task): no packet to speak of
    poller = select.poll()
    poller.register(fd, select.POLLRDHUP)
    return not any(ev & (select.POLLRDHUP | select.POLLHUP) for _, ev in poller.poll(0))


def _received(data: bytes, anc, flags: int, fd: int | None = None) -> Packet:
    """The packet recvmsg returned; TransportClosed for the peer's end of stream.

    An empty packet (see :func:`_peer_may_send`) comes back as a packet with no
    bytes: the protocol layer refuses it as what it is (``E_PROTO``, empty packet).
    """
    pkt = _unpack(data, anc, flags)
    if not data and not pkt.fds and not pkt.truncated:
        if fd is not None and _peer_may_send(fd):
            return pkt
        raise TransportClosed("peer closed the connection")
    return pkt


def send_packet_blocking(sock: socket.socket, data: bytes, fds=()) -> None:
    try:
        sock.sendmsg([data], _ancillary(fds))
    except OSError as e:
        err = _translated(e)
        if err is e:
            raise
        raise err from None


class BlockingPacketChannel:
    """A connected SEQPACKET socket for blocking code (the blocking client, tests)."""

    def __init__(self, sock: socket.socket, max_bytes: int = 65536, max_fds: int = 8):
        self.sock = sock
        self.max_bytes = max_bytes
        self.max_fds = max_fds

    @classmethod
    def connect(cls, path: str, **kw) -> "BlockingPacketChannel":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            s.connect(path)
        except BaseException:
            s.close()
            raise
        return cls(s, **kw)

    def send(self, data: bytes, fds=()) -> None:
        send_packet_blocking(self.sock, data, fds)

    def try_send(self, data: bytes, fds=()) -> bool:
        """Send without blocking; False when the socket's send buffer is full (nothing was sent).

        A blocking client that must keep reading while it waits to send (so that
        neither side can block the other with full buffers) polls with this.
        """
        self.sock.settimeout(0.0)
        try:
            send_packet_blocking(self.sock, data, fds)
        except BlockingIOError:
            return False
        return True

    def receive(self, timeout: float | None = None) -> Packet:
        self.sock.settimeout(timeout)
        return recv_packet_blocking(self.sock, self.max_bytes, self.max_fds)

    def close(self) -> None:
        self.sock.close()


class TrioPacketChannel:
    """A connected SEQPACKET socket for trio tasks (daemon and async client)."""

    def __init__(self, sock, max_bytes: int = 65536, max_fds: int = 8):
        self.sock = sock  # a trio.socket.SocketType
        self.max_bytes = max_bytes
        self.max_fds = max_fds

    @classmethod
    async def connect(cls, path: str, **kw) -> "TrioPacketChannel":
        import trio

        s = trio.socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            await s.connect(path)
        except BaseException:
            s.close()
            raise
        return cls(s, **kw)

    async def send(self, data: bytes, fds=()) -> None:
        try:
            await self.sock.sendmsg([data], _ancillary(fds))
        except OSError as e:
            err = _translated(e)
            if err is e:
                raise
            raise err from None

    async def receive(self) -> Packet:
        try:
            data, anc, flags, _ = await self.sock.recvmsg(
                self.max_bytes, ancillary_size(self.max_fds), socket.MSG_CMSG_CLOEXEC
            )
            fd = self.sock.fileno()
        except OSError as e:
            err = _translated(e)
            if err is e:
                raise
            raise err from None
        return _received(data, anc, flags, fd)

    def close(self) -> None:
        self.sock.close()


def open_fd_count() -> int:
    """Open fds of this process (tests compare before/after)."""
    return len(os.listdir("/proc/self/fd")) - 1  # minus the listdir's own fd
