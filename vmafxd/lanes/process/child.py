"""A lane's worker process: one device's GPU lane, run for the daemon over two sockets.

    python -m vmafxd.lanes.process.child --lane emu --config JSON --stream-fd N --rpc-fd M

The daemon (:mod:`.proxy`) starts one per device.  Here the real lane -- the
GPU lane built through :func:`vmafxd.lanes.create_lane`, restricted to the one
device by ``gpu_devices`` -- runs in a trio loop of its own: its device worker
thread (imports, uploads, launches, the statistics' host arithmetic, model
prediction, result building) shares this process's interpreter lock with
this small message loop, not the daemon's.

* trio thread: reads the stream (opens, submits, finishes, aborts), hands
  frames to the lane's sessions (a ``SUBMIT_MANY``'s run of frames in one
  ``submit_many``: one job group, as in the daemon's own process), gathers
  what the lane reports through its sinks and the frames whose release
  events completed, and sends them back coalesced (one packet per wake-up,
  whatever it holds).  It plays the daemon's reaper for the lane's release
  events: a frame's ``released`` is sent once its event is recorded and
  complete (never asking one that is not recorded, R5), and the event
  destroyed; a submit's frames are asked in their order, up to the first
  one not complete (see :meth:`Child.reap`).
* rpc thread: imports buffers (the fds arrive with ``SCM_RIGHTS`` and are
  closed once the lane has kept what it needs, as in the daemon), closes
  imports, answers the device-memory figures.

End of file on the stream (the daemon went away) ends the process; so does
the parent's death (``PR_SET_PDEATHSIG``).  ``STOP``: the lane's workers stop
(queued frames are dropped with ``LaneStopped``), what they reported and
released goes out, and the process exits 0.

``VX_PROF_WORKER=FILE`` in the daemon's environment runs each worker's trio
thread under cProfile into ``FILE.<pid>`` (as ``VX_PROF`` does the daemon in
scripts/bench_gpu.py; with ``VX_PROF_CPU=1`` too, on the thread's CPU clock).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import signal
import socket
import sys
import threading
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import trio

from vmafx.transport import TransportClosed, TrioPacketChannel

from ...core.release import release_in_order
from ..device import LaneFrame, LaneServices, SessionSpec
from ..errors import LaneError, LaneFailure
from . import wire

log = logging.getLogger("vmafxd.lanes.process")

#: how often pending release events are polled when no completion woke us (the daemon reaper's interval)
POLL_INTERVAL = 0.002
#: a frame naming a session or buffer this worker does not have (cannot happen with a daemon that
#: keeps its side of the wire): its failure, as it crosses
_NO_SUCH = ["LaneFailure", "", "the worker has no such session or buffer"]


class _Sink:
    """A session's sink in the worker: outcomes go to the outbox, to the daemon."""

    def __init__(self, child: "Child", sid: int, client_name: str | None):
        self.child = child
        self.sid = sid
        self.client_name = client_name  # the lane names the client in its warnings

    def frames_scored(self, items: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        # As the lane gives them: msgpack packs the (index, metrics) pairs as lists, a metrics
        # mapping that is not a dict through wire's default.
        self.child.send_scored(self.sid, items)

    def frame_failed(self, index: int, error: LaneError) -> None:
        self.child.send([wire.FAILED, self.sid, [[index, wire.error_to_wire(error)]]])


class Child:
    def __init__(self, lane, stream: socket.socket):
        self.lane = lane
        stream.setblocking(False)
        self.stream = TrioPacketChannel(trio.socket.from_stdlib_socket(stream), wire.INLINE_MAX + 16, wire.MAX_FDS + 1)
        self.sessions: dict[int, Any] = {}
        self.imports: dict[int, Any] = {}
        self._outbox: list = []
        self._kick = trio.Event()
        #: frames handed to the lane whose release was not sent yet: a run per submit (a group's
        #: frames in their order), each [tokens, release events, how many of them were released]
        self._pending: list[list] = []
        self._reap = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        #: a wake-up from the lane is on its way to the trio thread (see wake_threadsafe)
        self._wake_pending = False

    # -- sending (trio thread) ---------------------------------------------------------
    def send(self, message: list) -> None:
        self._outbox.append(message)
        self._kick.set()

    def send_scored(self, sid: int, items: Sequence) -> None:
        """A session's results.  Results that follow the same session's results last put in the
        outbox join that message (its list is our own: made here), so the daemon takes the batches
        of a packet as one run of results, in the same order."""
        outbox = self._outbox
        if outbox:
            last = outbox[-1]
            if last[0] == wire.SCORED and last[1] == sid:
                last[2].extend(items)
                return
        self.send([wire.SCORED, sid, list(items)])

    async def sender(self) -> None:
        # A worker pass's releases and results reach the outbox before this task runs: the lane's
        # wake-up (reaping in place, _wake) and the results it hopped over run in one pass of trio's
        # run_sync_soon queue, so they leave in one packet without a round more here.
        while True:
            await self._kick.wait()
            self._kick = trio.Event()
            try:
                await self.flush()
            except (TransportClosed, OSError):
                return  # the daemon is gone: the receiver sees the end of the stream too

    async def flush(self) -> None:
        while self._outbox:
            messages, self._outbox = self._outbox, []
            await wire.send_async(self.stream.send, messages)

    # -- releases ----------------------------------------------------------------------
    def wake_threadsafe(self) -> None:
        """(a lane's worker thread) A batch's reads completed: reap in the trio thread.  A wake-up
        on its way and not started covers this one too: it reaps what is complete when it runs,
        and this batch's event completed before we looked."""
        token = self._token
        if token is None or self._wake_pending:
            return
        self._wake_pending = True
        try:
            token.run_sync_soon(self._wake)
        except trio.RunFinishedError:
            self._wake_pending = False

    def _wake(self) -> None:
        # A pass here and now, not a wake-up of the reaper task: its releases join the packet of the
        # results the same worker pass handed over (the sender waits one round).  The reaper task
        # still polls for what completes unannounced (a frame completed on the host).
        self._wake_pending = False
        self.reap()

    def reap(self) -> None:
        """Send ``released`` for pending frames whose events are recorded and complete; destroy each once.

        A run (one submit's frames) is read in order and only up to its first frame not released
        yet: a session's frames are read by the device in their order, on its one stream, so the
        frames after that one are not complete either -- asking each of them (a device event
        query per frame per pass) would find nothing.  Nothing is released early by this, and R5
        holds (an event not recorded is not asked); a frame the lane completed on the host out of
        order (a refused GPU fence, say) is released once the frames before it are, when their
        batch's reads complete.
        """
        done: list[int] = []
        left = []
        for run in self._pending:
            tokens, events, k = run
            n = release_in_order(events, k)
            if n > k:
                done.extend(tokens[k:n])
            if n < len(events):
                run[2] = n
                left.append(run)
        self._pending = left
        if done:
            self.send([wire.RELEASED, done])

    async def reaper(self) -> None:
        while True:
            if self._pending:
                with trio.move_on_after(POLL_INTERVAL):
                    await self._reap.wait()
            else:
                await self._reap.wait()
            self._reap = trio.Event()
            self.reap()

    # -- receiving ---------------------------------------------------------------------
    async def receive(self, nursery: trio.Nursery) -> None:
        """Until STOP or end of file."""
        while True:
            try:
                pkt = await self.stream.receive()
            except (TransportClosed, OSError):
                return
            body, fds = wire.unpack_packet(pkt)
            for f in fds:
                f.close()
            for msg in wire.decode(body):
                if msg[0] == wire.STOP:
                    return
                self.dispatch(msg, nursery)

    def dispatch(self, msg: list, nursery: trio.Nursery) -> None:
        code = msg[0]
        if code == wire.SUBMIT_MANY:
            self.submit_many(msg[1], msg[2])
        elif code == wire.SUBMIT:
            _, sid, token, index, ref, dist, rf, df = msg
            session = self.sessions.get(sid)
            ref_imp, dist_imp = self.imports.get(ref), self.imports.get(dist)
            if session is None or ref_imp is None or dist_imp is None:
                # Cannot happen with a daemon that keeps its side of the wire; say so per frame.
                self.send([wire.FAILED, sid, [[index, _NO_SUCH]]])
                self.send([wire.RELEASED, [token]])
                return
            try:
                ev = session.submit(LaneFrame(index, ref_imp, dist_imp, wire.fence_from_wire(rf),
                                              wire.fence_from_wire(df)))
            except Exception as e:
                log.exception("submit of frame %d failed", index)
                self.send([wire.FAILED, sid, [[index, wire.error_to_wire(LaneFailure("", str(e)))]]])
                self.send([wire.RELEASED, [token]])
                return
            self._pending.append([[token], [ev], 0])
            if not self._reap.is_set() and len(self._pending) == 1:
                self._reap.set()  # the reaper parks without a timeout while nothing is pending
        elif code == wire.OPEN:
            nursery.start_soon(self.open_session, *msg[1:])
        elif code == wire.FINISH:
            session = self.sessions.get(msg[1])
            if session is not None:
                nursery.start_soon(self.finish_session, msg[1], session)
        elif code == wire.ABORT:
            session = self.sessions.pop(msg[1], None)
            if session is not None:
                session.abort()
        else:
            log.error("unknown message %r from the daemon", code)

    def submit_many(self, sid: int, entries: list) -> None:
        """A ``SUBMIT_MANY``: its frames to the session's ``submit_many``, one job group.

        A frame naming a session or buffer this worker does not have fails alone (``FAILED`` and
        its ``RELEASED``, as for ``SUBMIT``); the others still go.  The lane's ``submit_many`` is
        all or none, so when it raises every frame it was given fails, and is released, here.
        """
        session = self.sessions.get(sid)
        imports = self.imports
        frames: list[LaneFrame] = []
        tokens: list[int] = []
        failed: list[list] = []
        released: list[int] = []
        for entry in entries:
            if len(entry) == 4:
                token, index, ref, dist = entry
                rf = df = None
            else:
                token, index, ref, dist, rf, df = entry
                rf, df = wire.fence_from_wire(rf), wire.fence_from_wire(df)
            ref_imp, dist_imp = imports.get(ref), imports.get(dist)
            if session is None or ref_imp is None or dist_imp is None:
                failed.append([index, _NO_SUCH])  # cannot happen with a daemon that keeps its side
                released.append(token)
                continue
            frames.append(LaneFrame(index, ref_imp, dist_imp, rf, df))
            tokens.append(token)
        if frames:
            try:
                events = session.submit_many(frames)
            except Exception as e:
                log.exception("submit of frames %d..%d failed", frames[0].index, frames[-1].index)
                error = wire.error_to_wire(LaneFailure("", str(e)))
                failed.extend([f.index, error] for f in frames)
                released.extend(tokens)
            else:
                pending = self._pending
                parked = not pending  # the reaper parks without a timeout while nothing is pending
                pending.append([tokens, events, 0])
                if parked and not self._reap.is_set():
                    self._reap.set()
        if failed:
            self.send([wire.FAILED, sid, failed])
            self.send([wire.RELEASED, released])

    async def open_session(self, sid: int, plan: bytes, geometry: list, name: str | None,
                           client_name: str | None) -> None:
        try:
            spec = SessionSpec(wire.plan_from_wire(plan), wire.geometry_from_wire(geometry), None, name)
            session = await self.lane.open_session(spec, _Sink(self, sid, client_name))
        except Exception as e:
            self.send([wire.OPENED, sid, wire.error_to_wire(e), None])
            return
        self.sessions[sid] = session
        self.send([wire.OPENED, sid, None, session.device])

    async def finish_session(self, sid: int, session) -> None:
        summary = await session.finish()
        self.sessions.pop(sid, None)
        self.send([wire.FINISHED, sid, summary.pooled, summary.aggregate])

    # -- rpc (its own thread) ----------------------------------------------------------
    def serve_rpc(self, rpc: socket.socket) -> None:
        while True:
            try:
                msg, fds = wire.recv_blocking(rpc)
            except (TransportClosed, OSError):
                return
            try:
                reply = [0, self.rpc(msg, fds)]
            except Exception as e:
                if not isinstance(e, LaneError) and not isinstance(e, ValueError):
                    log.exception("rpc %r failed", msg[0])
                reply = [1, wire.error_to_wire(e)]
            finally:
                for f in fds:
                    f.close()  # the lane kept what it needs (a dup, a mapping), as in the daemon
            try:
                wire.send_blocking(rpc, reply)
            except (TransportClosed, OSError):
                return

    def rpc(self, msg: list, fds) -> Any:
        code = msg[0]
        if code == wire.RPC_IMPORT:
            _, import_id, layout, keys = msg
            imp = self.lane.import_buffer(wire.layout_from_wire(layout), wire.fd_map(keys, fds))
            self.imports[import_id] = imp
            return {"zero_copy": bool(imp.zero_copy), "implicit_fences": bool(imp.implicit_fence_fds())}
        if code == wire.RPC_CLOSE:
            for import_id in msg[1]:
                imp = self.imports.pop(import_id, None)
                if imp is not None:
                    imp.close()
            return None
        if code == wire.RPC_STATS:
            return {"host_copies": self.lane.host_copies, "device_memory": self.lane.device_memory(),
                    "memory_budget": self.lane.memory_budget()}
        raise LaneFailure("", f"unknown request {code!r}")


def _ready_info(lane) -> dict:
    runtime = getattr(lane, "runtime", None)
    return {
        "describe": lane.describe(),
        "features": list(lane.features()),
        "device_count": int(runtime.device_count()) if runtime is not None else 1,
        "event_kind": getattr(lane, "event_kind", None),
        "memory_budget": lane.memory_budget(),
        "pid": os.getpid(),
    }


async def _serve(lane, stream: socket.socket, rpc: socket.socket, wake_target: list) -> None:
    child = Child(lane, stream)
    wake_target.append(child.wake_threadsafe)
    child._token = trio.lowlevel.current_trio_token()
    lane_scope = trio.CancelScope()
    lane_done = trio.Event()

    async def run_lane(task_status=trio.TASK_STATUS_IGNORED):
        try:
            with lane_scope:
                await lane.run(task_status=task_status)
        finally:
            lane_done.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(run_lane)
        threading.Thread(target=child.serve_rpc, args=(rpc,), name="vmafxd-lane-rpc", daemon=True).start()
        nursery.start_soon(child.sender)
        nursery.start_soon(child.reaper)
        child.send([wire.READY, _ready_info(lane)])
        await child.receive(nursery)
        # STOP or end of file: the workers stop (what is queued is dropped with LaneStopped and its
        # events complete), their last reports hop here; then send what is left and leave.
        lane_scope.cancel()
        with trio.move_on_after(30):
            await lane_done.wait()
        for _ in range(3):
            await trio.lowlevel.checkpoint()  # the workers' last hops (run_sync_soon) run
        child.reap()
        with trio.move_on_after(2):
            try:
                await child.flush()
            except (TransportClosed, OSError):
                pass
        nursery.cancel_scope.cancel()


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the daemon dies (Linux), in case it could not close our sockets."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vmafxd.lanes.process.child")
    ap.add_argument("--lane", required=True)
    ap.add_argument("--config", required=True, help="JSON: the lane's configuration values")
    ap.add_argument("--stream-fd", type=int, required=True)
    ap.add_argument("--rpc-fd", type=int, required=True)
    ap.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)
    _die_with_parent(args.parent)
    values = json.loads(args.config)
    logging.basicConfig(level=getattr(logging, str(values.get("log_level", "info")).upper(), logging.INFO),
                        stream=sys.stderr,
                        format="%(asctime)s vmafxd-lane-worker[%(process)d] %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon stops us (a terminal's ^C reaches the group)
    stream = socket.socket(fileno=args.stream_fd)
    rpc = socket.socket(fileno=args.rpc_fd)
    if values.get("gpu_devices") is not None:
        values["gpu_devices"] = tuple(values["gpu_devices"])
    config = SimpleNamespace(**values)
    from .. import LaneUnavailable, create_lane

    # The lane wakes "the reaper" when a batch's reads complete: here, the worker's own reaper
    # (set once the trio loop runs; the lane calls it only from then on).
    wake_target: list = []
    services = LaneServices(wake_reaper=lambda: wake_target[0]() if wake_target else None)
    try:
        lane = create_lane(args.lane, config, services)
    except (LaneUnavailable, ValueError) as e:
        wire.send_blocking(stream, [[wire.READY, None, getattr(e, "reason", str(e))]])
        return 0
    if os.environ.get("VX_PROF_WORKER"):  # cProfile of the worker's trio thread into FILE.<pid> (benchmarks)
        import cProfile
        import time

        # VX_PROF_CPU=1: the thread's own CPU clock, as scripts/bench_gpu.py does the daemon's
        prof = cProfile.Profile(time.thread_time) if os.environ.get("VX_PROF_CPU") == "1" else cProfile.Profile()
        try:
            prof.runcall(trio.run, _serve, lane, stream, rpc, wake_target)
        finally:
            prof.dump_stats(f"{os.environ['VX_PROF_WORKER']}.{os.getpid()}")
        return 0
    trio.run(_serve, lane, stream, rpc, wake_target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
