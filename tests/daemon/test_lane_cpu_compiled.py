"""The CPU lane on the compiled engine: two sessions on two workers at once, each equal
to the numpy twins, the frames released after extraction with no view kept."""

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafxd.core.layout import Geometry
from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan
from vmafxd.lanes import create_lane
from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
from vmafxd.offline import resolve_models

from ..lanes.conftest import RecordingSink
from .test_lane_cpu import _imp


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
async def test_two_sessions_on_two_workers_at_once_equal_the_twins(engine, p01):
    from vmafxd.lanes.compiled import CompiledScorer, available

    if engine == "compiled" and not available():
        pytest.skip("no host C++ compiler")
    _, refs, dists = p01
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr_hvs")])
    config = type("C", (), {"cpu_workers": 2, "cpu_engine": engine})()
    lane = create_lane("cpu", config, LaneServices())
    n = 4
    sinks, sessions, imps = [RecordingSink(), RecordingSink()], [], []
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        for w in range(2):
            spec = SessionSpec(plan, Geometry(576, 324, PixelFormat.YUV420P, 8), device=w)
            sessions.append(await lane.open_session(spec, sinks[w]))
        expect_type = CompiledScorer if engine == "compiled" else CpuScorer
        assert all(type(s.scorer) is expect_type for s in sessions)
        for k in range(n):  # interleaved: both workers score at the same time
            for w, sess in enumerate(sessions):
                r, d = _imp(refs[k + w]), _imp(dists[k + w])
                imps += [r, d]
                sess.submit(LaneFrame(k, r, d))
        summaries = [await s.finish() for s in sessions]
        nursery.cancel_scope.cancel()
    for imp in imps:
        imp.close()
        assert imp.view_leaks == 0
    for w in range(2):
        want = CpuScorer(plan, 576, 324, 8)
        for k in range(n):
            want.push(k, refs[k + w], dists[k + w])
        want.finish()
        assert sinks[w].failed == []
        assert sinks[w].scored == want.assembler.frames
        assert summaries[w].pooled["vmaf"]["mean"] == want.pooled()["vmaf"]["mean"]
