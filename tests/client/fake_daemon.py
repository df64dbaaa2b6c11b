"""A scriptable stand-in daemon for the client library's own tests.

It speaks the protocol through the real sans-I/O core (ServerConnection) and
the real transport, maps the memfds it receives and "scores" a frame as the
sums of its luma planes (``ref_sum``, ``dist_sum``) -- enough to tell which
buffer content the daemon saw.  Unlike the real daemon it can be told to
misbehave (reorder outcomes, release twice, name the wrong buffer) and to
hold frames back, which is what the client's promise checks and back-pressure
need.  End-to-end tests use the real vmafxd instead.
"""

from __future__ import annotations

import mmap
import socket
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import trio

from vmafx.protocol import messages as m
from vmafx.protocol.errors import RemoteProtocolError
from vmafx.protocol.limits import Limits
from vmafx.protocol.state import ServerConnection
from vmafx.transport import TrioPacketChannel, TransportClosed


@dataclass
class _Buf:
    msg: m.RegisterBuffer
    view: np.ndarray
    mm: mmap.mmap

    def luma_sum(self) -> int:
        p = self.msg.planes[0]
        bps = 1 if self.msg.bitdepth == 8 else 2
        rows = np.lib.stride_tricks.as_strided(self.view[p.offset:], shape=(self.msg.height, self.msg.width * bps),
                                               strides=(p.pitch, 1))
        return int(rows.astype(np.uint64).sum())


