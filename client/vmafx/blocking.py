"""The blocking client of vmafxd: the async client's surface for code without an event loop.

::

    with BlockingClient.connect("/run/vmafx/vmafxd.sock") as client:
        ref_h = client.register_buffer(ref_buf)
        dist_h = client.register_buffer(dist_buf)
        session = client.open_session(width=576, height=324, pixel_format="yuv420p")
        session.submit(0, ref_h, dist_h)
        summary = session.close()
        for r in session.results():
            print(r.index, r.metrics["vmaf"])

It needs no thread and no trio: the protocol core is sans-I/O
(:class:`~vmafx.tracking.ClientTracker`), so every blocking call simply reads
and applies the daemon's packets until its own condition holds -- a reply
with its seq, a free frame slot, a buffer released, the next outcome.
Messages for other calls are applied on the way and queued, exactly as the
async client's receive task does.  ``on_released`` callbacks therefore run
inside whichever blocking call happens to read the ``released``;
:meth:`BlockingClient.poll` reads what has already arrived without waiting.

Every blocking call takes ``timeout`` (seconds, None: wait forever) and raises
:class:`TimeoutError` when it runs out; the connection stays usable.

Sending never blocks blindly: while the socket's send buffer is full the
client keeps reading, so a daemon that is itself waiting to send to us cannot
deadlock the two (both sides' buffers full, both blocked in send).
"""

from __future__ import annotations

import os
import select
import time
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from .defaults import REASON_WAIT_S, SEND_TIMEOUT_S, default_socket_path
from .exceptions import DaemonUnavailable, VmafxError
from .protocol import messages as m
from .protocol.errors import RemoteProtocolError
from .tracking import BufferView, ClientTracker, ClientView, FrameResult, SessionView, Summary
from .transport import BlockingPacketChannel, ClosedOnExit, ConnectionReset, TransportClosed

if TYPE_CHECKING:  # numpy's import is for the callers that make frames, not for `vmafxctl status`
    from .frames import FrameBuffer

__all__ = ["BlockingClient", "BlockingSession", "BlockingBufferHandle"]


class _Deadline:
    def __init__(self, timeout: float | None):
        self.end = None if timeout is None else time.monotonic() + timeout

    def remaining(self) -> float | None:
        if self.end is None:
            return None
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the blocking call timed out")
        return left


class BlockingBufferHandle(BufferView):
    """A registered buffer (see :class:`vmafx.client.BufferHandle`)."""

    def wait_released(self, timeout: float | None = None) -> None:
        """Return once every frame submitted with this buffer has released it (now, if none)."""
        self._client._wait_for(lambda: not self._state.busy, timeout)


class BlockingSession(SessionView):
    """A scoring session (see :class:`vmafx.client.Session`)."""

    def submit(self, index: int, ref: BlockingBufferHandle, dist: BlockingBufferHandle, ref_fence=None,
               dist_fence=None, *, timeout: float | None = None) -> None:
        """Send frame ``index``; blocks (reading replies) while the frames in flight are at the limit."""
        c = self._client
        deadline = _Deadline(timeout)
        st = self._state
        c._wait_for(lambda: c._tracker.can_submit(st), deadline=deadline)
        data, fds = c._tracker.submit(self._state, index, ref._state, dist._state, ref_fence, dist_fence)
        c._send(data, fds)

    def submit_many(self, frames: Sequence[tuple], *, timeout: float | None = None) -> None:
        """Send ``frames``, each ``(index, ref, dist[, ref_fence[, dist_fence]])``, in as few packets
        as the daemon takes (see :meth:`vmafx.client.Session.submit_many`); blocks (reading
        replies) while the frames in flight are at the limit.  Every frame is checked before the
        first packet leaves."""
        c = self._client
        deadline = _Deadline(timeout)
        st = self._state
        frames = c._tracker.check_frames(st, frames)
        while frames:
            c._wait_for(lambda: c._tracker.can_submit(st), deadline=deadline)
            n, data, fds = c._tracker.submit_packet(st, frames[:c._tracker.room(st)])
            c._send(data, fds)
            frames = frames[n:]

    def results(self, timeout: float | None = None) -> Iterator[FrameResult]:
        """Outcomes in index order; ends after the session closed and all were taken.

        ``timeout`` bounds the wait for each next outcome.
        """
        while True:
            yield from self._arrived()
            if self._state.closed:
                return
            self._client._pump(_Deadline(timeout))

    def close(self, timeout: float | None = None) -> Summary:
        """Close the session; returns the pooled summary once every outcome arrived."""
        st = self._state
        c = self._client
        deadline = _Deadline(timeout)
        if st.summary is None and st.close_seq is None:
            c._request(lambda: c._tracker.close_request(st), deadline)
        c._wait_for(lambda: st.summary is not None, deadline=deadline)
        return st.summary  # type: ignore[return-value]


