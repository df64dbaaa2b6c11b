"""The async (trio) client of vmafxd.

::

    async with await Client.connect("/run/vmafx/vmafxd.sock") as client:
        ref_h = await client.register_buffer(ref_buf)      # vmafx.frames.FrameBuffer
        dist_h = await client.register_buffer(dist_buf)
        session = await client.open_session(width=576, height=324, pixel_format="yuv420p")
        await session.submit(0, ref_h, dist_h)
        summary = await session.close()
        async for r in session.results():                   # in index order
            print(r.index, r.metrics["vmaf"])

:meth:`Client.connect` opens the socket and does the hello (the daemon's
limits, lanes, features and models are then on ``client.info``); entering
``async with`` starts the one background task that receives everything the
daemon sends, in a nursery the client owns, and leaving it cancels that task
and closes the socket.  :func:`open_client` does both in one ``async with``.

Frames are pipelined: :meth:`Session.submit` returns as soon as the packet is
sent, and waits -- back-pressure, not an error -- while the client has the
daemon's ``max_frames_in_flight`` frames unanswered.  Outcomes are queued per
session, so submitting everything first and reading results afterwards
works; so does a consumer task reading :meth:`Session.results` while a
producer task submits.  A failed frame is a :class:`FrameResult` with
``error`` set (see :mod:`vmafx.tracking` for why it is not an exception).

Producers reuse buffers: ``await handle.wait_released()`` returns once every
submitted frame that references the buffer has been released by the daemon,
and ``handle.on_released(callback)`` calls back at that moment instead.
Releases are independent of results: one may arrive before its frame's
result or after the session's summary, so wait for them, not for results.

All protocol state lives in the sans-I/O :class:`~vmafx.tracking.ClientTracker`;
this module only moves packets and wakes waiters.  Every state change comes
from the receive task, after which it unparks every waiter, and each waiter
re-checks its own condition -- one simple rule instead of an event per frame.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Sequence

import trio

from .defaults import DEFAULT_SOCKET, REASON_WAIT_S, SEND_TIMEOUT_S, default_socket_path
from .exceptions import DaemonUnavailable
from .frames import FrameBuffer
from .protocol import messages as m
from .protocol.errors import RemoteProtocolError
from .tracking import BufferView, ClientTracker, ClientView, FrameResult, SessionView, Summary
from .transport import ConnectionReset, TrioPacketChannel, TransportClosed

__all__ = ["Client", "Session", "BufferHandle", "open_client", "DEFAULT_SOCKET", "default_socket_path"]

class BufferHandle(BufferView):
    """A registered buffer: its daemon-side id and its outstanding frame references."""

    async def wait_released(self) -> None:
        """Return once every frame submitted with this buffer has released it (now, if none)."""
        await self._client._wait_for(lambda: not self._state.busy)


class Session(SessionView):
    """A scoring session: one geometry, its models and features, frames in index order."""

    async def submit(self, index: int, ref: BufferHandle, dist: BufferHandle, ref_fence=None, dist_fence=None) -> None:
        """Send frame ``index`` (strictly increasing).  Waits while the client's frames in flight are at the
        limit, or the session's (what the daemon's byte budgets hold, ``session_opened``'s ``max_frames_in_flight``).

        Fences (:class:`vmafx.frames.EventFdFence`, :class:`~vmafx.frames.SyncFileFence`)
        stay the caller's: the daemon gets duplicates of their fds.
        """
        c = self._client
        st = self._state
        await c._wait_for(lambda: c._tracker.can_submit(st))
        async with c._send_lock:
            # Encode and send under one lock so packets leave in ledger order even with
            # several producer tasks; re-check the limit, another task may have taken the
            # slot.  Waiting here with the lock held cannot deadlock: only the receive
            # task frees slots, and it never takes the send lock.
            while not c._tracker.can_submit(st):
                await c._changed()
            data, fds = c._tracker.submit(self._state, index, ref._state, dist._state, ref_fence, dist_fence)
            await c._send(data, fds)

    async def submit_many(self, frames: Sequence[tuple]) -> None:
        """Send ``frames``, each ``(index, ref, dist[, ref_fence[, dist_fence]])`` as :meth:`submit`
        takes them, in as few packets as the daemon takes (``submit_many``: up to its
        ``max_frames_per_submit`` frames and ``max_fds_per_message`` fence fds a packet; one
        ``submit`` each with an older daemon).  Each packet holds as many frames as the limits on
        frames in flight let go now; it waits, as :meth:`submit` does, for room for the rest.

        Every frame is checked before the first packet leaves: a bad one (an index that does
        not increase, an unregistered buffer) raises and nothing is sent.
        """
        c = self._client
        st = self._state
        frames = c._tracker.check_frames(st, frames)
        while frames:
            await c._wait_for(lambda: c._tracker.can_submit(st))
            async with c._send_lock:
                while not c._tracker.can_submit(st):  # another task may have taken the room
                    await c._changed()
                n, data, fds = c._tracker.submit_packet(st, frames[:c._tracker.room(st)])
                await c._send(data, fds)
            frames = frames[n:]

    async def results(self) -> AsyncIterator[FrameResult]:
        """Outcomes in index order, as they arrive; ends after the session closed and all were taken.

        Raises :class:`~vmafx.exceptions.ConnectionClosed` if the connection goes
        away before the session closed.
        """
        c = self._client
        while True:
            for r in self._arrived():
                yield r
            if self._state.closed:
                return
            c._tracker.check_usable()
            await c._changed()

    async def close(self) -> Summary:
        """Ask the daemon to close the session; returns the pooled summary once every outcome arrived.

        Outcomes not yet read stay available to :meth:`results`.
        """
        st = self._state
        if st.summary is not None:
            return st.summary
        c = self._client
        if st.close_seq is None:
            reply = await c._request(lambda: c._tracker.close_request(st))
        else:
            # Someone else already asked: wait for the same summary.
            await c._wait_for(lambda: st.summary is not None)
            reply = None
        assert st.summary is not None or isinstance(reply, m.SessionClosed)
        return st.summary  # type: ignore[return-value]


class Client(ClientView):
    """A connection to vmafxd.  Use as ``async with await Client.connect(path) as client``."""

    def __init__(self, channel: TrioPacketChannel, tracker: ClientTracker):
        self._chan = channel
        self._tracker = tracker
        self._send_lock = trio.StrictFIFOLock()
        self._lot = trio.lowlevel.ParkingLot()
        self._nursery: trio.Nursery | None = None
        self._receiving = False
        self._closed = False

    # -- connecting ---------------------------------------------------------------

    @classmethod
    async def connect(cls, path: str | None = None, *, name: str | None = None) -> "Client":
        """Connect to ``path`` (default ``$VMAFX_SOCKET`` or /run/vmafx/vmafxd.sock) and do the hello."""
        path = path or default_socket_path()
        tracker = ClientTracker(name or f"vmafx-{os.getpid()}")
        try:
            chan = await TrioPacketChannel.connect(path)
        except OSError as e:
            raise DaemonUnavailable(path, e) from e
        try:
            seq, data = tracker.hello()
            # Nothing else is in flight yet, so the hello is answered inline, before
            # the receive task exists.
            await chan.send(data)
            while True:
                try:
                    pkt = await chan.receive()
                except ConnectionReset:
                    continue  # the daemon closed with our hello unread; its answer (a refusal) is still queued
                try:
                    tracker.receive(pkt.data, len(pkt.fds), pkt.truncated)
                finally:
                    pkt.close_fds()
                reply = tracker.reply(seq)
                if reply is not None:
                    break
        except TransportClosed as e:
            chan.close()
            raise tracker.lost(f"the daemon at {path} closed the connection during hello ({e})") from None
        except RemoteProtocolError as e:
            chan.close()
            raise tracker.violated(e) from None
        except BaseException:
            chan.close()
            raise
        # The daemon's packets are bounded by the limit it announced, not by our default.
        chan.max_bytes = max(chan.max_bytes, tracker.limits.max_message_bytes)
        return cls(chan, tracker)

    async def __aenter__(self) -> "Client":
        if self._nursery is not None or self._closed:
            raise RuntimeError("a Client is entered once")
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._receiving = True
        self._nursery.start_soon(self._receive_loop)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool | None:
        self._close_now()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_cm.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The body of ``async with client`` runs inside our nursery, so trio's strict
            # exception groups would hand the caller ExceptionGroup([ValueError]) for a
            # plain ValueError of their own.  The receive task never raises (it turns every
            # failure into the connection's state), so a group holding only the body's
            # exception goes back unwrapped; anything else (a raising on_released
            # callback) stays a group.
            if exc is None or any(e is not exc for e in group.exceptions):
                raise
        raise exc

    def _close_now(self) -> None:
        if self._close_channel():
            self._lot.unpark_all()

    # -- requests ------------------------------------------------------------------

    async def register_buffer(self, buf: FrameBuffer) -> BufferHandle:
        """Register ``buf`` once; reference the handle in every submit.  ``buf`` stays the caller's."""
        reply = await self._request(lambda: self._tracker.register_request(buf))
        return BufferHandle(self, self._tracker.registered(reply), buf)

    async def unregister_buffer(self, handle: BufferHandle) -> None:
        """Answered once no frame in flight references the buffer."""
        await self._request(lambda: self._tracker.request(lambda seq: m.UnregisterBuffer(seq=seq, buffer=handle.id)))

    async def open_session(self, *, width: int, height: int, pixel_format: str = "yuv420p", bitdepth: int = 8,
                           models: Sequence[str] = (), features: Sequence[str] = (), lane: str = "auto",
                           device: int | None = None, name: str | None = None,
                           model_texts: Sequence[str | None] = ()) -> Session:
        """``models``/``features`` use ``vmafxctl score``'s syntax; none at all means vmaf_v0.6.1.

        ``model_texts[i]`` is the JSON of ``models[i]``'s ``path=`` file, read by the caller
        (the daemon opens no client path; see docs/protocol.md)."""
        pixel_format = getattr(pixel_format, "value", pixel_format)
        geo = dict(width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
        reply = await self._request(lambda: self._tracker.open_request(
            models=models, features=features, lane=lane, device=device, name=name,
            model_texts=model_texts, **geo))
        return Session(self, self._tracker.opened(reply, **geo))

    @property
    def scores_files(self) -> bool:
        """The daemon takes ``score_files`` (it said so in its hello_reply)."""
        return self._tracker.conn.score_files

    async def score_files(self, reference: int, distorted: int, *, models: Sequence[str] = (),
                          features: Sequence[str] = (), model_texts: Sequence[str | None] = (),
                          lane: str = "auto", device: int | None = None, max_frames: int | None = None,
                          width: int | None = None, height: int | None = None, pixel_format: str | None = None,
                          bitdepth: int | None = None) -> tuple[m.FilesScored, list[dict]]:
        """Have the daemon score two uncompressed files the caller opened (``reference`` and
        ``distorted`` are fds, sent with the request and still the caller's after): y4m, or raw
        when ``width``/``height``/``pixel_format`` (and ``bitdepth``) are given.  Returns the
        ``files_scored`` reply and every scored frame's metrics, in order.  Raises the daemon's
        error (``E_NOTSUP`` from a daemon that does not take it)."""
        req = dict(models=models, features=features, model_texts=model_texts, lane=lane, device=device,
                   max_frames=max_frames, width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
        reply = await self._request(lambda: self._tracker.files_request(reference, distorted, **req))
        return reply, self._tracker.files_frames(reply.re)

    async def status(self) -> dict:
        reply = await self._request(lambda: self._tracker.request(lambda seq: m.Status(seq=seq)))
        return dict(reply.status)

    async def list_sessions(self) -> list[dict]:
        reply = await self._request(lambda: self._tracker.request(lambda seq: m.ListSessions(seq=seq)))
        return [dict(s) for s in reply.sessions]

    # -- machinery -------------------------------------------------------------------

    def _check_running(self) -> None:
        self._tracker.check_usable()
        if not self._receiving:
            raise RuntimeError("enter the client first: async with await Client.connect(path) as client")

    async def _send(self, data: bytes, fds=()) -> None:
        # By the time a packet is sent the tracker has already booked it (a submit is in
        # the frame ledger, a close marks its session closing); a packet that never left
        # would leave the books wrong for good.  So the send is shielded from the caller's
        # cancellation -- and bounded, so a daemon that stopped reading cannot hold a
        # cancelled caller forever; if it runs out, the connection is given up instead.
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + SEND_TIMEOUT_S
            try:
                await self._chan.send(data, fds)
            except (TransportClosed, trio.ClosedResourceError, OSError) as e:
                await self._read_the_reason()
                exc = self._tracker.lost(f"sending failed: {e}")
                self._lot.unpark_all()
                raise exc from None
        if scope.cancelled_caught:
            exc = self._tracker.lost(f"the daemon took no packet for {SEND_TIMEOUT_S:.0f} s")
            self._chan.close()
            self._lot.unpark_all()
            raise exc

    async def _read_the_reason(self) -> None:
        """A send failed: the daemon closed the connection, perhaps after saying why (a fatal
        error, its goodbye).  The receive task reads on to the end of the stream; wait for it, at
        most REASON_WAIT_S, so the caller gets that reason rather than the socket's EPIPE."""
        tracker = self._tracker
        with trio.move_on_after(REASON_WAIT_S):
            while self._receiving and tracker.failure is None and tracker.goodbye is None:
                await self._lot.park()

    async def _request(self, encode) -> m.Message:
        """Encode (under the send lock, so seqs leave in order), send, wait for the reply."""
        self._check_running()
        async with self._send_lock:
            seq, data, fds = encode()
            await self._send(data, fds)
        try:
            while True:
                reply = self._tracker.reply(seq)
                if reply is not None:
                    return reply
                await self._changed()
        except BaseException:
            self._tracker.abandon(seq)
            raise

    async def _changed(self) -> None:
        """Sleep until the receive task applied the next message (or the connection ended)."""
        self._tracker.check_usable()
        await self._lot.park()

    async def _wait_for(self, ready: Callable[[], bool]) -> None:
        self._check_running()
        while not ready():
            await self._changed()

    async def _receive_loop(self) -> None:
        tracker = self._tracker
        try:
            while True:
                try:
                    pkt = await self._chan.receive()
                except ConnectionReset:
                    # The daemon closed with packets of ours unread; what it sent before
                    # (its goodbye, the last results) is still queued: read on to EOF.
                    continue
                except (TransportClosed, OSError) as e:
                    tracker.lost(f"the daemon closed the connection ({e})")
                    return
                except trio.ClosedResourceError:
                    return  # we closed it
                try:
                    tracker.receive(pkt.data, len(pkt.fds), pkt.truncated)
                except RemoteProtocolError as e:
                    tracker.violated(e)
                    self._chan.close()
                    return
                finally:
                    pkt.close_fds()
                    self._lot.unpark_all()
        finally:
            self._receiving = False
            self._lot.unpark_all()  # a send that failed waits for the reason (_read_the_reason)
            self._lot.unpark_all()


@asynccontextmanager
async def open_client(path: str | None = None, *, name: str | None = None) -> AsyncIterator[Client]:
    """``async with open_client(path) as client``: connect, hello, receive task, close."""
    client = await Client.connect(path, name=name)
    async with client:
        yield client