@dataclass
class FakeDaemon:
    limits: Limits = field(default_factory=lambda: Limits(max_frames_in_flight=4))
    #: frames wait for this before they are answered (tests open it to let them through)
    gate: trio.Event = field(default_factory=trio.Event)
    #: (session, index, outgoing messages) -> messages to send instead (misbehaviour)
    rewrite: Callable[[int, int, list], list] | None = None
    fence_timeout: float = 0.5
    max_seen_in_flight: int = 0
    submits: list = field(default_factory=list)
    connections: int = 0
    #: say yes to a hello asking for submit_many (the default is an older daemon's silence)
    submit_many: bool = False
    #: frames per submit packet received, in order
    packets: list = field(default_factory=list)

    async def idle(self) -> None:
        """Wait until every connection has been torn down (its fds and mappings released)."""
        with trio.fail_after(5):
            while self.connections:
                await trio.sleep(0.01)

    def __post_init__(self):
        self.gate.set()

    async def serve(self, path: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        await listener.bind(path)
        listener.listen(16)
        task_status.started()
        with listener:
            async with trio.open_nursery() as nursery:
                while True:
                    conn, _ = await listener.accept()
                    nursery.start_soon(self._connection, TrioPacketChannel(conn))

    async def _connection(self, chan: TrioPacketChannel) -> None:
        self.connections += 1
        sc = ServerConnection(self.limits, "fake-vmafxd")
        buffers: dict[int, _Buf] = {}
        queues: dict[int, trio.MemorySendChannel] = {}
        in_flight = [0]
        send_lock = trio.Lock()

        async def send(msg):
            async with send_lock:
                data, fds = sc.send(msg)
                try:
                    await chan.send(data, fds)
                except (TransportClosed, trio.ClosedResourceError):
                    pass  # the client went away; its receive loop ends the connection

        async def session_worker(sid: int, recv: trio.MemoryReceiveChannel):
            frames = failed = 0
            async for item in recv:
                if isinstance(item, m.CloseSession):
                    await send(m.SessionClosed(re=item.seq, session=sid, frames=frames, failed=failed,
                                               pooled={"ref_sum": {"mean": 1.0}}, aggregate={}))
                    return
                msg, fences = item
                await self.gate.wait()
                out: list = [m.Released(buffer=msg.ref, session=sid, index=msg.index, role="ref"),
                             m.Released(buffer=msg.dist, session=sid, index=msg.index, role="dist")]
                error = None
                for role, fence in fences:
                    with trio.move_on_after(self.fence_timeout) as scope:
                        await trio.lowlevel.wait_readable(fence)
                    if scope.cancelled_caught:
                        error = m.FrameError(session=sid, index=msg.index, code="E_TIMEOUT", field=role,
                                             message="the fence did not signal")
                        break
                for _, fence in fences:
                    trio.lowlevel.notify_closing(fence)
                    fence.close()
                if error is None:
                    out.append(m.Result(session=sid, index=msg.index, metrics={
                        "ref_sum": float(buffers[msg.ref].luma_sum()),
                        "dist_sum": float(buffers[msg.dist].luma_sum())}))
                    frames += 1
                else:
                    out.append(error)
                    failed += 1
                if self.rewrite:
                    out = self.rewrite(sid, msg.index, out)
                in_flight[0] -= 1
                for o in out:
                    await send(o)

        try:
            async with trio.open_nursery() as nursery:
                next_id = [1]
                while True:
                    try:
                        pkt = await chan.receive()
                    except (TransportClosed, trio.ClosedResourceError):
                        return
                    try:
                        msg = sc.receive(pkt.data, tuple(f.fileno() for f in pkt.fds),
                                         truncated=pkt.truncated, ctrunc=pkt.ctrunc)
                    except RemoteProtocolError as e:
                        pkt.close_fds()
                        await send(m.Error(code=e.code.value, field=e.field, message=e.message))
                        if e.fatal:
                            return
                        continue
                    if isinstance(msg, m.Hello):
                        await send(m.HelloReply(re=msg.seq, version=1, server="fake-vmafxd",
                                                limits=self.limits.to_wire(), lanes=({"lane": "fake", "devices": []},),
                                                features=("sum",), models=(),
                                                submit_many=True if self.submit_many and msg.submit_many else None))
                    elif isinstance(msg, m.RegisterBuffer):
                        fd = pkt.fds[0]
                        mm = mmap.mmap(fd.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
                        pkt.close_fds()
                        bid = next_id[0]
                        next_id[0] += 1
                        buffers[bid] = _Buf(msg, np.frombuffer(mm, np.uint8), mm)
                        await send(m.BufferRegistered(re=msg.seq, buffer=bid, zero_copy=True))
                    elif isinstance(msg, m.UnregisterBuffer):
                        if buffers.pop(msg.buffer, None) is None:
                            await send(m.Error(re=msg.seq, code="E_NOENT", field="buffer", message="unknown buffer"))
                        else:
                            await send(m.BufferUnregistered(re=msg.seq, buffer=msg.buffer))
                    elif isinstance(msg, m.OpenSession):
                        if msg.width > 4096:
                            await send(m.Error(re=msg.seq, code="E_INVAL", field="width", message="too wide for the fake"))
                            continue
                        sid = next_id[0]
                        next_id[0] += 1
                        s, r = trio.open_memory_channel(1000)
                        queues[sid] = s
                        nursery.start_soon(session_worker, sid, r)
                        await send(m.SessionOpened(re=msg.seq, session=sid, lane="fake", metrics=("ref_sum", "dist_sum")))
                    elif isinstance(msg, (m.Submit, m.SubmitMany)):
                        frames = msg.frames if isinstance(msg, m.SubmitMany) else (msg,)
                        self.packets.append(len(frames))
                        for f in frames:
                            self.submits.append((msg.session, f.index))
                            in_flight[0] += 1
                            self.max_seen_in_flight = max(self.max_seen_in_flight, in_flight[0])
                            fences = []
                            for role in ("ref_fence", "dist_fence"):
                                fence = getattr(f, role)
                                if fence is not None:
                                    fences.append((role, pkt.fds[fence.fd]))
                            queues[msg.session].send_nowait((f, fences))
                    elif isinstance(msg, m.CloseSession):
                        queues.pop(msg.session).send_nowait(msg)
                    elif isinstance(msg, m.Status):
                        await send(m.StatusReply(re=msg.seq, status={"version": "fake", "clients": 1,
                                                                      "frames_scored": len(self.submits)}))
                    elif isinstance(msg, m.ListSessions):
                        await send(m.SessionsReply(re=msg.seq, sessions=tuple({"session": s} for s in queues)))
        finally:
            chan.close()
            for b in buffers.values():
                del b.view
                b.mm.close()
            self.connections -= 1