class BlockingClient(ClosedOnExit, ClientView):
    """A connection to vmafxd for blocking code.  Use as ``with BlockingClient.connect(path) as client``."""

    def __init__(self, channel: BlockingPacketChannel, tracker: ClientTracker):
        self._chan = channel
        self._tracker = tracker
        self._closed = False

    @classmethod
    def connect(cls, path: str | None = None, *, name: str | None = None,
                timeout: float | None = 30.0) -> "BlockingClient":
        """Connect to ``path`` (default ``$VMAFX_SOCKET`` or /run/vmafx/vmafxd.sock) and do the hello."""
        path = path or default_socket_path()
        try:
            chan = BlockingPacketChannel.connect(path)
        except OSError as e:
            raise DaemonUnavailable(path, e) from e
        client = cls(chan, ClientTracker(name or f"vmafx-{os.getpid()}"))
        try:
            client._request(lambda: (*client._tracker.hello(), ()), _Deadline(timeout))
        except BaseException:
            client.close()
            raise
        chan.max_bytes = max(chan.max_bytes, client._tracker.limits.max_message_bytes)
        return client

    def close(self) -> None:
        """Close the connection (the daemon then closes this client's sessions and buffers).  Safe twice."""
        self._close_channel()

    # -- requests ----------------------------------------------------------------------

    def register_buffer(self, buf: FrameBuffer, *, timeout: float | None = None) -> BlockingBufferHandle:
        reply = self._request(lambda: self._tracker.register_request(buf), _Deadline(timeout))
        return BlockingBufferHandle(self, self._tracker.registered(reply), buf)

    def unregister_buffer(self, handle: BlockingBufferHandle, *, timeout: float | None = None) -> None:
        self._request(lambda: self._tracker.request(lambda seq: m.UnregisterBuffer(seq=seq, buffer=handle.id)),
                      _Deadline(timeout))

    def open_session(self, *, width: int, height: int, pixel_format: str = "yuv420p", bitdepth: int = 8,
                     models: Sequence[str] = (), features: Sequence[str] = (), lane: str = "auto",
                     device: int | None = None, name: str | None = None,
                     timeout: float | None = None) -> BlockingSession:
        pixel_format = getattr(pixel_format, "value", pixel_format)
        geo = dict(width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
        reply = self._request(lambda: self._tracker.open_request(
            models=models, features=features, lane=lane, device=device, name=name, **geo), _Deadline(timeout))
        return BlockingSession(self, self._tracker.opened(reply, **geo))

    @property
    def scores_files(self) -> bool:
        """The daemon takes ``score_files`` (it said so in its hello_reply)."""
        return self._tracker.conn.score_files

    def score_files(self, reference: int, distorted: int, *, models: Sequence[str] = (),
                    features: Sequence[str] = (), model_texts: Sequence[str | None] = (), lane: str = "auto",
                    device: int | None = None, max_frames: int | None = None, width: int | None = None,
                    height: int | None = None, pixel_format: str | None = None, bitdepth: int | None = None,
                    timeout: float | None = None) -> tuple[m.FilesScored, list[dict]]:
        """:meth:`vmafx.client.Client.score_files`, blocking: the ``files_scored`` reply and every
        scored frame's metrics, in order."""
        req = dict(models=models, features=features, model_texts=model_texts, lane=lane, device=device,
                   max_frames=max_frames, width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
        reply = self._request(lambda: self._tracker.files_request(reference, distorted, **req), _Deadline(timeout))
        return reply, self._tracker.files_frames(reply.re)

    def status(self, *, timeout: float | None = None) -> dict:
        reply = self._request(lambda: self._tracker.request(lambda seq: m.Status(seq=seq)), _Deadline(timeout))
        return dict(reply.status)

    def list_sessions(self, *, timeout: float | None = None) -> list[dict]:
        reply = self._request(lambda: self._tracker.request(lambda seq: m.ListSessions(seq=seq)), _Deadline(timeout))
        return [dict(s) for s in reply.sessions]

    def poll(self) -> None:
        """Apply every packet that has already arrived (runs ``on_released`` callbacks); never waits."""
        self._tracker.check_usable()
        while select.select([self._chan.sock], [], [], 0)[0]:
            self._pump(_Deadline(None))

    # -- machinery ------------------------------------------------------------------------

    def _request(self, encode, deadline: _Deadline) -> m.Message:
        seq, data, fds = encode()
        try:
            self._send(data, fds)
            while True:
                reply = self._tracker.reply(seq)
                if reply is not None:
                    return reply
                self._pump(deadline)
        except BaseException:
            self._tracker.abandon(seq)
            raise

    def _wait_for(self, ready: Callable[[], bool], timeout: float | None = None, *,
                  deadline: _Deadline | None = None) -> None:
        deadline = deadline or _Deadline(timeout)
        self._tracker.check_usable()
        while not ready():
            self._pump(deadline)

    def _send(self, data: bytes, fds) -> None:
        """Send one packet the tracker has already booked (see vmafx.client.Client._send).

        The caller's timeout does not apply here -- a booked packet that never left
        would leave the books wrong -- but the send is bounded: a daemon that takes no
        packet for SEND_TIMEOUT_S loses the connection.
        """
        self._tracker.check_usable()
        deadline = _Deadline(SEND_TIMEOUT_S)
        try:
            while not self._chan.try_send(data, fds):
                # The send buffer is full: keep reading while we wait, so the daemon
                # (perhaps blocked sending to us) can make progress.
                readable, _, _ = select.select([self._chan.sock], [self._chan.sock], [], deadline.remaining())
                if readable:
                    self._pump(deadline)
        except TimeoutError:
            self._chan.close()
            raise self._tracker.lost(f"the daemon took no packet for {SEND_TIMEOUT_S:.0f} s") from None
        except (TransportClosed, OSError) as e:
            self._read_the_reason()
            raise self._tracker.lost(f"sending failed: {e}") from None

    def _read_the_reason(self) -> None:
        """A send failed: the daemon closed the connection, perhaps after saying why (a fatal
        error, its goodbye).  What it sent is read and applied -- to the end of the stream, for at
        most REASON_WAIT_S -- so the caller gets that reason, not the socket's EPIPE."""
        deadline = _Deadline(REASON_WAIT_S)
        try:
            while self._tracker.failure is None and self._tracker.goodbye is None:
                self._pump(deadline)
        except (TimeoutError, VmafxError):
            pass  # the deadline, or the end of the stream (the tracker keeps the first reason)

    def _pump(self, deadline: _Deadline) -> None:
        """Read and apply one packet; TimeoutError when the deadline passes first."""
        self._tracker.check_usable()
        while True:
            try:
                pkt = self._chan.receive(deadline.remaining())
                break
            except ConnectionReset:
                # The daemon closed with packets of ours unread; what it sent before
                # (its goodbye, the last results) is still queued: read on to EOF.
                continue
            except TimeoutError:
                raise TimeoutError("the blocking call timed out") from None
            except (TransportClosed, OSError) as e:
                self._chan.close()
                raise self._tracker.lost(f"the daemon closed the connection ({e})") from None
        try:
            self._tracker.receive(pkt.data, len(pkt.fds), pkt.truncated)
        except RemoteProtocolError as e:
            self._chan.close()
            raise self._tracker.violated(e) from None
        finally:
            pkt.close_fds()
