"""The protocol fuzzer at volume: several processes, packets made in advance, many per connection.

tests/reliability/fuzz.py plays one conversation per connection, one packet
at a time with a read after each: a few hundred packets a second, most of
the time spent connecting and waiting.  This floods instead (scripts/soak.py
``fuzz``):

* ``fuzzers`` processes (forked), each with its own seeded ``random.Random``;
* each makes a pool of packets up front with fuzz.py's mutator (the CI
  strategy's choices: valid messages, bit flips, truncation, garbage, empty
  packets, stray fds, a field of the wrong type, bundles) and sorts them with
  the daemon's own sans-I/O state machine (``ServerConnection.receive`` in the
  open state) into packets the daemon answers and goes on, and packets that
  end the connection (E_PROTO);
* a connection is a hello (bundled replies, so the daemon sends fewer
  packets) and its reply (a refused connection, E_LIMIT, is counted and
  left), then a run of the first kind, written with non-blocking
  ``sendmsg`` and replies drained (discarded) whenever the socket is full or
  every few packets -- then, one time in ``fatal_every``, one of the second
  kind, and the close;
* fds ride along as the mutator asks (a sealed frame-sized memfd, a
  signalled eventfd, a pipe's write end), made once per process: SCM_RIGHTS
  gives the daemon its own copy of each every time.

``sent`` counts packets ``sendmsg`` accepted -- written into the daemon's
socket.  A run ends with a ``status`` request whose reply the fuzzer waits
for: the daemon answers in order, so ``handled`` counts the packets of the
runs (and that request) the daemon is known to have read and answered -- a connection the daemon dropped, or one still unanswered after
10 s, adds to ``sent`` only.  After a fatal packet the daemon reads and drops what was queued
behind it (docs/reliability.md, "Errors before the close"); those are counted
too (they were written, and the daemon read them) but the fuzzer stops
writing there.
"""

from __future__ import annotations

import array
import errno
import fcntl
import json
import os
import random
import select
import socket
import time
from dataclasses import dataclass
from typing import Callable

from vmafx.protocol import HelloReply, Limits, RemoteProtocolError, ServerConnection, Status, StatusReply
from vmafx.protocol.codec import decode_packet, encode

from .fuzz import FRAME, Step, _Picker, _step, _valid

F_ADD_SEALS = 1033
F_SEAL_SHRINK, F_SEAL_GROW = 0x2, 0x4

#: packets a connection writes before its (fatal or plain) end: drawn between these
RUN_MIN, RUN_MAX = 50, 600


@dataclass
class Packet:
    data: bytes
    anc: list  # SCM_RIGHTS ancillary data (the process's shared fds), or []


def _shared_fds() -> dict[str, int]:
    memfd = os.memfd_create("fuzz-frame", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(memfd, FRAME)
    fcntl.fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)
    r, w = os.pipe()
    os.close(r)
    return {"memfd": memfd, "eventfd": os.eventfd(1, os.EFD_CLOEXEC), "pipe": w}


def _classify(step: Step, limits: Limits) -> bool:
    """True when the daemon closes the connection on this packet (E_PROTO), in the open state."""
    conn = ServerConnection(limits, "fuzz")
    conn.receive(_valid("hello", 1, 0, 0).data)
    try:
        conn.receive(step.data, tuple(range(len(step.fds))))
    except RemoteProtocolError as e:
        return e.fatal
    return False


def make_pool(rng: random.Random, fds: dict[str, int], n: int) -> tuple[list[Packet], list[Packet]]:
    """``n`` mutated packets: (those the daemon answers and goes on, those that end the connection)."""
    limits = Limits()
    live: list[Packet] = []
    fatal: list[Packet] = []
    picker = _Picker(rng=rng)
    for i in range(n):
        step = _step(picker, 2 + i)
        anc = ([(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fds[k] for k in step.fds]).tobytes())]
               if step.fds else [])
        (fatal if _classify(step, limits) else live).append(Packet(step.data, anc))
    return live, fatal


def _drain(s: socket.socket, buf: bytearray) -> int:
    n = 0
    while True:
        try:
            got = s.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return n
        except OSError:
            return -1 if n == 0 else n
        if got == 0:
            return -1 if n == 0 else n  # end-of-file: the daemon closed
        n += 1


_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED)


def _write(s: socket.socket, pkt: Packet, buf: bytearray, counts: dict, end: float) -> bool:
    """Write one packet, draining replies while the socket is full; False when the connection is over."""
    while True:
        try:
            s.sendmsg([pkt.data], pkt.anc, socket.MSG_DONTWAIT)
            counts["sent"] += 1
            return True
        except (BlockingIOError, InterruptedError):
            got = _drain(s, buf)
            if got < 0:
                return False
            counts["read"] += got
            if time.monotonic() >= end:
                return False
            select.select([s], [s], [], 0.05)
        except OSError as e:
            if e.errno in _GONE:
                return False
            raise


