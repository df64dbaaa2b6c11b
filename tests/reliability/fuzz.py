"""A protocol fuzzer: valid and mutated message sequences, with fds attached, against a live daemon.

:func:`sequences` is a hypothesis strategy of whole conversations (lists of
:class:`Step`); :func:`play` sends one over a fresh connection, reading what
comes back without waiting on it, and closes.  The daemon's health is read
from /proc (:func:`health`): fds, RSS, threads.  Used by
tests/reliability/test_fuzz.py (bounded examples) and scripts/soak.py (for
minutes).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import msgpack
from hypothesis import strategies as st

from vmafx.protocol import Fence, Hello, OpenSession, Plane, RegisterBuffer, Status, Submit, SubmitFrame, SubmitMany
from vmafx.protocol import CloseSession, ListSessions, UnregisterBuffer
from vmafx.protocol.codec import encode

W = H = 16
FRAME = W * H * 3 // 2
PLANES = (Plane(0, 0, W), Plane(0, W * H, W // 2), Plane(0, W * H + W * H // 4, W // 2))


@dataclass(frozen=True)
class Step:
    data: bytes
    #: kinds of fds to attach: "memfd" (a frame-sized memfd), "eventfd", "pipe"
    fds: tuple[str, ...] = ()


def _valid(kind: str, seq: int, a: int, b: int) -> Step:
    """One valid message (valid on its own; the sequence may still be wrong)."""
    if kind == "hello":
        return Step(encode(Hello(seq=seq, version=1, client="fuzz", bundles=bool(a & 1) or None,
                                 submit_many=bool(a & 2) or None))[0])
    if kind == "register":
        msg = RegisterBuffer(seq=seq, kind="memfd", width=W, height=H, pixel_format="yuv420p", bitdepth=8,
                             size=FRAME, planes=PLANES, fds=(0,))
        return Step(encode(msg)[0], ("memfd",))
    if kind == "open":
        return Step(encode(OpenSession(seq=seq, width=W, height=H, pixel_format="yuv420p", bitdepth=8,
                                       features=["psnr"], models=[]))[0])
    if kind == "submit":
        if b % 3 == 0:
            msg = Submit(session=1 + a % 3, index=b, ref=1 + a % 2, dist=2 - a % 2,
                         ref_fence=Fence("eventfd", fd=0), fds=(0,))
            return Step(encode(msg)[0], ("eventfd",))
        return Step(encode(Submit(session=1 + a % 3, index=b, ref=1 + a % 2, dist=1 + b % 2))[0])
    if kind == "submit_many":
        # 1..4 frames from index b; the second one fenced when b is odd (the fd mutations add more)
        frames = tuple(SubmitFrame(b + k, 1 + (a + k) % 2, 1 + k % 2,
                                   Fence("eventfd", fd=0) if k == 1 and b % 2 else None) for k in range(1 + a % 4))
        fds = (0,) if any(f.ref_fence for f in frames) else ()
        return Step(encode(SubmitMany(session=1 + a % 3, frames=frames, fds=fds))[0], ("eventfd",) * len(fds))
    if kind == "close":
        return Step(encode(CloseSession(seq=seq, session=1 + a % 3))[0])
    if kind == "unregister":
        return Step(encode(UnregisterBuffer(seq=seq, buffer=1 + a % 3))[0])
    if kind == "status":
        return Step(encode(Status(seq=seq))[0])
    return Step(encode(ListSessions(seq=seq))[0])


KINDS = ("hello", "register", "open", "submit", "submit", "submit", "submit_many", "submit_many", "close",
         "unregister", "status", "list")


HOW = ("valid", "valid", "valid", "flip", "truncate", "garbage", "empty", "fds", "field", "bundle")
FD_KINDS = ("memfd", "eventfd", "pipe")


class _Picker:
    """Where a conversation's choices come from: hypothesis (CI: shrinkable) or a seeded Random (soak: fast)."""

    def __init__(self, draw=None, rng=None):
        self._draw, self._rng = draw, rng

    def int(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi)) if self._draw else self._rng.randint(lo, hi)

    def choice(self, options):
        return self._draw(st.sampled_from(options)) if self._draw else self._rng.choice(options)

    def bytes(self, lo: int, hi: int) -> bytes:
        if self._draw:
            return self._draw(st.binary(min_size=lo, max_size=hi))
        return self._rng.randbytes(self._rng.randint(lo, hi))

    def value(self):
        if self._draw:
            return self._draw(st.one_of(st.none(), st.integers(-2**63, 2**64 - 1), st.text(max_size=8),
                                        st.binary(max_size=8), st.lists(st.integers(), max_size=3), st.floats()))
        r = self._rng
        return r.choice([None, r.randint(-2**63, 2**64 - 1), "x" * r.randint(0, 8), r.randbytes(r.randint(0, 8)),
                         [r.randint(-5, 5)] * r.randint(0, 3), r.random() * 10 ** r.randint(-5, 300), float("nan")])


