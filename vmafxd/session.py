"""A scoring session: its frames, their fences, their outcomes in order.

``open_session`` builds a :class:`Session` (:func:`build_plan` parses models
and features and names the culprit: ``models[i]``, ``features[i]``); the
client handler then feeds it decoded ``submit`` messages as
:class:`FrameRecord` objects.  :meth:`Session.check` refuses what cannot be
scored (index not increasing, unknown buffer, wrong geometry);
:meth:`Session.accept` takes references on the two buffers and queues the
frame for the session's own task, :meth:`Session.run`, which

1. waits for the frame's acquire fences on the host, bounded (R2), or for a
   fence-less dma-buf's implicit write fences (R8) -- here, in the session's
   task, so a slow fence holds back only its own session;
2. hands the frame to the lane (``LaneSession.submit``) and puts the returned
   release event into the pending-release table;
3. after ``close_session`` (or at shutdown), lets the lane flush and sends
   ``session_closed`` after the last outcome and the last ``released`` (the
   outbox holds it while a frame's release is pending).

Every decoded submit gets exactly one outcome: a refused or failed frame a
``frame_error``, the others what the lane reports.  Every decoded submit
gets exactly one ``released`` per role: through the pending-release table
(:meth:`SessionHost.track_release`) for accepted frames, at once for refused
ones.

The R15 plant: with ``VMAFXD_TEST_EARLY_RELEASE=1`` in its environment the
daemon sends a frame's ``released`` messages when it accepts the frame --
before the fences are waited for and before the worker reads it.  This is a
*deliberate bug* for tests (tests/daemon/test_early_release.py): a canary
producer that overwrites its buffer on ``released`` must then see wrong
scores.  Buffer references still follow the real release event, so the plant
cannot free memory a worker is reading.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import trio

from vmafx.protocol import (
    ErrorCode, FrameError, Limits, Message, RemoteProtocolError, Result, SessionClosed,
)

from . import features as feature_registry
from .buffers import BufferRecord, Geometry
from .fences import AcquireFence, wait_implicit_fences
from .lanes.device import LaneFrame, LaneSession
from .model import BUILTIN_VERSIONS, ModelError, ModelSet, load_model, parse_model_spec
from .outbox import OrderedOutbox, Slot
from .reaper import HostReleaseEvent, ReleaseEvent
from .scoring import FeatureRequest, PlanError, ScoringPlan, parse_feature_spec
from .features.declaration import OptionError

__all__ = ["Session", "FrameRecord", "SessionHost", "build_plan", "model_output_names", "early_release_planted"]

log = logging.getLogger("vmafxd.session")


def early_release_planted() -> bool:
    """The R15 test plant (see the module docstring)."""
    return os.environ.get("VMAFXD_TEST_EARLY_RELEASE") == "1"


# ---------------------------------------------------------------------------
# models and features


def _inval(field: str, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.E_INVAL, field, message)


def _sub(field: str, prefix: str) -> str:
    """``model.version`` -> ``.version`` (to hang under ``models[i]``)."""
    rest = field[len(prefix):] if field.startswith(prefix) else ("." + field if field else "")
    return rest if not rest or rest.startswith((".", "[")) else "." + rest


def _check_model_path(path: str, model_dirs: Sequence[str], field: str) -> None:
    """A client may name model files only inside the daemon's configured model directories.

    The daemon runs as a service user: letting any client make it open any
    path would let it probe (or block on a FIFO in) the daemon's file system.
    """
    real = os.path.realpath(path)
    for d in model_dirs:
        root = os.path.realpath(d)
        if real.startswith(root.rstrip("/") + "/") and os.path.isfile(real):
            return
    where = ", ".join(model_dirs) if model_dirs else "none are configured"
    raise RemoteProtocolError(ErrorCode.E_NOTSUP, field,
                              f"the daemon reads model files only from its model_dirs ({where}); "
                              f"use a built-in version= ({', '.join(BUILTIN_VERSIONS)})")


def build_plan(models: Sequence[str], features: Sequence[str], limits: Limits,
               model_dirs: Sequence[str] = (), model_texts: Sequence[str | None] = ()) -> ScoringPlan:
    """Parse ``open_session``'s models and features; errors name ``models[i]``/``features[i]``.

    ``model_texts[i]`` is the JSON a client read from ``models[i]``'s ``path=`` file: then
    the path is only a label and is never opened here."""
    texts = list(model_texts) + [None] * max(0, len(models) - len(model_texts))
    if len(models) > limits.max_models_per_session:
        raise _inval("models", f"{len(models)} models exceed the limit of {limits.max_models_per_session}")
    if len(features) > limits.max_features_per_session:
        raise _inval("features", f"{len(features)} features exceed the limit of {limits.max_features_per_session}")
    specs = []
    for i, text in enumerate(models):
        try:
            spec = parse_model_spec(text)
        except ModelError as e:
            raise _inval(f"models[{i}]{_sub(e.field, 'model')}", str(e).split(": ", 1)[-1]) from None
        if texts[i] is not None and spec.path is None:
            raise _inval(f"model_texts[{i}]", "content given for a model that is not path=")
        if spec.path is not None and texts[i] is None:
            _check_model_path(spec.path, model_dirs, f"models[{i}].path")
        specs.append(spec)
    if not specs and not features:
        specs = [parse_model_spec("version=vmaf_v0.6.1")]
    sets: list[ModelSet] = []
    for i, spec in enumerate(specs):
        default = "vmaf"
        if len(specs) > 1 and spec.name is None:
            default = spec.version or os.path.splitext(os.path.basename(spec.path or "model"))[0]
        try:
            sets.append(load_model(spec, default_name=default, text=texts[i] if i < len(texts) else None))
        except ModelError as e:
            raise _inval(f"models[{i}]{_sub(e.field, 'model')}", str(e).split(": ", 1)[-1]) from None
    requests: list[FeatureRequest] = []
    for i, text in enumerate(features):
        try:
            req = parse_feature_spec(text)
            decl = feature_registry.get(req.name)
            decl.resolve_options(req.options)
        except PlanError as e:
            raise _inval(f"features[{i}]", str(e).split(": ", 1)[-1]) from None
        except feature_registry.UnknownFeature as e:
            raise _inval(f"features[{i}]", str(e)) from None
        except OptionError as e:
            raise _inval(f"features[{i}].{e.field.split('.', 1)[-1]}", str(e).split(": ", 1)[-1]) from None
        requests.append(req)
    try:
        return ScoringPlan.build(sets, requests)
    except PlanError as e:
        where = "models" if e.field.startswith("model") else "features"
        raise _inval(where, str(e)) from None


def model_output_names(ms: ModelSet) -> list[str]:
    names = [ms.name]
    if ms.bootstrap:
        names += [m.name for m in ms.members]
        names += [f"{ms.name}_{s}" for s in ("bagging", "stddev", "ci_p95_lo", "ci_p95_hi")]
    return names


def _finite(metrics: Mapping[str, float]) -> dict[str, float | None]:
    """nil for values that are not finite, as libvmaf prints ``null``."""
    out: dict[str, float | None] = {}
    for k, v in metrics.items():
        v = float(v)
        out[k] = v if math.isfinite(v) else None
    return out


# ---------------------------------------------------------------------------
# frames


@dataclass(eq=False)
class FrameRecord:
    """One decoded ``submit`` as the daemon tracks it until its outcome and releases."""

    session: int
    index: int
    ref_id: int
    dist_id: int
    ref: BufferRecord | None = None
    dist: BufferRecord | None = None
    ref_fence: AcquireFence | None = None
    dist_fence: AcquireFence | None = None
    ref_gpu_fence: Any = None
    dist_gpu_fence: Any = None
    slot: Slot | None = None
    #: the ``released`` messages went out (exactly once)
    released_sent: bool = False
    #: the buffer references were dropped (exactly once)
    refs_dropped: bool = True
    #: the frame's one entry in the pending-release table exists
    release_tracked: bool = False
    #: called (trio thread) once the entry completed and ``released`` went out
    on_released: Any = None

    def close_fences(self) -> None:
        for f in (self.ref_fence, self.dist_fence):
            if f is not None:
                f.close()


class SessionHost(Protocol):
    """What a session needs from its client connection."""

    limits: Limits

    def emit(self, msg: Message) -> None: ...

    def send_released(self, frame: FrameRecord) -> None: ...

    def track_release(self, frame: FrameRecord, event: ReleaseEvent) -> None: ...

    def outcome_sent(self, session: "Session", msg: Message, accepted: bool, had_slot: bool) -> None: ...

    def session_finished(self, session: "Session") -> None: ...


class Session:
    OPEN, CLOSING, CLOSED = "open", "closing", "closed"

    def __init__(self, sid: int, host: SessionHost, lane_name: str, lane_session: LaneSession,
                 geometry: Geometry, plan: ScoringPlan, *, name: str | None = None, client_name: str = ""):
        self.id = sid
        self.host = host
        self.lane_name = lane_name
        self.lane_session = lane_session
        self.geometry = geometry
        self.plan = plan
        self.name = name
        self.client_name = client_name
        self.models = [ms.name for ms in plan.models]
        self.metrics = plan.metric_names() + [n for ms in plan.models for n in model_output_names(ms)]
        self.state = Session.OPEN
        self.close_seq: int | None = None
        self.last_index: int | None = None
        self.submitted = 0  # decoded submits
        self.accepted = 0
        self.scored = 0
        self.failed = 0
        self.outbox = OrderedOutbox(self._emit)
        self._queue_send, self._queue_recv = trio.open_memory_channel[FrameRecord](math.inf)
        #: frames handed to the lane, by index, until their outcome
        self._in_lane: dict[int, FrameRecord] = {}
        self.finished = trio.Event()
        #: set when session_closed has gone out
        self.closed_sent = trio.Event()
        self._scope = trio.CancelScope()
        #: frames whose release entry has not completed yet; each holds the outbox, so
        #: session_closed waits for them (OrderedOutbox.hold)
        self._releasing = 0
        self.early_release = early_release_planted()

    # -- bookkeeping ------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self.outbox)

    def row(self) -> dict[str, Any]:
        g = self.geometry
        return {
            "session": self.id, "client": self.client_name, "name": self.name, "lane": self.lane_name,
            "device": self.lane_session.device, "width": g.width, "height": g.height,
            "pixel_format": g.pixel_format.value, "bitdepth": g.bitdepth, "models": list(self.models),
            "submitted": self.submitted, "scored": self.scored, "failed": self.failed,
            "in_flight": self.in_flight, "state": self.state,
        }

    def _emit(self, msg: Message, slot: Slot | None) -> None:
        if isinstance(msg, SessionClosed):
            self.state = Session.CLOSED
            self.host.emit(msg)
            self.closed_sent.set()
            self.host.session_finished(self)
            return
        self._count(msg)
        self.host.emit(msg)
        self.host.outcome_sent(self, msg, slot is not None and slot.accepted, slot is not None)

    def _count(self, msg: Message) -> None:
        if isinstance(msg, Result):
            self.scored += 1
        else:
            self.failed += 1

    # -- submit (trio thread, from the client handler) -----------------------------------

    def reserve(self, frame: FrameRecord, room: bool = True) -> None:
        """A decoded submit of this session takes its place in the order of outcomes.

        ``room`` is False when the client already has too many unanswered
        frames; the frame then gets no slot (and is refused).
        """
        self.submitted += 1
        if self.state == Session.OPEN and room:
            frame.slot = self.outbox.reserve(frame.index)

    def check(self, frame: FrameRecord, buffers) -> None:
        """Refuse what cannot be scored; on success ``frame.ref``/``frame.dist`` are set (not yet referenced)."""
        if self.state != Session.OPEN:
            raise RemoteProtocolError(ErrorCode.E_STATE, "session", f"session {self.id} is closing")
        if self.last_index is not None and frame.index <= self.last_index:
            raise RemoteProtocolError(
                ErrorCode.E_STATE, "index",
                f"{frame.index} does not follow {self.last_index}: indices must strictly increase",
            )
        for role in ("ref", "dist"):
            bid = getattr(frame, f"{role}_id")
            rec = buffers.get(bid)
            if rec is None:
                raise RemoteProtocolError(ErrorCode.E_NOENT, role, f"no buffer {bid} is registered")
            diff = rec.geometry.differences(self.geometry)
            if diff:
                raise _inval(role, f"buffer {bid} does not match the session: {', '.join(diff)}")
            setattr(frame, role, rec)

    def accept(self, frame: FrameRecord) -> None:
        assert frame.ref is not None and frame.dist is not None and frame.slot is not None
        frame.slot.accepted = True
        frame.ref.ref()
        frame.dist.ref()
        frame.refs_dropped = False
        self.last_index = frame.index
        self.accepted += 1
        if self.early_release:
            # R15 plant: a deliberately early release (module docstring).
            self.host.send_released(frame)
        self._queue_send.send_nowait(frame)

    def refuse(self, frame: FrameRecord, err: RemoteProtocolError) -> None:
        """A decoded submit that will not be scored: its frame_error in order."""
        msg = FrameError(session=frame.session, index=frame.index, code=err.code.value, field=err.field,
                         message=err.message[:1024])
        if frame.slot is not None:
            self.outbox.fill(frame.slot, msg)
        else:
            # No place in the order (the session is closing, or the client has
            # flooded it with refused frames): answered at once.
            self._count(msg)
            self.host.emit(msg)
            self.host.outcome_sent(self, msg, False, False)

    # -- close ----------------------------------------------------------------------------

    def close(self, seq: int | None) -> None:
        if self.state != Session.OPEN:
            raise RemoteProtocolError(ErrorCode.E_STATE, "session", f"session {self.id} is already closing")
        self.state = Session.CLOSING
        self.close_seq = seq
        self._queue_send.close()

    def fail_unanswered(self, code: ErrorCode, message: str) -> None:
        """Give every frame without an outcome a ``frame_error`` (shutdown past its deadline)."""
        for slot in self.outbox.unfilled():
            self._in_lane.pop(slot.index, None)
            self.outbox.fill(slot, FrameError(session=self.id, index=slot.index, code=code.value,
                                              field="", message=message))

    # -- the lane's sink (trio thread) --------------------------------------------------------

    def frames_scored(self, items: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        for index, metrics in items:
            frame = self._in_lane.pop(index, None)
            if frame is None or frame.slot is None or frame.slot.filled:
                continue
            self.outbox.fill(frame.slot, Result(session=self.id, index=index, metrics=_finite(metrics)))

    def frame_failed(self, index: int, code: ErrorCode | str, field: str, message: str) -> None:
        frame = self._in_lane.pop(index, None)
        if frame is None or frame.slot is None or frame.slot.filled:
            return
        self.outbox.fill(frame.slot, FrameError(session=self.id, index=index, code=ErrorCode(code).value,
                                                field=field, message=message[:1024]))

    # -- the session's task -----------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the session's task (shutdown past its deadline); its finally releases what it holds."""
        self._scope.cancel()

    async def run(self) -> None:
        """Fence waits and hand-over, in index order; then flush and ``session_closed``."""
        with self._scope:
            await self._run()

    async def _run(self) -> None:
        current: FrameRecord | None = None
        lane_finished = False
        try:
            async for frame in self._queue_recv:
                current = frame
                await self._hand_over(frame)
                current = None
            summary = await self.lane_session.finish()
            lane_finished = True
            for index in list(self._in_lane):
                self.frame_failed(index, ErrorCode.E_INTERNAL, "", "the lane returned no outcome for this frame")
            # session_closed leaves after the last outcome and after the last
            # ``released`` of the session: the outbox holds it while any frame's
            # release entry is pending, so a producer may take "closed" to mean
            # "no buffer of this session is held".  The lane has finished, so its
            # events should be complete and the reaper only has to get to them.
            # The hold sits where session_closed is sent rather than in a wait
            # here, so no path can overtake it: outcomes reach the session before
            # the reaper has seen their events, a shutdown fills the last slots
            # itself, and a bounded wait would send session_closed anyway once
            # it ran out.
            self.outbox.close(lambda: SessionClosed(
                re=self.close_seq, session=self.id, frames=self.scored, failed=self.failed,
                pooled=summary.pooled, aggregate=summary.aggregate,
            ))
            with trio.move_on_after(10):
                await self.closed_sent.wait()
            if not self.closed_sent.is_set():
                # A lane that broke its promise (an event never completes): say so, and
                # still never send session_closed while a buffer of the session is held.
                log.error("session %d: %d frames still unreleased 10 s after the lane finished; "
                          "session_closed waits for them", self.id, self._releasing)
                await self.closed_sent.wait()
        finally:
            # Cancelled (client gone, shutdown past its deadline): frames that never
            # reached the lane are released unread; the lane drops the rest.
            if current is not None and not current.release_tracked:
                self._release_unread(current)  # cancelled in its fence wait
            while True:
                try:
                    frame = self._queue_recv.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                self._release_unread(frame)
            self._queue_recv.close()
            if self.state != Session.CLOSED and not lane_finished:
                self.lane_session.abort()
            self.finished.set()

    def _track(self, frame: FrameRecord, event: ReleaseEvent) -> None:
        """The frame's one entry in the pending-release table; session_closed waits for it."""
        if self.outbox.closed:
            # Cannot happen: the final message waits for every hold, and frames are
            # tracked only before the session task ends.  Loud if it ever does.
            log.error("session %d: frame %d tracked for release after session_closed", self.id, frame.index)
        self._releasing += 1
        self.outbox.hold()  # before tracking: a table may complete the entry at once
        frame.on_released = self._released
        self.host.track_release(frame, event)

    def _released(self) -> None:
        """The frame's ``released`` went out (ClientHandler._complete_release calls this after)."""
        self._releasing -= 1
        self.outbox.unhold()

    def _release_unread(self, frame: FrameRecord) -> None:
        frame.close_fences()
        self._track(frame, HostReleaseEvent.completed())

    async def _hand_over(self, frame: FrameRecord) -> None:
        limits = self.host.limits
        for role, fence in (("ref", frame.ref_fence), ("dist", frame.dist_fence)):
            rec: BufferRecord = getattr(frame, role)
            if fence is not None:
                ok = await fence.wait(limits.fence_timeout_ms / 1000)
                fence.close()
                if not ok:
                    return self._fail_unread(frame, ErrorCode.E_TIMEOUT, fence.field,
                                             f"the {fence.kind} acquire fence did not signal within "
                                             f"{limits.fence_timeout_ms} ms")
            elif getattr(frame, f"{role}_gpu_fence") is None:
                for fd in rec.imp.implicit_fence_fds():
                    if not await wait_implicit_fences(fd, limits.implicit_fence_timeout_ms / 1000):
                        return self._fail_unread(
                            frame, ErrorCode.E_TIMEOUT, role,
                            f"no acquire fence was given and the dma-buf's implicit write fences did not "
                            f"signal within {limits.implicit_fence_timeout_ms} ms; gave up (attach an "
                            f"acquire fence)")
        frame.close_fences()
        if self.state == Session.CLOSED or (frame.slot is not None and frame.slot.filled):
            # Answered meanwhile (shutdown past its deadline): nothing to score.
            return self._release_unread(frame)
        lane_frame = LaneFrame(frame.index, frame.ref.imp, frame.dist.imp,
                               frame.ref_gpu_fence, frame.dist_gpu_fence)
        self._in_lane[frame.index] = frame
        try:
            event = self.lane_session.submit(lane_frame)
        except Exception as e:
            self._in_lane.pop(frame.index, None)
            log.exception("session %d: the lane refused frame %d", self.id, frame.index)
            return self._fail_unread(frame, ErrorCode.E_INTERNAL, "", f"the lane failed: {e}")
        self._track(frame, event)

    def _fail_unread(self, frame: FrameRecord, code: ErrorCode, field: str, message: str) -> None:
        frame.close_fences()
        if frame.slot is not None and not frame.slot.filled:
            self.outbox.fill(frame.slot, FrameError(session=self.id, index=frame.index, code=code.value,
                                                    field=field, message=message))
        self._track(frame, HostReleaseEvent.completed())
