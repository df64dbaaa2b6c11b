"""A lane's worker process as the daemon sees it: one child per device, its sockets, its end.

:class:`WorkerProcess` is one child (``python -m vmafxd.lanes.process.child``):
its stream (a sender task sends the outbox as one packet per wake-up; a
receiver task hands what comes back to the sessions, the release events and
the reaper), its rpc socket (request/reply from any thread, under a lock),
and :meth:`WorkerProcess._ended`, what its death does (the module docstring of
:mod:`.proxy`).  :class:`DeviceSlot` is a device's current worker and its
restarts.  Sessions are :class:`.proxy.ProxySession` (duck-typed here: this
module imports nothing of the proxy).
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import trio

from vmafx.transport import OwnedFd, TransportClosed, TrioPacketChannel

from ..device import LaneSummary
from ..errors import LaneFailure, LaneStopped
from . import wire

__all__ = ["WorkerProcess", "DeviceSlot", "StartFailed", "START_TIMEOUT", "RPC_TIMEOUT", "STOP_TIMEOUT"]

log = logging.getLogger("vmafxd.lanes.process")

#: a worker's start: imports, the runtime, the device (kernels compile later, at a session's open)
START_TIMEOUT = 60.0
#: a request/reply on the rpc socket (an import pins its mapping: milliseconds)
RPC_TIMEOUT = 30.0
#: how long stopping workers may take (they finish their current job) before SIGKILL
STOP_TIMEOUT = 10.0
#: a worker that dies younger than this twice in a row is restarted only after a back-off (1, 2, 4 .. 30 s)
YOUNG_DEATH_S = 10.0


class WorkerProcess:
    """One worker process: its sockets, its sessions, its frames' release events, its outbox."""

    def __init__(self, lane: Any, slot: "DeviceSlot"):
        self.lane = lane
        self.slot = slot
        stream_parent, stream_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        rpc_parent, rpc_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        values = dict(lane.config_values, gpu_devices=[slot.ordinal])
        cmd = [sys.executable, "-m", "vmafxd.lanes.process.child", "--lane", lane.name,
               "--config", json.dumps(values), "--stream-fd", str(stream_child.fileno()),
               "--rpc-fd", str(rpc_child.fileno()), "--parent", str(os.getpid())]
        try:
            self.proc = subprocess.Popen(cmd, pass_fds=(stream_child.fileno(), rpc_child.fileno()),
                                         stdin=subprocess.DEVNULL, env=child_env())
        except BaseException:
            stream_parent.close()
            rpc_parent.close()
            raise
        finally:
            stream_child.close()
            rpc_child.close()
        self.pid = self.proc.pid
        self.started = time.monotonic()
        try:
            self.pidfd: OwnedFd | None = OwnedFd(os.pidfd_open(self.pid))
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            stream_parent.close()
            rpc_parent.close()
            raise
        self.stream: socket.socket | None = stream_parent
        self.rpc: socket.socket | None = rpc_parent
        self.rpc_lock = threading.Lock()
        self.alive = True
        self.info: dict | None = None
        self.sessions: dict[int, Any] = {}
        self.opening: dict[int, list] = {}
        self.releases: dict[int, Any] = {}
        self.outbox: list = []
        self._kick = trio.Event()
        #: frames submitted (counted by the sessions as they queue them), of them how many groups
        #: (SUBMIT_MANY), in how many packets; outcomes and releases received in how many (the log at exit)
        self.frames_sent = 0
        self.groups_sent = 0
        self.packets_sent = 0
        self.packets_received = 0

    @property
    def name(self) -> str:
        return f"{self.lane.name}{self.slot.ordinal} (pid {self.pid})"

    # -- start ---------------------------------------------------------------------------------
    def wait_ready(self, timeout: float) -> dict:
        """Block until the worker says it is ready; returns its info.  Raises :class:`StartFailed`
        (the process reaped and its fds closed) when it is not available or does not start."""
        assert self.stream is not None
        ready, _, _ = select.select([self.stream], [], [], timeout)
        if not ready:
            self._start_failed(f"its worker process did not start within {timeout:.0f} s")
        try:
            messages, fds = wire.recv_blocking(self.stream)
        except (TransportClosed, OSError):
            try:
                rc = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                rc = None
            self._start_failed(f"its worker process {exit_text(rc) if rc is not None else 'closed its socket'} "
                               f"before it was ready")
        for f in fds:
            f.close()
        msg = messages[0]
        if msg[0] != wire.READY:
            self._start_failed(f"its worker process sent {msg[0]!r} before it was ready")
        if msg[1] is None:
            self._start_failed(msg[2])  # the lane is not available here: the worker's own words
        self.info = msg[1]
        return self.info

    def _start_failed(self, why: str):
        self.alive = False
        self.kill()
        self.proc.wait()
        self.close_fds()
        raise StartFailed(why)

    def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close_fds(self) -> None:
        """Close the worker's sockets and pidfd (once each; the process has exited)."""
        with self.rpc_lock:
            rpc, self.rpc = self.rpc, None
        for s in (self.stream, rpc):
            if s is not None:
                s.close()
        self.stream = None
        if self.pidfd is not None:
            self.pidfd.close()
            self.pidfd = None

    # -- rpc (any thread) ---------------------------------------------------------------------
    def call(self, msg: list, fds=()) -> Any:
        with self.rpc_lock:
            rpc = self.rpc
            if not self.alive or rpc is None:
                raise LaneFailure("", f"the lane's worker process {self.name} is gone")
            rpc.settimeout(RPC_TIMEOUT)
            try:
                wire.send_blocking(rpc, msg, fds)
                reply, rfds = wire.recv_blocking(rpc)
            except TimeoutError:
                log.error("lane worker %s did not answer within %.0f s; killing it", self.name, RPC_TIMEOUT)
                self.kill()
                raise LaneFailure("", f"the lane's worker process {self.name} did not answer") from None
            except (TransportClosed, OSError) as e:
                raise LaneFailure("", f"the lane's worker process {self.name} is gone ({e})") from None
        for f in rfds:
            f.close()
        if reply[0] != 0:
            raise wire.error_from_wire(reply[1])
        return reply[1]

    # -- the stream (trio thread) ---------------------------------------------------------------
    def send(self, message: list) -> None:
        self.outbox.append(message)
        self._kick.set()

    async def serve(self) -> None:
        """Run the worker's stream until it ends, then handle its end."""
        assert self.stream is not None
        self.stream.setblocking(False)
        channel = TrioPacketChannel(trio.socket.from_stdlib_socket(self.stream), wire.INLINE_MAX + 16,
                                    wire.MAX_FDS + 1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sender, channel)
            await self._receiver(channel)
            nursery.cancel_scope.cancel()
        await self._ended()

    async def _sender(self, channel: TrioPacketChannel) -> None:
        while True:
            await self._kick.wait()
            self._kick = trio.Event()
            # One scheduling round more: the session tasks woken with this one hand over their
            # frames too, and go out in this packet.  (Three rounds gave 2.4 frames a packet
            # instead of 1.7 at 64x64 on the emulator, and no daemon CPU a frame that showed:
            # a packet costs the trio thread one sendmsg; waiting costs every frame latency.)
            await trio.lowlevel.checkpoint()
            while self.outbox:
                messages, self.outbox = self.outbox, []
                try:
                    await wire.send_async(channel.send, messages)
                except (TransportClosed, OSError):
                    return  # the receiver sees the end of the stream
                self.packets_sent += 1

    async def _receiver(self, channel: TrioPacketChannel) -> None:
        wake = self.lane.services.wake_reaper
        while True:
            try:
                pkt = await channel.receive()
            except (TransportClosed, OSError, trio.ClosedResourceError):
                return
            body, fds = wire.unpack_packet(pkt)
            for f in fds:
                f.close()
            self.packets_received += 1
            try:
                self._dispatch(wire.decode(body), wake)
            except Exception:
                # A message the daemon cannot take is the worker's fault or ours: either way the
                # worker cannot be trusted with more frames.  It is killed; its end fails what it held.
                log.exception("lane worker %s: a message from it failed; killing it", self.name)
                self.kill()
                return

    def _dispatch(self, messages: list, wake) -> None:
        """One packet's messages, in order (trio thread); the reaper is woken once per packet."""
        released = False
        for msg in messages:
            code = msg[0]
            if code == wire.RELEASED:
                releases = self.releases
                for token in msg[1]:
                    ev = releases.pop(token, None)
                    if ev is not None:
                        ev.complete()
                released = True
            elif code == wire.SCORED:
                session = self.sessions.get(msg[1])
                if session is not None:
                    session._deliver_scored(msg[2])
            elif code == wire.FAILED:
                session = self.sessions.get(msg[1])
                if session is not None:
                    session._deliver_failed([(i, wire.error_from_wire(e)) for i, e in msg[2]])
            elif code == wire.FINISHED:
                session = self.sessions.pop(msg[1], None)
                if session is not None:
                    session._finish_delivered(LaneSummary(msg[2], msg[3]))
            elif code == wire.OPENED:
                waiter = self.opening.pop(msg[1], None)
                if waiter is not None:
                    waiter[1] = (msg[2], msg[3])
                    waiter[0].set()
            else:
                log.error("lane worker %s: unknown message %r", self.name, code)
        if released:
            wake()

    async def _ended(self) -> None:
        """The stream ended: wait for the process to exit, then give every frame and session its end."""
        self.alive = False
        self.slot.ready = trio.Event()  # new sessions wait for the next worker
        assert self.pidfd is not None
        with trio.move_on_after(5) as waited:
            await trio.lowlevel.wait_readable(self.pidfd.fileno())
        if waited.cancelled_caught:  # closed its socket yet lives on: it is of no use any more
            self.kill()
            await trio.lowlevel.wait_readable(self.pidfd.fileno())
        rc = self.proc.wait()
        stopping = self.lane.stopping
        how = exit_text(rc)
        frames = sum(len(s.inflight) for s in self.sessions.values())
        log.info("lane worker %s: %d frames sent in %d packets (%d groups), %d packets received", self.name,
                 self.frames_sent, self.packets_sent, self.groups_sent, self.packets_received)
        if stopping and rc == 0:
            log.info("lane worker %s exited", self.name)
        else:
            log.error("lane worker %s (device %d) died: %s; %d frames in flight fail, %d sessions end%s",
                      self.name, self.slot.ordinal, how, frames, len(self.sessions),
                      "" if stopping else "; starting a new worker")
        why = f"the lane's worker process for device {self.slot.ordinal} {how}"
        error_class = LaneStopped if stopping else LaneFailure
        for sid, waiter in list(self.opening.items()):
            waiter[1] = (["LaneStopped" if stopping else "LaneFailure", "session", why], None)
            waiter[0].set()
        self.opening.clear()
        for session in list(self.sessions.values()):
            session._worker_died(why, error_class)
        self.sessions.clear()
        # The process has exited, so nothing reads the frames' buffers any more: release them all.
        for ev in self.releases.values():
            ev.complete()
        self.releases.clear()
        self.lane.services.wake_reaper()
        with trio.CancelScope(shield=True):
            self.close_fds()


