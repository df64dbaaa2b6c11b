"""The lane the daemon holds when a GPU lane runs in worker processes (``lane_process = true``).

:class:`ProcessLane` implements the lane interface (:mod:`vmafxd.lanes.device`)
for the daemon exactly as the in-process GPU lane does; behind it, one worker
process per device (:mod:`.child`) runs the real GPU lane for that device.
What crosses, and how, is :mod:`.wire`.

Per device a :class:`_Slot` holds the current :class:`_Worker` (one child
process).  In the daemon's trio thread:

* ``submit`` appends a message to the worker's outbox and returns a
  :class:`ProxyReleaseEvent`, unrecorded until the worker says the frame's
  last reader finished; a sender task sends the outbox as one packet per
  wake-up (so many submits go in one packet once the daemon is busy);
* a receiver task takes the worker's packets -- results, failures, releases
  of many frames each -- hands outcomes to the sessions' sinks, completes the
  release events and wakes the reaper once per packet;
* ``import_buffer`` and the imports' ``close`` (the reaper's thread) are
  request/reply calls on the worker's second socket, so a refusal names the
  field as the in-process lane's does.

When a worker dies (killed, crashed; found by the end of its stream, then
its exit through a pidfd): once the process has exited -- its device
context, and with it every read of a producer's buffer, ended with it --
every frame it held gets one outcome (``LaneFailure``: ``E_INTERNAL``) and
its release, every session on it ends (later submits fail at once,
``finish`` returns an empty summary: its temporal state and pooled values
died with the worker, so it cannot go on correctly elsewhere), imports made
by it refuse their frames (``LaneFailure`` naming ``ref``/``dist``: register
the buffer again), its sockets and pidfd are closed once, and a new worker
is started for the device (after a back-off when workers keep dying young).
New sessions and imports go to the new worker.
"""

from __future__ import annotations

import dataclasses
import itertools
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
from typing import Any, Mapping

import trio

from vmafx.transport import OwnedFd, TransportClosed, TrioPacketChannel

from ...core.layout import BufferLayout
from ..device import FrameSink, Lane, LaneFrame, LaneImport, LaneServices, LaneSession, LaneSummary, SessionSpec
from ..errors import InvalidInput, LaneError, LaneFailure, LaneStopped, Unsupported
from ..gpu.lane import GpuLane
from ..runtime import RuntimeUnavailable
from . import wire

__all__ = ["ProcessLane", "ProxyReleaseEvent"]

log = logging.getLogger("vmafxd.lanes.process")

#: a worker's start: imports, the runtime, the device (kernels compile later, at a session's open)
START_TIMEOUT = 60.0
#: a request/reply on the rpc socket (an import pins its mapping: milliseconds)
RPC_TIMEOUT = 30.0
#: how long stopping workers may take (they finish their current job) before SIGKILL
STOP_TIMEOUT = 10.0
#: a worker that dies younger than this twice in a row is restarted only after a back-off (1, 2, 4 .. 30 s)
YOUNG_DEATH_S = 10.0


class ProxyReleaseEvent:
    """A frame's release event in the daemon: recorded and complete once its worker says the frame's
    last reader finished (or the worker is gone).  It announces itself (the receiver wakes the reaper)."""

    __slots__ = ("recorded", "_done")
    signals_completion = True

    def __init__(self) -> None:
        self.recorded = False
        self._done = False

    def complete(self) -> None:
        self._done = True
        self.recorded = True

    def query(self) -> bool:
        return self._done

    def destroy(self) -> None:
        pass


class ProxyImport(LaneImport):
    """A buffer imported by one worker process; ``close`` (the reaper's thread) frees it there."""

    def __init__(self, worker: "_Worker", import_id: int, zero_copy: bool, fence_fds: list[OwnedFd]):
        self.worker = worker
        self.id = import_id
        self.zero_copy = zero_copy
        #: the daemon's own dups of a host-read dma-buf's fds, for its implicit fences (R8)
        self._fence_fds = fence_fds
        self._closed = False

    @property
    def device(self) -> int:
        return self.worker.slot.ordinal

    def implicit_fence_fds(self):
        return [f.fileno() for f in self._fence_fds if not f.closed]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for f in self._fence_fds:
            f.close()
        if self.worker.alive:
            try:
                self.worker.call([wire.RPC_CLOSE, [self.id]])
            except LaneError:
                pass  # the worker died meanwhile: the import died with it


