"""A scoring session: its plan, its lane session, its fence waits, and its frame ledger.

``open_session`` builds a :class:`Session` (:func:`build_plan` parses models
and features -- options are resolved once, by the scoring plan -- and names
the culprit: ``models[i]``, ``features[i]``); the client handler then feeds it
decoded ``submit`` messages as :class:`~vmafxd.ledger.FrameRecord` objects.
:meth:`Session.check` refuses what cannot be scored (index not increasing,
unknown buffer, wrong geometry); :meth:`Session.accept` has the ledger take
references on the two buffers and queues the frame for the session's own
task, :meth:`Session.run`, which

1. waits for the frame's acquire fences on the host, bounded (R2), or for a
   fence-less dma-buf's implicit write fences (R8) -- here, in the session's
   task, so a slow fence holds back only its own session;
2. hands the frame to the lane (``LaneSession.submit``) and gives the
   returned release event to the ledger, which puts it into the
   pending-release table;
3. after ``close_session`` (or at shutdown), lets the lane flush and has the
   ledger send ``session_closed`` after the last outcome and the last
   ``released``.

What happens to each frame -- its one outcome, its releases, the order they
leave in -- is decided by the session's :class:`~vmafxd.ledger.FrameLedger`
alone (docs/frame-life.md).  The session is the lane's sink
(``frames_scored``/``frame_failed``) and passes the lane's reports on to it.
A ledger that refuses a transition does not leave the session open
(:meth:`Session.ledger_broken`).

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
import os
from collections import deque
from dataclasses import replace
from typing import Any, Mapping, Protocol, Sequence

import trio

from vmafx.protocol import ErrorCode, Limits, Message, RemoteProtocolError, SessionClosed

from .buffers import BufferRecord
from .core.layout import Geometry
from .core.scoring import (
    DEFAULT_MODEL, FeatureRequest, PlanError, ScoringPlan, default_model_name, parse_feature_spec,
)
from .fences import wait_implicit_fences
from .lane_errors import protocol_code
from .lanes.device import LaneFrame, LaneSession
from .lanes.errors import LaneError
from .ledger import FrameLedger, FrameRecord, FrameState, LedgerError, LedgerHost, ReleaseState
from .model import ModelError, ModelSet, load_model, parse_model_spec
from .model_files import read_model_file

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
            raise _inval(f"models[{i}]{_sub(e.field, 'model')}", e.reason) from None
        if texts[i] is not None and spec.path is None:
            raise _inval(f"model_texts[{i}]", "content given for a model that is not path=")
        if spec.path is not None and texts[i] is None:
            # A model file named by path is read beneath model_dirs, never following a symlink
            # (model_files.py); a client that read its own file sent the content instead.
            texts[i] = read_model_file(spec.path, model_dirs, f"models[{i}].path")
        specs.append(spec)
    if not specs and not features:
        specs = [parse_model_spec(DEFAULT_MODEL)]
        texts = [None]
    sets: list[ModelSet] = []
    for i, spec in enumerate(specs):
        try:
            sets.append(load_model(spec, default_name=default_model_name(spec, len(specs)),
                                   text=texts[i] if i < len(texts) else None))
        except ModelError as e:
            raise _inval(f"models[{i}]{_sub(e.field, 'model')}", e.reason) from None
    requests: list[FeatureRequest] = []
    for i, text in enumerate(features):
        try:
            req = parse_feature_spec(text)
        except PlanError as e:
            raise _inval(f"features[{i}]", e.reason) from None
        requests.append(replace(req, label=f"features[{i}]"))
    try:
        return ScoringPlan.build(sets, requests)  # the one place options are resolved
    except PlanError as e:
        if e.field.startswith("features["):  # a request's own error names where it came from
            raise _inval(e.field, e.reason) from None
        where = "models" if e.field.startswith("model") else "features"
        raise _inval(where, str(e)) from None


def model_output_names(ms: ModelSet) -> list[str]:
    names = [ms.name]
    if ms.bootstrap:
        names += [m.name for m in ms.members]
        names += [f"{ms.name}_{s}" for s in ("bagging", "stddev", "ci_p95_lo", "ci_p95_hi")]
    return names


# ---------------------------------------------------------------------------
# the session


class FrameQueue:
    """Accepted frames on their way to the session's task: a deque and a wake-up.

    What a trio memory channel did here, for a frame each: ``put`` is its ``send_nowait``
    (``ClosedResourceError`` once closed, ``BrokenResourceError`` once the task stopped
    reading), ``get_all`` its ``receive`` (empty at the end).  The channel's send and receive
    were a measurable share of a frame's cost on the trio thread.  Unlike ``receive``,
    ``get_all`` takes every frame queued: one await a wake-up, not a frame (the task hands
    the run of frames with nothing to wait for to the lane at once; a fence wait still
    suspends it frame by frame).
    """

    __slots__ = ("_frames", "_wakeup", "closed", "_reader_gone")

    def __init__(self) -> None:
        self._frames: deque[FrameRecord] = deque()
        self._wakeup = trio.Event()
        self.closed = False
        self._reader_gone = False

    def put(self, frame: FrameRecord) -> None:
        if self._reader_gone:
            raise trio.BrokenResourceError("the session's task has stopped")
        if self.closed:
            raise trio.ClosedResourceError("the session's queue is closed")
        frames = self._frames
        frames.append(frame)
        if len(frames) == 1:  # it was empty: the task may be waiting
            self._wakeup.set()

    def put_many(self, frames: list[FrameRecord]) -> None:
        """:meth:`put` for each of ``frames`` (a submit_many's), one wake-up."""
        if self._reader_gone:
            raise trio.BrokenResourceError("the session's task has stopped")
        if self.closed:
            raise trio.ClosedResourceError("the session's queue is closed")
        queued = self._frames
        was_empty = not queued
        queued.extend(frames)
        if was_empty and queued:
            self._wakeup.set()

    def close(self) -> None:
        """No more frames; the task sees the end once it has taken what is queued."""
        self.closed = True
        self._wakeup.set()

    async def get_all(self) -> list[FrameRecord]:
        """Every frame queued (waiting for one), or an empty list once closed and empty: the
        session's task takes what a wake-up finds in one go, not one await a frame."""
        frames = self._frames
        while not frames:
            if self.closed:
                return []
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        taken = list(frames)
        frames.clear()
        return taken

    def take_all(self) -> list[FrameRecord]:
        """The task stops: what is still queued (released unread), and ``put`` refuses from now on."""
        self._reader_gone = True
        rest = list(self._frames)
        self._frames.clear()
        return rest


class SessionHost(LedgerHost, Protocol):
    """What a session needs from its client connection (the ledger's needs, and these)."""

    limits: Limits

    def session_finished(self, session: "Session") -> None: ...

    def outcomes_settled(self) -> None:
        """A run of outcomes from the lane has been sent (what the client holds may have changed)."""


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
        #: every frame of the session, its state, its order and its release (vmafxd/ledger.py)
        self.ledger = FrameLedger(sid, host, self._closed)
        #: why the ledger refused a transition (the session then stops taking frames)
        self.broken: str | None = None
        self._queue = FrameQueue()
        self.finished = trio.Event()
        #: set when session_closed has gone out
        self.closed_sent = trio.Event()
        self._scope = trio.CancelScope()
        self.early_release = early_release_planted()

    # -- bookkeeping ------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return self.ledger.unanswered

    @property
    def scored(self) -> int:
        return self.ledger.scored

    @property
    def failed(self) -> int:
        return self.ledger.failed

    def row(self) -> dict[str, Any]:
        g = self.geometry
        return {
            "session": self.id, "client": self.client_name, "name": self.name, "lane": self.lane_name,
            "device": self.lane_session.device, "width": g.width, "height": g.height,
            "pixel_format": g.pixel_format.value, "bitdepth": g.bitdepth, "models": list(self.models),
            "submitted": self.submitted, "scored": self.scored, "failed": self.failed,
            "in_flight": self.in_flight, "state": self.state,
        }

    def _closed(self, msg: Message) -> None:
        """session_closed went out (the ledger sends it after the last outcome and release)."""
        self.state = Session.CLOSED
        self.closed_sent.set()
        self.host.session_finished(self)

    def ledger_broken(self, err: LedgerError) -> None:
        """The ledger refused a transition (a daemon bug): stop taking frames, fail the rest, close.

        The session does not stay open on a broken ledger: new submits are
        refused (``E_STATE``), every frame without an outcome gets an
        ``E_INTERNAL`` frame_error, and the session task finishes and sends
        ``session_closed`` as for a close.
        """
        log.error("session %d: %s; the session stops taking frames", self.id, err.message)
        if self.broken is None:
            self.broken = err.message
        if self.state == Session.OPEN:
            self.state = Session.CLOSING
            self._queue.close()
        try:
            self.ledger.fail_unanswered(ErrorCode.E_INTERNAL, f"the daemon's frame ledger failed: {err.message}")
        except LedgerError:
            log.exception("session %d: failing the unanswered frames failed too", self.id)

    # -- submit (trio thread, from the client handler) -----------------------------------

    def receive(self, frame: FrameRecord, room: bool = True) -> None:
        """A decoded submit of this session takes its place in the order of outcomes.

        ``room`` is False when the client already has too many unanswered
        frames; the frame then gets no place (and is refused).
        """
        self.submitted += 1
        self.ledger.receive(frame, place=self.state == Session.OPEN and room)

    def receive_many(self, frames: list[FrameRecord]) -> int:
        """Frames of a submit_many the client handler found acceptable as a group (checked as
        :meth:`check` would, with room for all): placed, accepted and queued in one step.
        Returns how many were accepted: all, unless the ledger refuses a transition (a bug:
        then, as :meth:`accept` does, the session stops and the frames not accepted are refused)."""
        ledger = self.ledger
        self.submitted += len(frames)
        ledger.receive_many(frames)
        try:
            ledger.accept_many(frames)
        except LedgerError as e:
            accepted = [f for f in frames if f.accepted]
            if accepted:
                self.last_index = accepted[-1].index
                self.accepted += len(accepted)
                self._queue.put_many(accepted)
            self.ledger_broken(e)
            for frame in frames:
                if frame.state is FrameState.RECEIVED:  # still answered, once
                    self.refuse(frame, RemoteProtocolError(ErrorCode.E_INTERNAL, "", e.message))
            return len(accepted)
        self.last_index = frames[-1].index
        self.accepted += len(frames)
        self._queue.put_many(frames)
        return len(frames)

    def check(self, frame: FrameRecord, buffers) -> None:
        """Refuse what cannot be scored; on success ``frame.ref``/``frame.dist`` are set (not yet referenced)."""
        if self.state != Session.OPEN:
            why = f"failed ({self.broken})" if self.broken else "closing"
            raise RemoteProtocolError(ErrorCode.E_STATE, "session", f"session {self.id} is {why}")
        if self.last_index is not None and frame.index <= self.last_index:
            raise RemoteProtocolError(
                ErrorCode.E_STATE, "index",
                f"{frame.index} does not follow {self.last_index}: indices must strictly increase",
            )
        frame.ref = self._buffer(buffers, "ref", frame.ref_id)
        frame.dist = self._buffer(buffers, "dist", frame.dist_id)

    def _buffer(self, buffers, role: str, bid) -> BufferRecord:
        rec = buffers.get(bid)
        if rec is None:
            raise RemoteProtocolError(ErrorCode.E_NOENT, role, f"no buffer {bid} is registered")
        # the geometry it matched last time (the common case, per frame), or an equal one
        geometry = self.geometry
        if rec.matched is not geometry:
            if rec.geometry != geometry:
                diff = rec.geometry.differences(geometry)
                if diff:
                    raise _inval(role, f"buffer {bid} does not match the session: {', '.join(diff)}")
            rec.matched = geometry
        return rec

    def accept(self, frame: FrameRecord) -> None:
        try:
            self.ledger.accept(frame)
        except LedgerError as e:
            self.ledger_broken(e)
            if frame.state is FrameState.RECEIVED:  # still answered, once
                self.refuse(frame, RemoteProtocolError(ErrorCode.E_INTERNAL, "", e.message))
            return
        self.last_index = frame.index
        self.accepted += 1
        if self.early_release:
            # R15 plant: a deliberately early release (module docstring).
            self.ledger.release_early(frame)
        self._queue.put(frame)

    def refuse(self, frame: FrameRecord, err: RemoteProtocolError) -> None:
        """A decoded submit that will not be scored: released at once, its frame_error in order."""
        try:
            self.ledger.refuse(frame, err)
        except LedgerError as e:
            self.ledger_broken(e)

    # -- close ----------------------------------------------------------------------------

    def close(self, seq: int | None) -> None:
        if self.state != Session.OPEN:
            raise RemoteProtocolError(ErrorCode.E_STATE, "session", f"session {self.id} is already closing")
        self.state = Session.CLOSING
        self.close_seq = seq
        self._queue.close()

    def fail_unanswered(self, code: ErrorCode, message: str) -> None:
        """Give every frame without an outcome a ``frame_error`` (shutdown past its deadline)."""
        try:
            self.ledger.fail_unanswered(code, message)
        except LedgerError as e:
            self.ledger_broken(e)

    # -- the lane's sink (trio thread) --------------------------------------------------------

    def frames_scored(self, items: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        try:
            self.ledger.lane_scored_many(items)
        except LedgerError as e:
            self.ledger_broken(e)
        self.host.outcomes_settled()

    def frame_failed(self, index: int, error: LaneError) -> None:
        self._frame_failed(index, protocol_code(error), error.field, error.reason)

    def _frame_failed(self, index: int, code: ErrorCode | str, field: str, message: str) -> None:
        try:
            self.ledger.lane_failed(index, code, field, message[:1024])
            self.ledger.flush()
        except LedgerError as e:
            self.ledger_broken(e)
        self.host.outcomes_settled()

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
        #: taken from the queue by this wake-up; from ``pos`` on not handed over yet
        taken: list[FrameRecord] = []
        pos = 0
        lane_finished = False
        queue = self._queue
        waits = self._waits
        try:
            while taken := await queue.get_all():
                pos, n = 0, len(taken)
                while pos < n:
                    frame = taken[pos]
                    if waits(frame):  # its fences first (it suspends the task; the rest wait)
                        current = frame
                        pos += 1
                        try:
                            await self._hand_over(frame)
                        except LedgerError as e:
                            self.ledger_broken(e)
                        current = None
                        continue
                    # the run of frames with nothing to wait for goes to the lane at once
                    end = pos + 1
                    while end < n and not waits(taken[end]):
                        end += 1
                    group, pos = taken[pos:end], end
                    self._deliver_many(group)
            summary = await self.lane_session.finish()
            lane_finished = True
            try:
                self.ledger.fail_in_lane(ErrorCode.E_INTERNAL, "the lane returned no outcome for this frame")
            except LedgerError as e:
                self.ledger_broken(e)
            # session_closed leaves after the last outcome and after the last
            # ``released`` of the session: the ledger sends it only then, so a
            # producer may take "closed" to mean "no buffer of this session is
            # held".  The lane has finished, so its events should be complete and
            # the reaper only has to get to them.  The rule sits where
            # session_closed is sent rather than in a wait here, so no path can
            # overtake it: outcomes reach the session before the reaper has seen
            # their events, a shutdown fails the last frames itself, and a bounded
            # wait would send session_closed anyway once it ran out.
            self.ledger.close(lambda: SessionClosed(
                re=self.close_seq, session=self.id, frames=self.scored, failed=self.failed,
                pooled=summary.pooled, aggregate=summary.aggregate,
            ))
            with trio.move_on_after(10):
                await self.closed_sent.wait()
            if not self.closed_sent.is_set():
                # A lane that broke its promise (an event never completes): say so, and
                # still never send session_closed while a buffer of the session is held.
                log.error("session %d: %d frames still unreleased 10 s after the lane finished; "
                          "session_closed waits for them", self.id, self.ledger.releasing)
                await self.closed_sent.wait()
        finally:
            # Cancelled (client gone, shutdown past its deadline): frames that never
            # reached the lane are released unread; the lane drops the rest.
            if current is not None and current.release is ReleaseState.HELD:
                self.ledger.release_unread(current)  # cancelled in its fence wait
            for frame in taken[pos:]:  # taken from the queue, never handed over
                self.ledger.release_unread(frame)
            for frame in self._queue.take_all():
                self.ledger.release_unread(frame)
            if self.state != Session.CLOSED and not lane_finished:
                self.lane_session.abort()
            self.finished.set()

    @staticmethod
    def _waits(frame: FrameRecord) -> bool:
        """The frame has a fence to wait for on the host: an fd fence, or a dma-buf's implicit ones."""
        if frame.ref_fence is not None or frame.dist_fence is not None:
            return True
        ref, dist = frame.ref, frame.dist
        return bool((frame.ref_gpu_fence is None and ref.implicit_fences and ref.imp.implicit_fence_fds())
                    or (frame.dist_gpu_fence is None and dist.implicit_fences and dist.imp.implicit_fence_fds()))

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
        self._deliver(frame)

    def _deliver(self, frame: FrameRecord) -> None:
        """Fences signalled (or none): the frame goes to the lane."""
        if self.state == Session.CLOSED or frame.state is not FrameState.ACQUIRED:
            # Answered meanwhile (shutdown past its deadline): nothing to score.
            return self.ledger.release_unread(frame)
        lane_frame = LaneFrame(frame.index, frame.ref.imp, frame.dist.imp,
                               frame.ref_gpu_fence, frame.dist_gpu_fence)
        self.ledger.hand_over(frame)  # before submit: a lane may report inside it
        try:
            event = self.lane_session.submit(lane_frame)
        except Exception as e:
            log.exception("session %d: the lane refused frame %d", self.id, frame.index)
            return self._fail_unread(frame, ErrorCode.E_INTERNAL, "", f"the lane failed: {e}")
        self.ledger.track(frame, event)

    def _deliver_many(self, frames: list[FrameRecord]) -> None:
        """:meth:`_deliver` for a run of frames with nothing to wait for: one hand-over to the lane
        (``LaneSession.submit_many``: one job for the group), each frame's release event tracked."""
        submit_many = self.lane_session.submit_many
        if submit_many is None or len(frames) == 1:
            for frame in frames:  # the lane takes frames one by one
                try:
                    self._deliver(frame)
                except LedgerError as e:
                    self.ledger_broken(e)
            return
        if self.state == Session.CLOSED:  # answered meanwhile (shutdown past its deadline)
            for frame in frames:
                self.ledger.release_unread(frame)
            return
        try:
            ready = self.ledger.hand_over_many(frames)  # before submit: a lane may report inside it
        except LedgerError as e:
            return self.ledger_broken(e)
        if not ready:
            return
        try:
            events = submit_many([LaneFrame(f.index, f.ref.imp, f.dist.imp, f.ref_gpu_fence, f.dist_gpu_fence)
                                  for f in ready])
        except Exception as e:  # all or none: no frame was taken
            log.exception("session %d: the lane refused frames %d..%d", self.id, ready[0].index, ready[-1].index)
            for frame in ready:
                self._fail_unread(frame, ErrorCode.E_INTERNAL, "", f"the lane failed: {e}")
            return
        try:
            self.ledger.track_many(ready, events)
        except LedgerError as e:
            self.ledger_broken(e)

    def _fail_unread(self, frame: FrameRecord, code: ErrorCode, field: str, message: str) -> None:
        self.ledger.fail(frame, code, field, message)
        self.ledger.release_unread(frame)
