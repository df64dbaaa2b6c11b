"""The CPU lane in-process: exact scores, early release after extraction, no lingering views."""

import pytest
import trio

from vmafx.formats import PixelFormat
from vmafx.protocol import Limits
from vmafx.transport import OwnedFd
from vmafxd import features as registry
from vmafxd.buffers import validate_layout
from vmafxd.core.layout import Geometry
from vmafxd.lanes import create_lane
from vmafxd.lanes.cpu_import import import_host_buffer
from vmafxd.lanes.device import LaneFrame, LaneServices, SessionSpec
from vmafxd.offline import resolve_models
from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan

from ..lanes.conftest import RecordingSink
from .rawclient import frame_memfd


def _imp(picture, fmt=PixelFormat.YUV420P, pitch_pad=0):
    from vmafx.protocol import RegisterBuffer

    buf = frame_memfd(picture, fmt, pitch_pad=pitch_pad)
    msg = RegisterBuffer(seq=1, kind="memfd", width=buf.width, height=buf.height, pixel_format=buf.pixel_format,
                         bitdepth=buf.bitdepth, size=buf.size, planes=buf.planes, fds=(buf.fd,))
    fd = OwnedFd(buf.fd)
    buf.fd = -1
    with fd:
        return import_host_buffer(validate_layout(msg, Limits()), {0: fd})


@pytest.mark.parametrize("decl", registry.all_declarations(), ids=lambda d: d.name)
def test_no_cpu_twin_keeps_a_view_of_an_input_plane(decl, p01):
    """The CPU lane releases a frame right after extraction: that is only true if no
    twin keeps a view of the mapped planes.  Closing the mapping fails while one does."""
    _, refs, dists = p01
    ext = decl.cpu(decl.resolve_options({}), 576, 324, 8)
    for i in range(3):
        ri, di = _imp(refs[i]), _imp(dists[i], pitch_pad=32)
        with ri.reading(), di.reading():
            list(ext.extract(i, ri.picture(), di.picture()))
        ri.close()
        di.close()
        assert ri.view_leaks == 0 and di.view_leaks == 0, f"{decl.name} kept a view of frame {i}"
    list(ext.flush())




@pytest.mark.parametrize("fmt", [PixelFormat.YUV420P, PixelFormat.NV12])
async def test_lane_scores_like_cpu_scorer_with_a_skipped_index(fmt, p01):
    _, refs, dists = p01
    plan = ScoringPlan.build(resolve_models([]), [FeatureRequest("psnr")])
    lane = create_lane("cpu", type("C", (), {"cpu_workers": 2})(), LaneServices())
    indices = [0, 1, 5, 6]  # client indices; the lane scores them as a dense sequence
    async with trio.open_nursery() as nursery:
        await nursery.start(lane.run)
        sink = RecordingSink()
        sess = await lane.open_session(SessionSpec(plan, Geometry(576, 324, fmt, 8)), sink)
        imps, events = [], []
        for k, idx in enumerate(indices):
            r, d = _imp(refs[k], fmt), _imp(dists[k], fmt)
            imps += [r, d]
            events.append(sess.submit(LaneFrame(idx, r, d)))
        scorer = sess.scorer  # (the session lets it go when it finishes)
        summary = await sess.finish()
        nursery.cancel_scope.cancel()
    assert all(e.recorded and e.query() for e in events)
    for imp in imps:
        imp.close()
    want = CpuScorer(plan, 576, 324, 8)
    for k in range(len(indices)):
        want.push(k, refs[k], dists[k])
    want.finish()
    assert sink.failed == []
    assert [i for i, _ in sink.scored] == indices
    for (idx, got), (_, exp) in zip(sink.scored, want.assembler.frames):
        assert got == exp
    assert summary.pooled == want.pooled()  # every metric's four figures, from running sums
    assert scorer.assembler.frames == []  # a daemon session keeps none: its memory does not grow
    assert lane.host_copies == 0


def test_the_view_check_catches_a_twin_that_keeps_a_view(p01, caplog):
    _, refs, _ = p01
    kept = []
    imp = _imp(refs[0])
    with imp.reading():
        kept.append(imp.picture().luma)  # what a careless twin would do
    imp.close()
    assert imp.view_leaks == 1
    kept.clear()  # the mapping goes with the last view
