"""Scoring through a real daemon process: exactly the in-process numbers, R14, status."""

import pytest

from vmafx.formats import PixelFormat
from vmafx.protocol import BufferUnregistered, ListSessions, Released, Status
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import CpuScorer

from .rawclient import RawClient, frame_memfd, stored_planes


def reference_frames(refs, dists, features=(), models=("version=vmaf_v0.6.1",), n=None):
    from vmafxd.session import build_plan
    from vmafx.protocol import Limits

    plan = build_plan(list(models), list(features), Limits())
    sc = CpuScorer(plan, refs[0].width, refs[0].height, refs[0].bitdepth)
    n = len(refs) if n is None else n
    for i in range(n):
        sc.push(i, refs[i], dists[i])
    sc.finish()
    return dict(sc.assembler.frames), sc.pooled()


def test_p01_through_the_daemon_matches_cpu_scorer_exactly(daemon, p01):
    """Every frame of p01 (24) through a ring of 3 buffer pairs reused on ``released``."""
    pair, refs, dists = p01
    want, want_pooled = reference_frames(refs, dists, features=["psnr"])
    c = RawClient(daemon.socket)
    c.hello()
    ring = 3
    bufs = [(frame_memfd(refs[k]), frame_memfd(dists[k], pitch_pad=32)) for k in range(ring)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(models=["version=vmaf_v0.6.1"], features=["psnr"]).session
    busy: dict[int, set] = {}
    for i in range(len(refs)):
        k = i % ring
        # Reuse slot k only once both roles of its previous frame were released.
        while busy.get(k):
            m = c.wait_for(lambda m: isinstance(m, Released))
            for slot, roles in busy.items():
                roles.discard((m.index, m.role))
        if i >= ring:
            bufs[k][0].write_planes(stored_planes(refs[i], PixelFormat.YUV420P))
            bufs[k][1].write_planes(stored_planes(dists[i], PixelFormat.YUV420P))
        c.submit(s, i, *ids[k])
        busy[k] = {(i, "ref"), (i, "dist")}
    closed = c.close_session(s)
    assert (closed.frames, closed.failed) == (len(refs), 0)
    for i in range(len(refs)):
        got = c.outcomes[(s, i)].metrics
        assert got == want[i], f"frame {i}"
    assert closed.pooled["vmaf"] == want_pooled["vmaf"]
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    st = c.request(Status(seq=c.conn.next_seq())).status
    assert st["host_copies"] == 0 and st["pending_releases"] == 0 and st["frames_scored"] >= len(refs)
    for r, d in ids:
        assert isinstance(c.unregister(r), BufferUnregistered) and isinstance(c.unregister(d), BufferUnregistered)
    c.close()
    for r, d in bufs:
        r.close()
        d.close()
    assert daemon.wait_fds() == daemon.baseline


def test_one_buffer_in_two_sessions_scores_identically(daemon, p01):
    """R14: the same registered buffers used by two sessions (on two workers) at once."""
    _, refs, dists = p01
    n = 4
    want, _ = reference_frames(refs, dists, features=["psnr"], models=(), n=n)
    c = RawClient(daemon.socket)
    c.hello()
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    a = c.open_ok(features=["psnr"])
    b = c.open_ok(features=["psnr"])
    assert {a.device, b.device} == {0, 1}  # spread over the two workers
    for i in range(n):
        c.submit(a.session, i, *ids[i])
        c.submit(b.session, i, *ids[i])
    c.close_session(a.session)
    c.close_session(b.session)
    for i in range(n):
        assert c.outcomes[(a.session, i)].metrics == c.outcomes[(b.session, i)].metrics == want[i]
    c.close()
    for r, d in bufs:
        r.close()
        d.close()
    assert daemon.wait_fds() == daemon.baseline


@pytest.mark.parametrize("fmt, planar_depth", [("nv12", 8), ("p010", 10)])
def test_semi_planar_buffers_score_as_their_planar_twins(daemon, p01, fmt, planar_depth):
    _, refs, dists = p01
    n = 3

    def deep(p):
        return Picture(tuple(pl.astype("<u2") for pl in p.planes), 10, p.subsampling) if planar_depth == 10 else p

    r10 = [deep(refs[i]) for i in range(n)]
    d10 = [deep(dists[i]) for i in range(n)]
    c = RawClient(daemon.socket)
    c.hello()
    results = {}
    for f in (fmt, "yuv420p"):
        bufs = [(frame_memfd(r10[i], f), frame_memfd(d10[i], f, pitch_pad=64)) for i in range(n)]
        ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
        s = c.open_ok(features=["psnr"], pixel_format=f, bitdepth=planar_depth).session
        for i in range(n):
            c.submit(s, i, *ids[i])
        c.close_session(s)
        results[f] = [c.outcomes[(s, i)].metrics for i in range(n)]
        for r, d in ids:
            c.unregister(r)
            c.unregister(d)
        for r, d in bufs:
            r.close()
            d.close()
    want, _ = reference_frames(r10, d10, features=["psnr"], models=(), n=n)
    assert results[fmt] == results["yuv420p"] == [want[i] for i in range(n)]
    c.close()
    assert daemon.wait_fds() == daemon.baseline


def test_status_and_sessions_report_what_is_going_on(daemon, p01):
    _, refs, dists = p01
    c = RawClient(daemon.socket, "reporter")
    c.hello()
    before = c.request(Status(seq=c.conn.next_seq())).status
    r, d = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(r), c.register_ok(d)
    s = c.open_ok(features=["psnr"], name="status-test").session
    c.submit(s, 0, rid, did)
    c.submit(s, 1, rid, did)
    c.outcome(s, 1)
    rows = c.request(ListSessions(seq=c.conn.next_seq())).sessions
    row = next(x for x in rows if x["session"] == s)
    assert (row["width"], row["height"], row["pixel_format"], row["lane"]) == (576, 324, "yuv420p", "cpu")
    assert (row["submitted"], row["scored"], row["in_flight"], row["name"]) == (2, 2, 0, "status-test")
    assert row["client"].startswith("reporter#") and row["models"] == []
    st = c.request(Status(seq=c.conn.next_seq())).status
    assert st["frames_scored"] == before["frames_scored"] + 2
    assert st["clients"] == before["clients"] + 0 and st["sessions"] == before["sessions"] + 1
    assert st["buffers"] == before["buffers"] + 2 and st["lanes"][0]["lane"] == "cpu"
    assert st["host_copies"] == 0 and st["uptime_s"] > 0 and st["version"]
    c.close_session(s)
    c.close()
    r.close()
    d.close()
    assert daemon.wait_fds() == daemon.baseline


def test_unregister_waits_for_frames_in_flight(daemon, p01):
    _, refs, dists = p01
    c = RawClient(daemon.socket)
    c.hello()
    r, d = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid, did = c.register_ok(r), c.register_ok(d)
    fds_registered = daemon.fd_count()
    assert fds_registered == daemon.baseline + 3  # the connection and one mapping per buffer
    s = c.open_ok().session  # vmaf_v0.6.1: a few tens of ms per frame
    for i in range(4):
        c.submit(s, i, rid, did)
    reply = c.unregister(rid)
    assert isinstance(reply, BufferUnregistered)
    # answered only after every frame that read it released it
    released = [m for m in c.released if m.buffer == rid]
    assert sorted(m.index for m in released) == [0, 1, 2, 3]
    c.close_session(s)
    c.unregister(did)
    assert daemon.fd_count() == daemon.baseline + 1  # just the connection
    c.close()
    r.close()
    d.close()
    assert daemon.wait_fds() == daemon.baseline


@pytest.mark.parametrize("bundles", [True, False])
def test_bundles_go_only_to_clients_that_ask_and_lose_nothing(daemon, p01, bundles):
    """12 frames submitted at once: every result and release arrives, equal to the in-process
    numbers; a client that did not ask for bundles reads one message per packet."""
    pair, refs, dists = p01
    n = 12
    want, _ = reference_frames(refs, dists, features=["psnr"], models=(), n=n)
    c = RawClient(daemon.socket, bundles=bundles)
    assert c.hello().bundles is (True if bundles else None)
    bufs = [(frame_memfd(refs[i]), frame_memfd(dists[i])) for i in range(n)]
    ids = [(c.register_ok(r), c.register_ok(d)) for r, d in bufs]
    s = c.open_ok(features=["psnr"]).session
    p0, m0 = c.packets, c.messages
    for i in range(n):
        c.submit(s, i, *ids[i])
    closed = c.close_session(s)
    assert (closed.frames, closed.failed) == (n, 0)
    assert {i: c.outcomes[(s, i)].metrics for i in range(n)} == want
    assert c.messages - m0 == 3 * n + 1  # results, two releases each, session_closed
    if not bundles:
        assert c.packets - p0 == c.messages - m0
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