class ProxySession(LaneSession):
    def __init__(self, worker: "_Worker", sid: int, sink: FrameSink):
        self.worker = worker
        self.lane = worker.lane
        self.sid = sid
        self.sink = sink
        self.device = worker.slot.ordinal
        #: indices handed to the worker without an outcome yet (failed if it dies)
        self.inflight: set[int] = set()
        self._aborted = False
        self._done = False
        self._dead: str | None = None
        self._finished: trio.Event | None = None
        self._summary = LaneSummary()
        self._counted = True

    def submit(self, frame: LaneFrame) -> ProxyReleaseEvent:
        if self._done:
            raise RuntimeError("submit after finish or abort")
        ev = ProxyReleaseEvent()
        w = self.worker
        ref, dist = frame.ref, frame.dist
        refusal: LaneError | None = None
        if self._dead is not None:
            refusal = LaneFailure("", f"{self._dead}; this session cannot go on (its state died with the "
                                      f"worker): open a new one")
        else:
            for role, imp in (("ref", ref), ("dist", dist)):
                if imp.worker is w:
                    continue
                if imp.worker.slot is not w.slot:
                    refusal = InvalidInput(role, f"the buffer lives on device {imp.device}; this session runs "
                                                 f"on device {self.device}")
                else:
                    refusal = LaneFailure(role, "the buffer was imported by a lane worker process that has "
                                                "since died: register it again")
                break
        if refusal is not None:
            ev.complete()
            self.lane.services.wake_reaper()
            self._deliver_failed([(frame.index, refusal)])
            return ev
        token = next(self.lane._tokens)
        w.releases[token] = ev
        self.inflight.add(frame.index)
        w.send([wire.SUBMIT, self.sid, token, frame.index, ref.id, dist.id,
                wire.fence_to_wire(frame.ref_gpu_fence), wire.fence_to_wire(frame.dist_gpu_fence)])
        return ev

    async def finish(self) -> LaneSummary:
        self._done = True
        if self._dead is None:
            self._finished = trio.Event()
            self.worker.send([wire.FINISH, self.sid])
            await self._finished.wait()
        self._uncount()
        return self._summary

    def abort(self) -> None:
        if not self._aborted:
            self._aborted = True
            self._done = True
            self._uncount()
            if self.worker.sessions.pop(self.sid, None) is not None and self.worker.alive:
                self.worker.send([wire.ABORT, self.sid])

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self.worker.slot.sessions -= 1

    # -- from the receiver (trio thread) -------------------------------------------------------
    def _deliver_scored(self, items) -> None:
        for index, _ in items:
            self.inflight.discard(index)
        if not self._aborted:
            self.sink.frames_scored(items)

    def _deliver_failed(self, items) -> None:
        for index, error in items:
            self.inflight.discard(index)
            if not self._aborted:
                self.sink.frame_failed(index, error)

    def _finish_delivered(self, summary: LaneSummary) -> None:
        self._summary = summary
        if self._finished is not None:
            self._finished.set()

    def _worker_died(self, why: str, error_class: type[LaneError]) -> None:
        self._dead = why
        self._deliver_failed([(i, error_class("", why)) for i in sorted(self.inflight)])
        if self._finished is not None:
            self._finished.set()


class _Worker:
    """One worker process: its sockets, its sessions, its frames' release events, its outbox."""

    def __init__(self, lane: "ProcessLane", slot: "_Slot"):
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
                                         stdin=subprocess.DEVNULL, env=_child_env())
        finally:
            stream_child.close()
            rpc_child.close()
        self.pid = self.proc.pid
        self.started = time.monotonic()
        self.pidfd: OwnedFd | None = OwnedFd(os.pidfd_open(self.pid))
        self.stream: socket.socket | None = stream_parent
        self.rpc: socket.socket | None = rpc_parent
        self.rpc_lock = threading.Lock()
        self.alive = True
        self.info: dict | None = None
        self.sessions: dict[int, ProxySession] = {}
        self.opening: dict[int, list] = {}
        self.releases: dict[int, ProxyReleaseEvent] = {}
        self.outbox: list = []
        self._kick = trio.Event()
        #: frames submitted in how many packets, outcomes and releases received in how many (the log at exit)
        self.frames_sent = 0
        self.packets_sent = 0
        self.packets_received = 0

    @property
    def name(self) -> str:
        return f"{self.lane.name}{self.slot.ordinal} (pid {self.pid})"

    # -- start ---------------------------------------------------------------------------------
    def wait_ready(self, timeout: float) -> dict:
        """Block until the worker says it is ready (its info); LaneUnavailable-worthy reasons raise."""
        assert self.stream is not None
        ready, _, _ = select.select([self.stream], [], [], timeout)
        if not ready:
            self.kill()
            raise _StartFailed(f"its worker process did not start within {timeout:.0f} s")
        try:
            messages, fds = wire.recv_blocking(self.stream)
        except (TransportClosed, OSError):
            try:
                rc = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
                rc = self.proc.wait()
            raise _StartFailed(f"its worker process {_exit_text(rc)} before it was ready") from None
        for f in fds:
            f.close()
        msg = messages[0]
        if msg[0] != wire.READY:
            self.kill()
            raise _StartFailed(f"its worker process sent {msg[0]!r} before it was ready")
        if msg[1] is None:
            self.proc.wait()
            raise _StartFailed(msg[2])
        self.info = msg[1]
        return self.info

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
                data, fds = wire.packet_bytes(wire.encode(messages))
                try:
                    await channel.send(data, fds)
                except (TransportClosed, OSError):
                    return  # the receiver sees the end of the stream
                finally:
                    for f in fds:
                        f.close()
                self.packets_sent += 1
                self.frames_sent += sum(1 for m in messages if m[0] == wire.SUBMIT)

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
        how = _exit_text(rc)
        frames = sum(len(s.inflight) for s in self.sessions.values())
        log.info("lane worker %s: %d frames sent in %d packets, %d packets received", self.name,
                 self.frames_sent, self.packets_sent, self.packets_received)
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


