"""A raw protocol client for the daemon tests, built on vmafx.protocol and vmafx.transport only.

Deliberately not the client library (someone else's, and the thing it would
hide is what these tests look at): it speaks the protocol message by
message, keeps the ``ClientConnection`` ledger (exactly one outcome and one
``released`` per role per frame), and can send arbitrary bytes and fds.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from vmafx.formats import PixelFormat, storage_planes
from vmafx.protocol import (
    BufferRegistered, ClientConnection, CloseSession, Error, Fence, FrameError, Hello, Message, OpenSession,
    Plane, RegisterBuffer, Released, ReleasedMany, Result, ResultMany, SessionClosed, SessionOpened, Submit,
    SubmitFrame, SubmitMany, UnregisterBuffer,
)
from vmafx.transport import BlockingPacketChannel

F_ADD_SEALS = 1033
F_SEAL_SHRINK = 0x2
F_SEAL_GROW = 0x4


@dataclass
class FrameBuffer:
    """A memfd holding one frame, as a producer would register it."""

    fd: int
    size: int
    planes: tuple[Plane, ...]
    width: int
    height: int
    pixel_format: str
    bitdepth: int
    #: (offset, pitch, rows, row_bytes) per plane, to rewrite the frame in place
    layout: tuple[tuple[int, int, int, int], ...]

    def write_planes(self, planes: list[np.ndarray]) -> None:
        for (offset, pitch, rows, row_bytes), plane in zip(self.layout, planes):
            raw = np.ascontiguousarray(plane).view(np.uint8).reshape(rows, row_bytes)
            for r in range(rows):
                os.pwrite(self.fd, raw[r].tobytes(), offset + r * pitch)

    def scribble(self, seed: int = 1) -> None:
        """Overwrite the whole buffer with garbage (a producer reusing it)."""
        rng = np.random.default_rng(seed)
        os.pwrite(self.fd, rng.integers(0, 256, self.size, dtype=np.uint8).tobytes(), 0)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def stored_planes(picture, fmt: PixelFormat) -> list[np.ndarray]:
    """A planar Picture's planes as a buffer stores them (ceil-size chroma; NV12/P010 interleaved).

    A Picture's chroma is libvmaf's floor size; at odd sizes the stored planes
    have one more row/column (edge-replicated here: scoring never reads it).
    """
    planes = [np.ascontiguousarray(p) for p in picture.planes]
    if len(planes) == 3 and fmt.subsampling.has_chroma:
        (h, w), (sx, sy) = planes[0].shape, fmt.subsampling.value
        ch, cw = -(-h >> sy), -(-w >> sx)
        planes[1:] = [np.pad(p, ((0, ch - p.shape[0]), (0, cw - p.shape[1])), mode="edge") for p in planes[1:]]
    if fmt is PixelFormat.NV12:
        y, u, v = planes
        uv = np.empty((u.shape[0], u.shape[1] * 2), np.uint8)
        uv[:, 0::2], uv[:, 1::2] = u, v
        return [y, uv]
    if fmt is PixelFormat.P010:
        y, u, v = (p.astype("<u2") << 6 for p in planes)
        uv = np.empty((u.shape[0], u.shape[1] * 2), "<u2")
        uv[:, 0::2], uv[:, 1::2] = u, v
        return [y, uv]
    return planes


def frame_memfd(picture, fmt: PixelFormat | str = PixelFormat.YUV420P, *, pitch_pad: int = 0, seal: bool = True,
                extra: int = 0) -> FrameBuffer:
    """A sealed memfd holding ``picture`` in ``fmt``, with ``pitch_pad`` bytes of padding per row."""
    fmt = PixelFormat(fmt)
    bitdepth = fmt.fixed_bitdepth() or picture.bitdepth
    h, w = picture.luma.shape
    shapes = storage_planes(fmt, w, h, bitdepth)
    layout, offset = [], 0
    for s in shapes:
        pitch = s.row_bytes + pitch_pad
        layout.append((offset, pitch, s.height, s.row_bytes))
        offset += pitch * s.height
    size = offset + extra
    fd = os.memfd_create("vmafx-test-frame", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    buf = FrameBuffer(fd, size, tuple(Plane(0, o, p) for o, p, _, _ in layout), w, h, fmt.value, bitdepth,
                      tuple(layout))
    buf.write_planes(stored_planes(picture, fmt))
    if seal:
        fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)
    return buf


class RawClient:
    def __init__(self, path: str, name: str = "test", *, max_bytes: int = 65536, bundles: bool = True,
                 submit_many: bool = False, outcome_runs: bool = False, expand_runs: bool = True):
        self.chan = BlockingPacketChannel.connect(str(path), max_bytes=max_bytes)
        self.conn = ClientConnection(name)
        #: ask for bundles in the hello (the daemon may then pack several messages in a packet)
        self.bundles = bundles
        #: ask to send submit_many in the hello
        self.ask_submit_many = submit_many
        #: ask for runs of outcomes (result_many, released_many) in the hello; ``expand_runs``: hand a
        #: run out as the result and released messages it stands for (else as it came)
        self.ask_outcome_runs = outcome_runs
        self.expand_runs = expand_runs
        #: runs of outcomes read (result_many and released_many messages)
        self.runs = 0
        #: packets read, and messages of the last bundle not yet handed out
        self.packets = 0
        self.messages = 0
        #: packets sent
        self.sent = 0
        self._unread: deque[Message] = deque()
        self.inbox: deque[Message] = deque()
        self.released: list[Released] = []
        self.outcomes: dict[tuple[int, int], Message] = {}

    # -- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        self.chan.close()

    def send(self, msg: Message, fds=()) -> None:
        data, _ = self.conn.send(msg)
        self.chan.send(data, fds)
        self.sent += 1

    def send_raw(self, data: bytes, fds=()) -> None:
        self.chan.send(data, fds)

    def pending(self) -> bool:
        """Messages already read (the rest of a bundle) wait to be handed out: recv will not block."""
        return bool(self.inbox or self._unread)

    def recv(self, timeout: float = 10.0) -> Message:
        if self.inbox:
            return self.inbox.popleft()
        return self._recv(timeout)

    def _recv(self, timeout: float) -> Message:
        if not self._unread:
            pkt = self.chan.receive(timeout=timeout)
            pkt.close_fds()
            msgs = self.conn.receive_packet(pkt.data)
            self.packets += 1
            self.messages += len(msgs)
            for msg in msgs:
                if type(msg) is ResultMany or type(msg) is ReleasedMany:
                    self.runs += 1
                    if self.expand_runs:
                        self._unread.extend(msg.results() if type(msg) is ResultMany else msg.released())
                        continue
                self._unread.append(msg)
        msg = self._unread.popleft()
        if isinstance(msg, Released):
            self.released.append(msg)
        elif isinstance(msg, (Result, FrameError)):
            self.outcomes[(msg.session, msg.index)] = msg
        return msg

    def wait_for(self, pred, timeout: float = 20.0) -> Message:
        """The first message matching ``pred``; others stay in the inbox, in order."""
        for i, msg in enumerate(self.inbox):
            if pred(msg):
                del self.inbox[i]
                return msg
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching message")
            msg = self._recv(left)
            if pred(msg):
                return msg
            self.inbox.append(msg)

    def request(self, msg: Message, fds=(), timeout: float = 20.0) -> Message:
        self.send(msg, fds)
        seq = msg.seq
        return self.wait_for(lambda m: getattr(m, "re", None) == seq, timeout)

    def drain(self, timeout: float = 0.3) -> list[Message]:
        """Everything that arrives within ``timeout`` (plus the inbox)."""
        out = list(self.inbox)
        self.inbox.clear()
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return out
            try:
                out.append(self._recv(left))
            except (socket.timeout, TimeoutError):
                return out

    # -- conversation -------------------------------------------------------------------

    def hello(self):
        return self.request(Hello(seq=self.conn.next_seq(), version=1, client=self.conn.client_name,
                                  bundles=self.bundles or None, submit_many=self.ask_submit_many or None,
                                  outcome_runs=self.ask_outcome_runs or None))

    def register(self, buf: FrameBuffer, **over) -> Message:
        kw = dict(seq=self.conn.next_seq(), kind="memfd", width=buf.width, height=buf.height,
                  pixel_format=buf.pixel_format, bitdepth=buf.bitdepth, size=buf.size, planes=buf.planes,
                  fds=(buf.fd,))
        kw.update(over)
        msg = RegisterBuffer(**kw)
        return self.request(msg, msg.fds)

    def register_ok(self, buf: FrameBuffer, **over) -> int:
        reply = self.register(buf, **over)
        assert isinstance(reply, BufferRegistered), reply
        return reply.buffer

    def open_session(self, **kw) -> Message:
        base = dict(seq=self.conn.next_seq(), width=576, height=324, pixel_format="yuv420p", bitdepth=8)
        base.update(kw)
        return self.request(OpenSession(**base))

    def open_ok(self, **kw) -> SessionOpened:
        reply = self.open_session(**kw)
        assert isinstance(reply, SessionOpened), reply
        return reply

    def submit(self, session: int, index: int, ref: int, dist: int, *, ref_fence: int | None = None,
               dist_fence: int | None = None) -> None:
        fds = []
        fences = {}
        for role, fd in (("ref_fence", ref_fence), ("dist_fence", dist_fence)):
            if fd is not None:
                fences[role] = Fence("eventfd", fd=len(fds))
                fds.append(fd)
        self.send(Submit(session=session, index=index, ref=ref, dist=dist, fds=tuple(fds), **fences), fds)

    def submit_many(self, session: int, frames) -> None:
        """Frames ``(index, ref, dist)`` of ``session`` in one packet (no fences)."""
        self.send(SubmitMany(session=session, frames=tuple(SubmitFrame(i, r, d) for i, r, d in frames)))

    def close_session(self, session: int, timeout: float = 30.0) -> SessionClosed:
        reply = self.request(CloseSession(seq=self.conn.next_seq(), session=session), timeout=timeout)
        assert isinstance(reply, SessionClosed), reply
        return reply

    def unregister(self, buffer: int, timeout: float = 10.0) -> Message:
        return self.request(UnregisterBuffer(seq=self.conn.next_seq(), buffer=buffer), timeout=timeout)

    def outcome(self, session: int, index: int, timeout: float = 20.0) -> Message:
        if (session, index) in self.outcomes:
            return self.outcomes[(session, index)]
        return self.wait_for(lambda m: isinstance(m, (Result, FrameError)) and (m.session, m.index) == (session, index),
                             timeout)

    def expect_error(self, timeout: float = 10.0) -> Error:
        msg = self.wait_for(lambda m: isinstance(m, Error), timeout)
        return msg
