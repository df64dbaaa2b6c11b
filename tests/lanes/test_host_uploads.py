"""The GPU lane's host upload path (memfds on CUDA/HIP), run on the emulator made to take it.

On a GPU a memfd is mapped, page-locked once at import (``host_register``) and uploaded per
frame without the worker waiting; the emulator normally reads host memory in place, so these
tests turn that off (``device_reads_host = False``) to drive the same code: the registration
is an owned handle, unregistered exactly once and before the mapping goes; a driver that
refuses to page-lock leaves the pageable path (said once) with the same scores.
"""

from __future__ import annotations

import gc
import logging

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafxd.core.layout import Geometry
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes import emulated
from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
from vmafxd.lanes.errors import RuntimeCallError
from vmafxd.lanes.runtime import dropped_handles, live_handles
from vmafxd.offline import resolve_models

from .conftest import RecordingSink, import_picture, load_runtime






def _lane(monkeypatch, uploads: bool):
    from vmafxd.lanes import create_lane

    rt, _ = load_runtime("emu")
    monkeypatch.setattr(rt, "device_reads_host", not uploads)
    return create_lane("emu", type("C", (), {"gpu_batch": 2})(), LaneServices())


async def _score(lane, geo, imports) -> list:
    """psnr of every (ref, dist) import, through one session of ``lane``."""
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    sink = RecordingSink()
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        sess = await lane.open_session(SessionSpec(plan, geo), sink)
        handles = [sess.submit(LaneFrame(i, r, d)) for i, (r, d) in enumerate(imports)]
        await sess.finish()
        for h in handles:
            assert h.recorded and h.query()
            h.destroy()
        nursery.cancel_scope.cancel()
    assert not sink.failed
    return [m for _, m in sorted(sink.scored, key=lambda x: x[0])]


@pytest.fixture(scope="module")
def frames():
    from ..reference import vendored_pairs

    refs, dists = vendored_pairs()[0].pictures()
    geo = Geometry(refs[0].width, refs[0].height, PixelFormat.YUV420P, 8)
    return geo, refs[:3], dists[:3]


@pytest.fixture(scope="module")
def zero_copy_scores(frames):
    """The emulator's own (zero-copy, in place) scores of the frames: what uploads must give."""
    geo, refs, dists = frames
    mp = pytest.MonkeyPatch()
    try:
        lane = _lane(mp, uploads=False)
        imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs, dists)]
        assert all(i.zero_copy for pair in imports for i in pair)
        got = trio.run(_score, lane, geo, imports)
        for pair in imports:
            for i in pair:
                i.close()
    finally:
        mp.undo()
    return got


def test_a_pinned_import_is_uploaded_and_unregistered_once_before_its_unmap(monkeypatch, frames,
                                                                           zero_copy_scores):
    geo, refs, dists = frames
    events: list[tuple[str, int]] = []
    mapped: dict[int, object] = {}

    def unregister(ptr: int) -> None:
        # the mapping must still be there when its registration goes
        events.append(("unregister", ptr))
        assert mapped[ptr].host.bytes_view().ctypes.data == ptr

    monkeypatch.setattr(emulated, "_unregister_nothing", unregister)
    gc.collect()
    base, dropped = live_handles("emu", "host_register"), dropped_handles("emu")
    lane = _lane(monkeypatch, uploads=True)
    imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs, dists)]
    flat = [i for pair in imports for i in pair]
    for imp in flat:
        assert imp.memory is None and imp.host is not None and imp.pinned is not None
        assert not imp.zero_copy
        mapped[imp.pinned.ptr] = imp
    assert live_handles("emu", "host_register") == base + len(flat)
    assert lane._pinned_bytes == sum(imp.pinned.size for imp in flat)

    assert trio.run(_score, lane, geo, imports) == zero_copy_scores
    assert lane.host_copies == len(flat)  # one upload per frame and role, counted

    for imp in flat:
        ptr = imp.pinned.ptr
        imp.close()
        imp.close()  # idempotent: the second close unregisters nothing
        assert imp.pinned is None and imp.closed
        assert events.count(("unregister", ptr)) == 1
    assert len(events) == len(flat)
    assert live_handles("emu", "host_register") == base
    assert lane._pinned_bytes == 0
    assert dropped_handles("emu") == dropped  # closed by their owner, none by the finalizer


def test_a_refused_registration_falls_back_to_pageable_uploads(monkeypatch, caplog, frames, zero_copy_scores):
    geo, refs, dists = frames
    calls = []

    def refuse(self, array):
        calls.append(array.nbytes)
        raise RuntimeCallError("emu", "cuMemHostRegister", "CUDA_ERROR_NOT_SUPPORTED", 801)

    monkeypatch.setattr(emulated.EmuDevice, "host_register", refuse)
    base = live_handles("emu", "host_register")
    lane = _lane(monkeypatch, uploads=True)
    with caplog.at_level(logging.WARNING, logger="vmafxd.lanes.gpu"):
        imports = [(import_picture(lane, r), import_picture(lane, d)) for r, d in zip(refs, dists)]
    flat = [i for pair in imports for i in pair]
    assert len(calls) == len(flat)  # asked for each buffer ...
    warnings = [r for r in caplog.records if "page-lock" in r.getMessage()]
    assert len(warnings) == 1 and "CUDA_ERROR_NOT_SUPPORTED" in warnings[0].getMessage()  # ... said once
    assert all(imp.pinned is None and imp.host is not None for imp in flat)
    assert lane._pinned_bytes == 0

    assert trio.run(_score, lane, geo, imports) == zero_copy_scores
    assert lane.host_copies == len(flat)
    for imp in flat:
        imp.close()
    assert live_handles("emu", "host_register") == base


def test_pinning_stops_at_the_lane_budget(monkeypatch, frames):
    """Beyond PIN_BUDGET a buffer is uploaded from pageable memory; closing one frees its share."""
    geo, refs, dists = frames
    lane = _lane(monkeypatch, uploads=True)
    one = import_picture(lane, refs[0])
    size = one.pinned.size
    monkeypatch.setattr(type(lane), "PIN_BUDGET", 2 * size)
    two = import_picture(lane, refs[1])
    three = import_picture(lane, refs[2])
    assert two.pinned is not None and three.pinned is None
    one.close()
    four = import_picture(lane, dists[0])
    assert four.pinned is not None and lane._pinned_bytes == 2 * size
    for imp in (two, three, four):
        imp.close()
    assert lane._pinned_bytes == 0