class _StartFailed(Exception):
    pass


class _Slot:
    """One device: its current worker process, and the restarts."""

    def __init__(self, lane: "ProcessLane", ordinal: int):
        self.lane = lane
        self.ordinal = ordinal
        self.worker: _Worker | None = None
        self.info: dict | None = None
        #: set while the current worker is ready to take sessions
        self.ready = trio.Event()
        self.sessions = 0
        self.deaths = 0
        self.done = trio.Event()

    def start_blocking(self) -> dict:
        w = _Worker(self.lane, self)
        try:
            self.info = w.wait_ready(START_TIMEOUT)
        except BaseException:
            w.kill()
            w.proc.wait()
            w.alive = False
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
                    w = _Worker(self.lane, self)
                    self.worker = w
                    self.info = await trio.to_thread.run_sync(w.wait_ready, START_TIMEOUT)
                except (_StartFailed, OSError) as e:
                    log.error("lane %s: device %d: a new worker could not start: %s", self.lane.name,
                              self.ordinal, e)
                    if self.worker is not None:
                        self.worker.alive = False
                        self.worker.close_fds()
                        self.worker = None
                    young += 1
                    continue
                log.info("lane worker %s started", w.name)
                if self.lane.stopping:
                    w.send([wire.STOP])
                self.ready.set()
        finally:
            self.done.set()