class StartFailed(Exception):
    pass


class DeviceSlot:
    """One device: its current worker process, and the restarts."""

    def __init__(self, lane: Any, ordinal: int):
        self.lane = lane
        self.ordinal = ordinal
        self.worker: WorkerProcess | None = None
        self.info: dict | None = None
        #: set while the current worker is ready to take sessions
        self.ready = trio.Event()
        self.sessions = 0
        self.deaths = 0
        self.done = trio.Event()

    def start_blocking(self) -> dict:
        w = WorkerProcess(self.lane, self)
        try:
            self.info = w.wait_ready(START_TIMEOUT)
        except BaseException:
            if w.pidfd is not None:  # not StartFailed (which reaped it): an interrupt, a bug
                w.alive = False
                w.kill()
                w.proc.wait()
                w.close_fds()
            raise
        self.worker = w
        self.ready.set()
        return self.info

    async def serve(self) -> None:
        try:
            young = 0
            while True:
                w = self.worker
                if w is not None:
                    try:
                        await w.serve()
                    except Exception:  # a bug of ours: the worker is ended all the same, and replaced
                        log.exception("lane worker %s: serving it failed; killing it", w.name)
                        w.kill()
                        if w.pidfd is not None:
                            try:
                                await w._ended()
                            except Exception:
                                log.exception("lane worker %s: ending it failed", w.name)
                        w.alive = False
                    self.ready = trio.Event()
                    young = young + 1 if time.monotonic() - w.started < YOUNG_DEATH_S else 0
                if self.lane.stopping:
                    return
                if young > 1:  # the first death restarts at once; a worker that keeps dying, later each time
                    await trio.sleep(min(30.0, 2.0 ** (young - 2)))
                try:
                    # the new worker's start (Popen) is quick; its readiness is waited in a thread
                    w = WorkerProcess(self.lane, self)
                    self.worker = w
                    self.info = await trio.to_thread.run_sync(w.wait_ready, START_TIMEOUT)
                except Exception as e:  # StartFailed (reaped, closed), or the spawn itself (OSError)
                    log.error("lane %s: device %d: a new worker could not start: %s", self.lane.name,
                              self.ordinal, e)
                    w = self.worker
                    if w is not None and w.pidfd is not None:
                        w.alive = False
                        w.kill()
                        w.proc.wait()
                        w.close_fds()
                    self.worker = None
                    young += 1
                    continue
                log.info("lane worker %s started", w.name)
                if self.lane.stopping:
                    w.send([wire.STOP])
                self.ready.set()
        finally:
            self.done.set()


def exit_text(rc: int) -> str:
    """How a process ended, from its return code: ``exited with status 3``, ``was killed by SIGKILL (9)``."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"was killed by {name} ({-rc})"
    return f"exited with status {rc}"


def child_env() -> dict[str, str]:
    """The daemon's environment, with the directories it imports vmafxd and vmafx from first on the path."""
    import vmafx

    env = dict(os.environ)
    roots = [str(Path(__file__).resolve().parents[3]), str(Path(vmafx.__file__).resolve().parents[1])]
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + ([old] if old else [])))
    return env
