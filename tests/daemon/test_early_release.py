"""R15: a release signalled too early is caught.

A canary producer overwrites its buffers with garbage the moment it is told
``released``.  If the daemon only says so after the worker has read the frame
(the promise), the garbage never reaches a score; if it says so early, the
scores go wrong.  The canary makes the race deterministic with an acquire
fence: it signals the fence only after waiting a moment for an early
``released`` (and scribbling if one came), so a daemon that releases before
reading always reads garbage, and a correct daemon never can.

``VMAFXD_TEST_EARLY_RELEASE=1`` plants exactly that bug in the daemon
(vmafxd/session.py): the canary must detect it.
"""

import os

from vmafx.protocol import Released, Result

from vmafx.formats import PixelFormat

from .rawclient import RawClient, frame_memfd, stored_planes


def canary(daemon, refs, dists, expected, frames: int = 3) -> list[bool]:
    """Per frame: did the scores differ from the truth?"""
    c = RawClient(daemon.socket, "canary")
    c.hello()
    rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(rb), c.register_ok(db)
    s = c.open_ok(features=["psnr"]).session
    wrong = []
    for i in range(frames):
        rb.write_planes(stored_planes(refs[i], PixelFormat.YUV420P))
        db.write_planes(stored_planes(dists[i], PixelFormat.YUV420P))
        fence = os.eventfd(0)
        c.submit(s, i, rid, did, ref_fence=fence)
        scribbled = False
        try:
            c.wait_for(lambda m: isinstance(m, Released) and m.index == i, timeout=0.25)
            rb.scribble(i + 1)  # told we may reuse the buffers: do it at once
            db.scribble(i + 7)
            scribbled = True
        except TimeoutError:
            pass  # a correct daemon cannot release a frame it has not read
        os.eventfd_write(fence, 1)
        os.close(fence)
        out = c.outcome(s, i)
        assert isinstance(out, Result), out
        wrong.append(out.metrics != expected[i])
        if scribbled:
            assert wrong[-1], "garbage written before the read must show in the scores"
    c.close_session(s)
    c.close()
    rb.close()
    db.close()
    return wrong


def _expected(refs, dists, n=3):
    from vmafx.protocol import Limits
    from vmafxd.core.scoring import CpuScorer
    from vmafxd.session import build_plan

    sc = CpuScorer(build_plan([], ["psnr"], Limits()), 576, 324, 8)
    for i in range(n):
        sc.push(i, refs[i], dists[i])
    sc.finish()
    return dict(sc.assembler.frames)


def test_the_canary_sees_right_scores_from_an_honest_daemon(daemon, p01):
    _, refs, dists = p01
    assert canary(daemon, refs, dists, _expected(refs, dists)) == [False, False, False]


def test_the_canary_catches_the_planted_early_release(fresh_daemon, p01):
    _, refs, dists = p01
    d = fresh_daemon(env={"VMAFXD_TEST_EARLY_RELEASE": "1"})
    assert canary(d, refs, dists, _expected(refs, dists)) == [True, True, True]
    assert "a test plant" in d.log()
