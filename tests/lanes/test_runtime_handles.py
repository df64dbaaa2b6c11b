"""The runtime layer's owned handles: checked, idempotent close; a dropped handle is finalized;
a session's handles are all gone when it ends (counted on the emulated GPU lane)."""

from __future__ import annotations

import gc
import logging

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafxd.core.layout import Geometry
from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
from vmafx.protocol import ErrorCode
from vmafxd.lane_errors import protocol_code
from vmafxd.lanes.errors import CompileError, InvalidInput, LaneError, RuntimeCallError
from vmafxd.lanes.runtime import Owned, Undo, dropped_handles, live_handles
from vmafxd.offline import resolve_models
from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from .conftest import RecordingSink, import_picture, load_runtime


class _Thing(Owned):
    kind = "thing"


def test_close_destroys_once_and_is_checked():
    destroyed = []
    base = live_handles("test")
    h = _Thing("test", 7, destroyed.append)
    assert h.owned and live_handles("test") == base + 1 and live_handles("test", "thing") >= 1
    h.close()
    h.close()
    assert destroyed == [7] and h.closed and live_handles("test") == base

    def failing(handle):
        raise RuntimeCallError("test", "thingDestroy", "THING_ERROR_BUSY", 3)

    bad = _Thing("test", 8, failing)
    with pytest.raises(RuntimeCallError) as e:
        bad.close()
    assert (e.value.runtime, e.value.call, e.value.error, e.value.code) == ("test", "thingDestroy", "THING_ERROR_BUSY", 3)
    bad.close()  # already gone: nothing to destroy again
    assert live_handles("test") == base


def test_a_dropped_handle_is_destroyed_by_its_finalizer(caplog):
    destroyed = []
    base, dropped = live_handles("test"), dropped_handles("test")
    h = _Thing("test", 11, destroyed.append)
    del h
    gc.collect()
    assert destroyed == [11] and live_handles("test") == base and dropped_handles("test") == dropped + 1

    def failing(handle):
        raise RuntimeCallError("test", "thingDestroy", "THING_ERROR_GONE")

    h = _Thing("test", 12, failing)
    with caplog.at_level(logging.WARNING, logger="vmafxd.lanes.runtime"):
        del h
        gc.collect()
    assert "THING_ERROR_GONE" in caplog.text and live_handles("test") == base


def test_a_borrowed_handle_is_never_destroyed():
    base = live_handles("test")
    owner = object()
    h = _Thing("test", 13, None, owner=owner)
    assert not h.owned and live_handles("test") == base
    h.close()
    assert h.closed


def test_undo_reverses_completed_steps_and_keeps_the_first_error(caplog):
    done = []
    with pytest.raises(RuntimeCallError, match="map failed"):
        with Undo() as undo:
            undo.push("release", done.append, "release")
            undo.push("free", lambda: (_ for _ in ()).throw(OSError("free failed too")))
            kept = undo.push("unmap", done.append, "unmap")
            undo.drop(kept)
            raise RuntimeCallError("test", "map", "map failed")
    assert done == ["release"]
    assert "free failed too" in caplog.text
    with Undo() as undo:
        undo.push("release", done.append, "never")
    assert done == ["release"]


def test_the_error_types_are_lane_errors_with_their_fields():
    e = CompileError("emu", "bad.cu", "bad.cu:1: error: undeclared")
    assert isinstance(e, RuntimeCallError) and isinstance(e, LaneError)
    assert "undeclared" in e.log and e.runtime == "emu" and e.source == "bad.cu"
    assert RuntimeCallError("cuda", "cuImportExternalMemory", "CUDA_ERROR_NOT_SUPPORTED").not_supported
    assert not RuntimeCallError("cuda", "cuMemMap", "CUDA_ERROR_INVALID_VALUE").not_supported
    assert InvalidInput("size", "declared 9 bytes but the dma-buf holds 4").field == "size"
    assert protocol_code(RuntimeCallError("cuda", "cuMemMap", "CUDA_ERROR_INVALID_VALUE")) == ErrorCode.E_INTERNAL


def test_a_dropped_emulator_event_is_finalized():
    _, dev = load_runtime("emu")
    base = live_handles("emu", "event")
    ev = dev.create_event()
    assert live_handles("emu", "event") == base + 1
    del ev
    gc.collect()
    assert live_handles("emu", "event") == base






async def test_sessions_on_the_emulated_lane_leave_no_handle_behind(p01):
    """Finished and aborted sessions give back every event; the worker's stream and modules go
    with the lane: the count of live handles returns to where it started."""
    from vmafxd.lanes import create_lane

    load_runtime("emu")
    _, refs, dists = p01
    gc.collect()
    base, dropped = live_handles("emu"), dropped_handles("emu")
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    geo = Geometry(refs[0].width, refs[0].height, PixelFormat.YUV420P, 8)
    lane = create_lane("emu", type("C", (), {"gpu_batch": 2})(), LaneServices())
    imports = [(import_picture(lane, refs[i]), import_picture(lane, dists[i])) for i in range(3)]

    async def one_session(abort: bool) -> list:
        sink = RecordingSink()
        sess = await lane.open_session(SessionSpec(plan, geo), sink)
        handles = [sess.submit(LaneFrame(i, r, d)) for i, (r, d) in enumerate(imports)]
        if abort:
            sess.abort()
        else:
            await sess.finish()
            assert [i for i, _ in sink.scored] == [0, 1, 2] and not sink.failed
        return handles

    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        for h in await one_session(abort=False):
            h.destroy()  # what the reaper does once a release event completed
        # the stream and the compiled modules stay with the device's worker
        gc.collect()
        warm = live_handles("emu")
        assert warm > base
        for abort in (False, True, False):
            handles = await one_session(abort)
            while not all(h.recorded and h.query() for h in handles):
                await trio.sleep(0.01)
            for h in handles:
                h.destroy()
        gc.collect()
        assert live_handles("emu") == warm
        nursery.cancel_scope.cancel()
    for r, d in imports:
        r.close()
        d.close()
    gc.collect()
    assert live_handles("emu") == base
    # every one of them was closed by its owner: none was left to the finalizer's safety net
    assert dropped_handles("emu") == dropped


@pytest.fixture(scope="module")
def p01():
    from ..reference import vendored_pairs

    refs, dists = vendored_pairs()[0].pictures()
    return None, refs[:3], dists[:3]
