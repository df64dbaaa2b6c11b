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

from collections import deque

import trio

from vmafx.protocol.codec import bundle
from vmafx.transport import TransportClosed, TrioPacketChannel

__all__ = ["OutgoingQueue"]


class OutgoingQueue:
    """A deque and a wake-up, not a trio memory channel: ``put`` runs for every message the
    daemon sends (three a frame), and the channel's send and receive were a measurable share of
    the trio thread's time per frame."""

    def __init__(self, bound: int):
        self.bound = bound
        self._queue: deque[bytes] = deque()
        #: set when a packet is queued (or the queue closed) while the sender waits
        self._wakeup = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._pending = 0
        #: bytes of the packets in the queue (a wake-up's bundle takes them all when they fit)
        self._bytes = 0
        self.sent = 0
        self.dropped = 0
        self.closed = False
        #: the sender ended (the peer went away): what is put now is dropped
        self._ended = False
        #: 0: one message per packet; else the largest bundle packet, in bytes
        self.bundle_bytes = 0

    def put(self, data: bytes) -> bool:
        """Queue a packet.  False when the queue is full (the client is not reading)."""
        if self.closed or self._ended:
            self.dropped += 1
            return True
        q = self._queue
        if len(q) >= self.bound:
            self.dropped += 1
            return False
        q.append(data)
        self._bytes += len(data)
        self._pending += 1
        if len(q) == 1:  # it was empty: the sender may be waiting, and nothing is idle any more
            self._wakeup.set()
            if self._idle.is_set():
                self._idle = trio.Event()
        return True

    def put_many(self, packets: tuple[bytes, ...] | list[bytes]) -> bool:
        """Queue several packets at once (a run of a session's results or releases): as
        :meth:`put` for each, in order.  False when they would overflow the queue (the client is
        not reading; nothing of them is queued then)."""
        if self.closed or self._ended:
            self.dropped += len(packets)
            return True
        q = self._queue
        n = len(packets)
        if len(q) + n > self.bound:
            self.dropped += n
            return False
        was_empty = not q
        q.extend(packets)
        self._bytes += sum(map(len, packets))
        self._pending += n
        if was_empty and n:  # the sender may be waiting, and nothing is idle any more
            self._wakeup.set()
            if self._idle.is_set():
                self._idle = trio.Event()
        return True

    @property
    def pending(self) -> int:
        """Packets queued and not yet sent."""
        return self._pending

    def close(self) -> None:
        """Refuse more; what is queued still goes out, then the sender returns."""
        self.closed = True
        self._wakeup.set()

    async def flushed(self) -> None:
        """Wait until everything queued so far has been sent."""
        await self._idle.wait()

    async def run(self, channel: TrioPacketChannel) -> None:
        """Send until the queue is closed and empty or the peer goes away (then return quietly)."""
        q = self._queue
        try:
            while True:
                while not q:
                    if self.closed:
                        return
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
                data = q.popleft()
                self._bytes -= len(data)
                count = 1
                if self.bundle_bytes and q:
                    if len(q) < 0xFFFF and self._bytes + len(data) + 3 <= self.bundle_bytes:
                        # all of it fits one bundle (the common case): taken at once
                        parts = [data]
                        parts.extend(q)
                        q.clear()
                        self._bytes = 0
                    else:
                        parts, size = [data], len(data) + 3
                        while q and len(parts) < 0xFFFF:
                            if size + len(q[0]) > self.bundle_bytes:
                                break  # the rest goes in the next packet
                            more = q.popleft()
                            self._bytes -= len(more)
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
            self._ended = True
            self._pending -= len(q)
            self.dropped += len(q)
            q.clear()
            self._bytes = 0
            self._idle.set()