def _admitted(s: socket.socket, buf: bytearray) -> bool:
    """Read the daemon's answer to our hello: True for hello_reply; False for a refusal (E_LIMIT ...),
    whose connection would swallow the packets written after it unread."""
    if not select.select([s], [], [], 5.0)[0]:
        return False
    try:
        n = s.recv_into(buf, 0, socket.MSG_DONTWAIT)
        return n > 0 and isinstance(decode_packet(bytes(buf[:n]), bundles=True)[0], HelloReply)
    except (OSError, RemoteProtocolError):
        return False


#: the seq of the status request that ends a run: its reply says the daemon has handled the run
SYNC_SEQ = 0xFFFFFFF0


def _synced(s: socket.socket, buf: bytearray, counts: dict, timeout: float = 10.0) -> bool:
    """Ask for ``status`` and read until its reply: the daemon answers in order, so it has then
    handled every packet written before it.  False when the connection ends first or on timeout."""
    sync = Packet(encode(Status(seq=SYNC_SEQ))[0], [])
    deadline = time.monotonic() + timeout
    if not _write(s, sync, buf, counts, deadline):
        return False
    while time.monotonic() < deadline:
        if not select.select([s], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return False
        try:
            n = s.recv_into(buf, 0, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            return False
        if n == 0:
            return False
        counts["read"] += 1
        try:
            msgs = decode_packet(bytes(buf[:n]), bundles=True)
        except RemoteProtocolError:
            continue  # a reply cut at our buffer's size: not the one we wait for
        if any(isinstance(m, StatusReply) and m.re == SYNC_SEQ for m in msgs):
            return True
    return False


def flood(path: str, seconds: float, seed: int, *, pool_size: int = 4000, fatal_every: int = 4) -> dict:
    """One fuzzing process: connections of mutated packets for ``seconds``; returns its counts."""
    rng = random.Random(seed)
    fds = _shared_fds()
    counts = {"sent": 0, "handled": 0, "read": 0, "connections": 0, "fatal_endings": 0, "refused": 0,
              "backlog_full": 0}
    try:
        live, fatal = make_pool(rng, fds, pool_size)
        counts["pool_live"], counts["pool_fatal"] = len(live), len(fatal)
        hello = Packet(_valid("hello", 1, 1, 0).data, [])  # bundles=True: fewer reply packets
        buf = bytearray(1 << 18)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                try:
                    s.connect(path)
                except OSError as e:
                    if e.errno in (errno.EAGAIN, errno.ECONNREFUSED):
                        counts["backlog_full"] += 1  # the listener's backlog is full: try again
                        time.sleep(0.001)
                        continue
                    raise
                if not _write(s, hello, buf, counts, end):
                    continue
                if not _admitted(s, buf):
                    counts["refused"] += 1
                    time.sleep(0.01)
                    continue
                counts["connections"] += 1
                written = counts["sent"]
                run = rng.randint(RUN_MIN, RUN_MAX)
                start = rng.randrange(len(live))
                ok = True
                for i in range(run):
                    if not _write(s, live[(start + i) % len(live)], buf, counts, end):
                        ok = False
                        break
                    if i % 16 == 15:
                        got = _drain(s, buf)
                        if got < 0:
                            ok = False
                            break
                        counts["read"] += got
                if ok:
                    if _synced(s, buf, counts):
                        counts["handled"] += counts["sent"] - written
                    else:
                        ok = False
                if ok and fatal and rng.randrange(fatal_every) == 0:
                    if _write(s, rng.choice(fatal), buf, counts, end):
                        counts["fatal_endings"] += 1
                got = _drain(s, buf)
                counts["read"] += max(0, got)
            finally:
                s.close()
    finally:
        for fd in fds.values():
            os.close(fd)
    return counts


def run_fuzzers(path: str, seconds: float, fuzzers: int, seed: int = 0, *,
                on_tick: Callable[[], None] | None = None, tick_s: float = 5.0) -> dict:
    """``fuzzers`` forked processes flooding ``path`` for ``seconds``; their counts summed (+ wall seconds).

    ``on_tick`` is called every ``tick_s`` while they run (scripts/soak.py samples the daemon's RSS)."""
    children: dict[int, int] = {}  # pid -> read end of its report pipe
    t0 = time.monotonic()
    for k in range(fuzzers):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(r)
                out = flood(path, seconds, seed * 1000 + k)
            except BaseException as e:  # reported to the parent, which fails the run
                out = {"error": f"{type(e).__name__}: {e}"}
                code = 1
            try:
                os.write(w, json.dumps(out).encode())  # a few hundred bytes: fits the pipe
            finally:
                os._exit(code)
        os.close(w)
        children[pid] = r
    running = set(children)
    next_tick = time.monotonic() + tick_s
    while running:
        for pid in list(running):
            if os.waitpid(pid, os.WNOHANG)[0]:
                running.discard(pid)
        if running:
            time.sleep(min(0.1, max(0.0, next_tick - time.monotonic())))
        if on_tick is not None and time.monotonic() >= next_tick:
            on_tick()
            next_tick += tick_s
    total: dict = {"errors": []}
    for pid, r in children.items():
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        out = json.loads(b"".join(chunks) or b'{"error": "no report"}')
        if "error" in out:
            total["errors"].append(out["error"])
            continue
        for k, v in out.items():
            total[k] = total.get(k, 0) + v
    total["seconds"] = time.monotonic() - t0
    return total
