"""A client's outgoing packets: a bounded queue and the task that sends them.

Results, releases and replies are produced without awaiting (by the reaper,
by lanes through the trio thread, by request handlers), and a client may
stop reading.  Blocking on its socket must not stall the daemon or other
clients, so every client has its own queue and sender task: only that task
ever waits on that socket.  The queue is bounded; a client that lets it
overflow is not reading and is disconnected (``put`` returns False and the
caller drops the connection).

A client whose hello asked for bundles gets what is queued when the sender
wakes in as few packets as fit (``bundle_bytes`` each): one ``sendmsg`` and
one wake-up of the client for many results and releases.
"""

from __future__ import annotations


import trio

from vmafx.protocol.messages import bundle
from vmafx.transport import TransportClosed, TrioPacketChannel

__all__ = ["OutgoingQueue"]


class OutgoingQueue:
    def __init__(self, bound: int):
        self.bound = bound
        self._send, self._recv = trio.open_memory_channel(bound)
        self._idle = trio.Event()
        self._idle.set()
        self._pending = 0
        self.sent = 0
        self.dropped = 0
        self.closed = False
        #: 0: one message per packet; else the largest bundle packet, in bytes
        self.bundle_bytes = 0

    def put(self, data: bytes) -> bool:
        """Queue a packet.  False when the queue is full (the client is not reading)."""
        if self.closed:
            self.dropped += 1
            return True
        try:
            self._send.send_nowait(data)
        except trio.WouldBlock:
            self.dropped += 1
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.dropped += 1
            return True
        self._pending += 1
        if self._idle.is_set():
            self._idle = trio.Event()
        return True

    @property
    def pending(self) -> int:
        """Packets queued and not yet sent."""
        return self._pending

    def close(self) -> None:
        """Drop whatever is still queued and refuse more (the connection is going)."""
        self.closed = True
        self._send.close()

    async def flushed(self) -> None:
        """Wait until everything queued so far has been sent."""
        await self._idle.wait()

    async def run(self, channel: TrioPacketChannel) -> None:
        """Send until the queue is closed or the peer goes away (then return quietly)."""
        try:
            carry = None
            while True:
                if carry is not None:
                    data, carry = carry, None
                else:
                    try:
                        data = await self._recv.receive()
                    except trio.EndOfChannel:
                        return
                count = 1
                if self.bundle_bytes:
                    parts, size = [data], len(data) + 3
                    while len(parts) < 0xFFFF:
                        try:
                            more = self._recv.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        if size + len(more) > self.bundle_bytes:
                            carry = more
                            break
                        parts.append(more)
                        size += len(more)
                    count = len(parts)
                    if count > 1:
                        data = bundle(parts)
                try:
                    await channel.send(data)
                except (TransportClosed, trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                finally:
                    self._pending -= count
                    if self._pending == 0:
                        self._idle.set()
                self.sent += count
        finally:
            self._idle.set()
            self._recv.close()