def _step(p: _Picker, seq: int) -> Step:
    """One step: a valid message, or one mutated (bits, length, bytes, fds, a field's type, a bundle)."""
    base = _valid(p.choice(KINDS), seq, p.int(0, 7), p.int(0, 40))
    how = p.choice(HOW)
    data, fds = base.data, base.fds
    if how == "flip" and data:
        i = p.int(0, len(data) - 1)
        data = data[:i] + bytes([data[i] ^ p.int(1, 255)]) + data[i + 1:]
    elif how == "truncate" and data:
        data = data[:p.int(0, len(data) - 1)]
    elif how == "garbage":
        data = p.bytes(1, 64)
    elif how == "empty":
        data = b""
    elif how == "fds":
        fds = tuple(p.choice(FD_KINDS) for _ in range(p.int(1, 10)))
    elif how == "field":
        obj = msgpack.unpackb(data, raw=False)
        obj[p.choice(sorted(obj))] = p.value()
        data = msgpack.packb(obj, use_bin_type=True)
    elif how == "bundle":
        data = bytes((0x92,)) + data + data
    return Step(data, fds)


def _conversation(p: _Picker, max_steps: int) -> list[Step]:
    n = p.int(1, max_steps)
    # Mostly begin with a hello, so that the fuzzer reaches past the first state.
    first = [_valid("hello", 1, 0, 0)] if p.int(0, 3) else []
    return first + [_step(p, i + 2) for i in range(n)]


@st.composite
def sequences(draw, max_steps: int = 12) -> list[Step]:
    """Conversations as a hypothesis strategy (tests/reliability/test_fuzz.py)."""
    return _conversation(_Picker(draw=draw), max_steps)


def random_sequence(rng, max_steps: int = 12) -> list[Step]:
    """The same conversations from a seeded ``random.Random`` (scripts/soak.py: no shrinking, many a second)."""
    return _conversation(_Picker(rng=rng), max_steps)


def _make_fd(kind: str) -> int:
    if kind == "memfd":
        fd = os.memfd_create("fuzz", os.MFD_CLOEXEC)
        os.ftruncate(fd, FRAME)
        return fd
    if kind == "eventfd":
        return os.eventfd(1, os.EFD_CLOEXEC)
    r, w = os.pipe()
    os.close(r)
    return w


def play(path: str, seq: list[Step], read_s: float = 0.002, final_read_s: float = 0.05) -> tuple[int, int]:
    """Send ``seq`` on a new connection, reading whatever comes; returns (packets sent, packets read)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    sent = got = 0
    try:
        s.connect(path)
        s.settimeout(read_s)
        for step in seq:
            fds = [_make_fd(k) for k in step.fds]
            try:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(
                    __import__("array").array("i", fds))))] if fds else []
                s.sendmsg([step.data], anc)
                sent += 1
            except OSError:
                break  # the daemon closed on us (E_PROTO): the conversation is over
            finally:
                for fd in fds:
                    os.close(fd)
            got += _read_some(s)
        s.settimeout(final_read_s)
        got += _read_some(s, limit=64)
    finally:
        s.close()
    return sent, got


def _read_some(s: socket.socket, limit: int = 8) -> int:
    n = 0
    for _ in range(limit):
        try:
            data, anc, _, _ = s.recvmsg(1 << 17, socket.CMSG_SPACE(64))
        except (socket.timeout, TimeoutError, BlockingIOError):
            break
        except OSError:
            break
        if not data:
            break
        n += 1
    return n


@dataclass
class Health:
    fds: int
    rss_kb: int
    threads: int


def health(pid: int) -> Health:
    status = open(f"/proc/{pid}/status").read().split("\n")
    fields = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in status if ":" in line}
    return Health(len(os.listdir(f"/proc/{pid}/fd")), int(fields["VmRSS"].split()[0]), int(fields["Threads"]))