class ProcessLane(Lane):
    """A GPU lane (cuda, hip, emu) whose device work runs in one worker process per device."""

    # The byte estimates and the fence kinds are the GPU lane's own (they read no device state).
    scoring_bytes = GpuLane.scoring_bytes
    frame_bytes = GpuLane.frame_bytes
    check_fence = GpuLane.check_fence

    def __init__(self, name: str, config: Any, services: LaneServices):
        self.name = name
        self.services = services
        self.config_values = {
            "gpu_batch": int(getattr(config, "gpu_batch", 32)),
            "log_level": str(getattr(config, "log_level", "info")),
        }
        self.stopping = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._slots_scope: trio.CancelScope | None = None
        ordinals = getattr(config, "gpu_devices", None)
        first = _Slot(self, ordinals[0] if ordinals else 0)
        self.slots = [first]
        try:
            info = first.start_blocking()
            if not ordinals:
                ordinals = range(int(info.get("device_count", 1)))
            for ordinal in ordinals[1:]:
                slot = _Slot(self, ordinal)
                slot.start_blocking()
                self.slots.append(slot)
        except _StartFailed as e:
            self._kill_all()
            raise RuntimeUnavailable(name, str(e)) from None  # create_lane: LaneUnavailable
        except BaseException:
            self._kill_all()
            raise
        self.event_kind: str | None = info.get("event_kind")
        self._features = list(info.get("features", ()))
        self._runtime = info.get("describe", {}).get("runtime", name)
        #: host copies counted by workers that have since died
        self._copies_before = 0
        self._copies_seen: dict[int, int] = {}

    def _kill_all(self) -> None:
        for slot in self.slots:
            w = slot.worker
            if w is not None:
                w.kill()
                w.proc.wait()
                w.alive = False
                w.close_fds()

    # -- description -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        devices = []
        for slot in self.slots:
            rows = (slot.info or {}).get("describe", {}).get("devices") or [{"device": slot.ordinal}]
            for row in rows:
                row = dict(row, device=slot.ordinal, sessions=slot.sessions)
                w = slot.worker
                if w is not None and w.alive:
                    row["worker_pid"] = w.pid
                devices.append(row)
        return {"lane": self.name, "runtime": self._runtime, "process": True, "devices": devices}

    def features(self) -> list[str]:
        return list(self._features)

    def _stats(self) -> list[dict]:
        out = []
        for slot in self.slots:
            w = slot.worker
            if w is None or not w.alive:
                continue
            try:
                stats = w.call([wire.RPC_STATS])
            except LaneError:
                continue
            self._copies_seen[id(w)] = int(stats.get("host_copies") or 0)
            out.append(stats)
        return out

    @property
    def host_copies(self) -> int:
        self._stats()
        return sum(self._copies_seen.values())

    def memory_budget(self) -> int | None:
        budgets = [s["memory_budget"] for s in self._stats() if s.get("memory_budget") is not None]
        return min(budgets) if budgets else None

    def device_memory(self) -> list[dict[str, int]] | None:
        rows: list[dict[str, int]] = []
        for stats in self._stats():
            rows.extend(stats.get("device_memory") or [])
        return rows

    # -- imports ---------------------------------------------------------------------------------
    def _slot(self, device: int | None, field: str, error=InvalidInput) -> "_Slot":
        if device is None:
            return self.slots[0]
        for slot in self.slots:
            if slot.ordinal == device:
                return slot
        raise error(field, f"the {self.name} lane has devices "
                           f"{', '.join(str(s.ordinal) for s in self.slots)}, not {device}")

    def import_buffer(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> ProxyImport:
        slot = self._slot(layout.device, "device")
        w = slot.worker
        if w is None:
            raise LaneFailure("device", f"the {self.name} lane's worker for device {slot.ordinal} is not running")
        import_id = next(self._ids)
        keys = sorted(fds)
        reply = w.call([wire.RPC_IMPORT, import_id, wire.layout_to_wire(dataclasses.replace(layout, device=slot.ordinal)),
                        keys], [fds[k] for k in keys])
        fence_fds: list[OwnedFd] = []
        if reply.get("implicit_fences"):
            fence_fds = [fds[k].dup() for k in layout.fd_indices()]
        return ProxyImport(w, import_id, bool(reply.get("zero_copy")), fence_fds)

    # -- sessions --------------------------------------------------------------------------------
    async def open_session(self, spec: SessionSpec, sink: FrameSink) -> ProxySession:
        if self._token is None:
            raise RuntimeError(f"the {self.name} lane is not running")
        if spec.device is not None:
            slot = self._slot(spec.device, "device", Unsupported)
        else:
            slot = min(self.slots, key=lambda s: s.sessions)
        with trio.move_on_after(START_TIMEOUT):
            await slot.ready.wait()
        w = slot.worker
        if w is None or not w.alive or not slot.ready.is_set():
            raise LaneFailure("session", f"the {self.name} lane's worker for device {slot.ordinal} is not running")
        sid = next(self._ids)
        waiter: list = [trio.Event(), None]
        w.opening[sid] = waiter
        w.send([wire.OPEN, sid, wire.plan_to_wire(spec.plan), wire.geometry_to_wire(spec.geometry), spec.name,
                getattr(sink, "client_name", None)])
        # Shielded as the in-process lane's: the opener gets the session or the error, so no opened
        # session is left without an owner.
        with trio.CancelScope(shield=True):
            await waiter[0].wait()
        error, _device = waiter[1]
        if error is not None:
            raise wire.error_from_wire(error)
        session = ProxySession(w, sid, sink)
        w.sessions[sid] = session
        slot.sessions += 1
        return session

    # -- running ---------------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            await nursery.start(self._serve_slots)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop()

    async def _serve_slots(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        # Shielded from the daemon's cancellation: the workers' streams must keep running while they
        # stop (their last outcomes and releases); _stop cancels this once they have exited.
        with trio.CancelScope(shield=True) as scope:
            self._slots_scope = scope
            async with trio.open_nursery() as nursery:
                for slot in self.slots:
                    nursery.start_soon(slot.serve)
                task_status.started()

    async def _stop(self) -> None:
        """Ask every worker to stop (what runs finishes, what is queued is dropped and reported),
        wait for them to exit (bounded), kill what is left."""
        self.stopping = True
        for slot in self.slots:
            if slot.worker is not None and slot.worker.alive:
                slot.worker.send([wire.STOP])
        with trio.move_on_after(STOP_TIMEOUT):
            for slot in self.slots:
                await slot.done.wait()
        for slot in self.slots:
            if not slot.done.is_set() and slot.worker is not None:
                log.warning("lane worker %s did not stop within %.0f s; killing it", slot.worker.name, STOP_TIMEOUT)
                slot.worker.kill()
        with trio.move_on_after(10):
            for slot in self.slots:
                await slot.done.wait()
        if self._slots_scope is not None:
            self._slots_scope.cancel()


def _exit_text(rc: int | None) -> str:
    if rc is None:
        return "is still running"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"was killed by {name} ({-rc})"
    return f"exited with status {rc}"


def _child_env() -> dict[str, str]:
    """The daemon's environment, with the directories it imports vmafxd and vmafx from first on the path."""
    import vmafx

    env = dict(os.environ)
    roots = [str(Path(__file__).resolve().parents[3]), str(Path(vmafx.__file__).resolve().parents[1])]
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + ([old] if old else [])))
    return env
