"""The lane the daemon holds when a GPU lane runs in worker processes (``lane_process = true``).

:class:`ProcessLane` implements the lane interface (:mod:`vmafxd.lanes.device`)
for the daemon exactly as the in-process GPU lane does; behind it, one worker
process per device (:mod:`.child`) runs the real GPU lane for that device.
What crosses, and how, is :mod:`.wire`.

Per device a :class:`~.worker.DeviceSlot` holds the current
:class:`~.worker.WorkerProcess` (one child process; :mod:`.worker`).  In the
daemon's trio thread:

* ``submit`` appends a message to the worker's outbox and returns a
  :class:`ProxyReleaseEvent`, unrecorded until the worker says the frame's
  last reader finished; ``submit_many`` appends one message for a run of
  frames (one job group in the worker, as in-process); a sender task sends
  the outbox as one packet per wake-up (so many submits go in one packet once
  the daemon is busy);
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
import logging
from typing import Any, Mapping, Sequence

import trio

from vmafx.transport import OwnedFd

from ...core.batch_size import check_batch_setting
from ...core.layout import BufferLayout
from ..device import FrameSink, Lane, LaneFrame, LaneImport, LaneServices, LaneSession, LaneSummary, SessionSpec
from ..errors import InvalidInput, LaneError, LaneFailure, Unsupported
from ..gpu.lane import GpuLane
from ..gpu.release_events import BatchReleaseHandle
from ..runtime import RuntimeUnavailable
from . import wire
from .worker import START_TIMEOUT, STOP_TIMEOUT, DeviceSlot, StartFailed, WorkerProcess

__all__ = ["ProcessLane", "ProxyReleaseEvent"]

log = logging.getLogger("vmafxd.lanes.process")



class ProxyReleaseEvent(BatchReleaseHandle):
    """A frame's release event in the daemon: the worker's :class:`BatchReleaseHandle` seen from here,
    never bound to a device event but completed on the host once the worker says the frame's last
    reader finished (or the worker is gone).  It announces itself (the receiver wakes the reaper)."""

    __slots__ = ()
    signals_completion = True

    complete = BatchReleaseHandle.complete_on_host


@dataclasses.dataclass(eq=False)
class ProxyImport(LaneImport):
    """A buffer imported by one worker process; ``close`` (the reaper's thread) frees it there."""

    worker: "WorkerProcess"
    id: int
    #: the daemon's own dups of a host-read dma-buf's fds, for its implicit fences (R8)
    fence_fds: list[OwnedFd]
    #: the worker's import's own (LaneImport's)
    zero_copy: bool = True
    closed: bool = False

    @property
    def device(self) -> int:
        return self.worker.slot.ordinal

    def implicit_fence_fds(self):
        return [f.fileno() for f in self.fence_fds if not f.closed]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for f in self.fence_fds:
            f.close()
        if self.worker.alive:
            try:
                self.worker.call([wire.RPC_CLOSE, [self.id]])
            except LaneError:
                pass  # the worker died meanwhile: the import died with it


class ProxySession(LaneSession):
    def __init__(self, worker: "WorkerProcess", sid: int, sink: FrameSink):
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

    def _refusal(self, frame: LaneFrame) -> LaneError | None:
        """Why this session's worker cannot take ``frame`` (None: it can): the session died with
        its worker, or a buffer was imported on another device or by a worker that has since died."""
        if self._dead is not None:
            return LaneFailure("", f"{self._dead}; this session cannot go on (its state died with the "
                                   f"worker): open a new one")
        w = self.worker
        for role, imp in (("ref", frame.ref), ("dist", frame.dist)):
            if imp.worker is w:
                continue
            if imp.worker.slot is not w.slot:
                return InvalidInput(role, f"the buffer lives on device {imp.device}; this session runs "
                                          f"on device {self.device}")
            return LaneFailure(role, "the buffer was imported by a lane worker process that has "
                                     "since died: register it again")
        return None

    def submit(self, frame: LaneFrame) -> ProxyReleaseEvent:
        if self._done:
            raise RuntimeError("submit after finish or abort")
        ev = ProxyReleaseEvent()
        refusal = self._refusal(frame)
        if refusal is not None:
            ev.complete()  # never read: released at once (the pending table wakes the reaper for it)
            self._deliver_failed([(frame.index, refusal)])
            return ev
        w = self.worker
        token = next(self.lane._tokens)
        w.releases[token] = ev
        self.inflight.add(frame.index)
        w.frames_sent += 1
        w.send([wire.SUBMIT, self.sid, token, frame.index, frame.ref.id, frame.dist.id,
                wire.fence_to_wire(frame.ref_gpu_fence), wire.fence_to_wire(frame.dist_gpu_fence)])
        return ev

    def submit_many(self, frames: Sequence[LaneFrame]) -> list[ProxyReleaseEvent]:
        """Frames handed over in one go (``LaneSession.submit_many``): one ``SUBMIT_MANY`` message,
        one job group in the worker; one release event per frame, in order.

        All or none as the lane interface has it: it raises (a submit after finish or abort) before
        any frame is taken; otherwise every frame is taken and gets exactly one outcome.  A frame
        :meth:`submit` would refuse (the session died with its worker, a buffer of another device
        or of a dead worker) is refused the same way here -- its failure through the sink, its
        event complete at once -- and the others still go to the worker.
        """
        if self._done:
            raise RuntimeError("submit after finish or abort")
        w = self.worker
        releases, inflight, tokens = w.releases, self.inflight, self.lane._tokens
        alive = self._dead is None
        events: list[ProxyReleaseEvent] = []
        entries: list[list] = []
        refused: list[tuple[int, LaneError]] = []
        for frame in frames:
            ev = ProxyReleaseEvent()
            events.append(ev)
            ref, dist = frame.ref, frame.dist
            if alive and ref.worker is w and dist.worker is w:
                token = next(tokens)
                releases[token] = ev
                inflight.add(frame.index)
                rf, df = frame.ref_gpu_fence, frame.dist_gpu_fence
                if rf is None and df is None:
                    entries.append([token, frame.index, ref.id, dist.id])
                else:
                    entries.append([token, frame.index, ref.id, dist.id,
                                    wire.fence_to_wire(rf), wire.fence_to_wire(df)])
            else:
                ev.complete()  # never read: released at once, as submit's refusals
                refused.append((frame.index, self._refusal(frame)))
        if entries:
            w.frames_sent += len(entries)
            w.groups_sent += 1
            w.send([wire.SUBMIT_MANY, self.sid, entries])
        if refused:
            # after the group is out: the sink's calls come last, so nothing stands between the
            # frames taken and their message
            self._deliver_failed(refused)
        return events

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
            "gpu_batch": check_batch_setting(getattr(config, "gpu_batch", "auto")),
            "log_level": str(getattr(config, "log_level", "info")),
        }
        self.stopping = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._slots_scope: trio.CancelScope | None = None
        ordinals = getattr(config, "gpu_devices", None)
        first = DeviceSlot(self, ordinals[0] if ordinals else 0)
        self.slots = [first]
        try:
            info = first.start_blocking()
            if not ordinals:
                ordinals = range(int(info.get("device_count", 1)))
            for ordinal in ordinals[1:]:
                slot = DeviceSlot(self, ordinal)
                slot.start_blocking()
                self.slots.append(slot)
        except StartFailed as e:
            self._kill_all()
            raise RuntimeUnavailable(name, str(e)) from None  # create_lane: LaneUnavailable
        except OSError as e:  # no process, socketpair or pidfd to be had (a sandbox's filter, limits)
            self._kill_all()
            raise RuntimeUnavailable(name, f"cannot start its worker process: {e}") from None
        except BaseException:
            self._kill_all()
            raise
        self.event_kind: str | None = info.get("event_kind")
        self._features = list(info.get("features", ()))
        self._runtime = info.get("describe", {}).get("runtime", name)
        #: host copies each worker counted, by pid, as last asked (a dead worker's stay in the sum)
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
            self._copies_seen[w.pid] = int(stats.get("host_copies") or 0)
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
    def _slot(self, device: int | None, error=InvalidInput) -> "DeviceSlot":
        """The slot of that device ordinal (None: the first); ``error`` on the field ``device`` if none."""
        if device is None:
            return self.slots[0]
        for slot in self.slots:
            if slot.ordinal == device:
                return slot
        raise error("device", f"the {self.name} lane has devices "
                              f"{', '.join(str(s.ordinal) for s in self.slots)}, not {device}")

    def import_buffer(self, layout: BufferLayout, fds: Mapping[int, OwnedFd]) -> ProxyImport:
        slot = self._slot(layout.device)
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
        return ProxyImport(w, import_id, fence_fds, zero_copy=bool(reply.get("zero_copy")))

    # -- sessions --------------------------------------------------------------------------------
    async def open_session(self, spec: SessionSpec, sink: FrameSink) -> ProxySession:
        if self._token is None:
            raise RuntimeError(f"the {self.name} lane is not running")
        if spec.device is not None:
            slot = self._slot(spec.device, Unsupported)
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
