"""Producers scoring through a real vmafxd (CPU lane) get exactly the in-process numbers.

Each producer rewrites a small pool of memfd buffers only after their
``released`` and keeps several frames in flight; the daemon is shared by
up to eight producers at once, each with different frames, so a mix-up
of buffers, sessions or results between clients would show as a wrong number.
"""

import pytest
import trio

from tests.reference import printed
from vmafx.client import open_client
from vmafx.exceptions import ConnectionClosed, FenceTimeout, ProtocolViolation, ShuttingDown
from vmafx.protocol import ErrorCode
from vmafx.frames import EventFdFence, memfd_buffer_from_planes, memfd_buffer
from vmafx.io.video import read_all
from vmafx.private_daemon import PrivateDaemon

from .conftest import assert_same_scores, expected, load, needs_daemon, settled_fd_count, pair, run_producer
from .producer import produce_async

pytestmark = needs_daemon


def test_a_separate_client_process_gets_the_in_process_numbers_and_libvmafs(daemon_socket, tmp_path):
    p = pair("p01_testsrc2_x264crf35")
    out = tmp_path / "p01.json"
    spec = dict(models=["version=vmaf_v0.6.1"], features=["psnr"])
    proc = run_producer(daemon_socket, p, out, pool=3, **spec)
    assert proc.wait(timeout=300) == 0, proc.stdout.read()
    got = load(out)
    want = expected(p, **spec)
    assert_same_scores(got, want)
    assert got["summary"] == {"frames": 24, "failed": 0}
    assert got["writes"] == [0] * 24  # never rewrote a buffer the daemon had not released
    # and libvmaf's own log for this pair, to its printed precision
    ref = p.scores("vmaf_v0.6.1")
    assert [printed(m["vmaf"]) for _, m in got["frames"]] == [f["metrics"]["vmaf"] for f in ref["frames"]]
    assert printed(got["pooled"]["vmaf"]["mean"]) == ref["pooled_metrics"]["vmaf"]["mean"]


#: eight producers, each with different frames (pair, frame range, model, API), all at once
EIGHT = [
    dict(pair="p01_testsrc2_x264crf35", start=0, count=12, api="async"),
    dict(pair="p01_testsrc2_x264crf35", start=12, count=12, api="blocking"),
    dict(pair="p13_astronaut_sharpen", api="async", models=["version=vmaf_v0.6.1neg"]),
    dict(pair="p16_chelsea641x361_x264crf35", api="blocking", features=["psnr"]),
    dict(pair="p17_colorwheel444_x264crf35", api="async"),
    dict(pair="p18_immuno422_x264crf30", api="blocking", models=["version=vmaf_4k_v0.6.1"]),
    dict(pair="p15_coffee720_10bit_x264crf35", api="async"),
    dict(pair="p11_camera_identical", start=1, count=3, api="blocking", features=["psnr"]),
]


def test_eight_client_processes_at_once_each_get_their_own_results(daemon_socket, tmp_path):
    procs = []
    for n, spec in enumerate(EIGHT):
        spec = dict(spec)
        p = pair(spec.pop("pair"))
        out = tmp_path / f"client{n}.json"
        procs.append((p, spec, out, run_producer(daemon_socket, p, out, **spec)))
    for p, spec, out, proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stdout.read()
    for p, spec, out, _ in procs:
        spec.pop("api")
        got = load(out)
        assert_same_scores(got, expected(p, **spec))
        assert all(w == 0 for w in got["writes"])
    # the two halves of p01 differ, so a swap between clients would have shown
    assert load(tmp_path / "client0.json")["frames"][0][1] != load(tmp_path / "client1.json")["frames"][0][1]


async def test_eight_trio_tasks_with_separate_connections(daemon_socket):
    p01 = pair("p01_testsrc2_x264crf35")
    specs = [dict(start=3 * k, count=3, features=["psnr"] if k % 2 else []) for k in range(8)]
    results = [None] * 8
    before = settled_fd_count()

    async def one(k):
        results[k] = await produce_async(daemon_socket, str(p01.ref_file), str(p01.dist_file), pool=2, **specs[k])

    async with trio.open_nursery() as nursery:
        for k in range(8):
            nursery.start_soon(one, k)
    for k, spec in enumerate(specs):
        assert_same_scores(results[k], expected(p01, **spec))
    assert settled_fd_count() == before


@pytest.mark.parametrize("pool", [1, 2])
async def test_buffer_reuse_rewrites_only_after_release(daemon_socket, pool):
    """24 frames through 2 buffers (pool=1: one ref, one dist) or 2 pairs: scores stay exact."""
    p = pair("p01_testsrc2_x264crf35")
    _, refs = read_all(p.ref_file)
    _, dists = read_all(p.dist_file)
    async with open_client(daemon_socket) as client:
        session = await client.open_session(width=p.width, height=p.height, lane="cpu")
        bufs = [memfd_buffer(p.width, p.height) for _ in range(2 * pool)]
        handles = [await client.register_buffer(b) for b in bufs]
        outstanding_at_write, max_in_flight = [], 0
        results = []

        async def collect():
            async for r in session.results():
                results.append(r)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect)
            for i in range(24):
                rh, dh = handles[2 * (i % pool)], handles[2 * (i % pool) + 1]
                await rh.wait_released()
                await dh.wait_released()
                outstanding_at_write.append(rh.outstanding + dh.outstanding)
                rh.buffer.write_frame(refs[i])
                dh.buffer.write_frame(dists[i])
                await session.submit(i, rh, dh)
                max_in_flight = max(max_in_flight, client.in_flight)
            summary = await session.close()
        # Releases may still trail the session's summary (they come through the daemon's
        # release table); once all are in, the ledger saw exactly one per reference.
        for handle in handles:
            await handle.wait_released()
        assert client._tracker.conn.ledger.unreleased() == 0 and not client._tracker.conn.ledger.frames
        for b in bufs:
            b.close()
    assert outstanding_at_write == [0] * 24
    # Reuse followed `released`, not results: motion needs frame i+1 before frame i's result
    # can leave, so a buffer was rewritten while its previous frame was still unanswered.
    assert max_in_flight >= 2
    assert summary.frames == 24
    want = expected(p)
    assert [[r.index, r.metrics] for r in results] == want["frames"]
    assert summary.pooled == want["pooled"]


async def test_the_reuse_check_catches_a_daemon_that_releases_too_early():
    """Negative control (R15): the daemon's planted early release makes the same producer score wrong."""
    p = pair("p01_testsrc2_x264crf35")
    with PrivateDaemon(lane="cpu", environment={"VMAFXD_TEST_EARLY_RELEASE": "1"}) as path:
        got = await produce_async(path, str(p.ref_file), str(p.dist_file), pool=1)
    want = expected(p)
    wrong = [i for (i, g), (_, w) in zip(got["frames"], want["frames"]) if g != w]
    assert got["writes"] == [0] * 24  # the producer followed the rule; the daemon broke it
    assert len(wrong) >= 12, wrong


async def test_acquire_fences_are_waited_for_and_a_late_one_fails_only_its_frame(tmp_path):
    """An eventfd fence signalled after submit scores right; one never signalled times out (E_TIMEOUT)."""
    p = pair("p13_astronaut_sharpen")
    _, refs = read_all(p.ref_file)
    _, dists = read_all(p.dist_file)
    with PrivateDaemon(lane="cpu", extra_args=["--fence-timeout-ms", "300"]) as path:
        async with open_client(path) as client:
            session = await client.open_session(width=p.width, height=p.height, lane="cpu")
            bufs = [memfd_buffer_from_planes(f, "yuv420p", 8) for f in (refs[0], dists[0], refs[1], dists[1],
                                                                          refs[2], dists[2])]
            h = [await client.register_buffer(b) for b in bufs]
            slow, never, done = EventFdFence(), EventFdFence(), EventFdFence()
            done.signal()
            await session.submit(0, h[0], h[1], ref_fence=slow, dist_fence=done)
            await session.submit(1, h[2], h[3], dist_fence=never)
            await session.submit(2, h[4], h[5])
            await trio.sleep(0.1)
            slow.signal()  # the producer's "write" finishes after the submit
            summary = await session.close()
            results = [r async for r in session.results()]
            for x in (slow, never, done, *bufs):
                x.close()
    assert [r.index for r in results] == [0, 1, 2]
    assert results[0].ok and results[2].ok
    assert isinstance(results[1].error, FenceTimeout) and results[1].error.field == "dist_fence"
    assert (summary.frames, summary.failed) == (2, 1)
    # The failed frame is left out of the sequence: frames 0 and 2 score as the two-frame
    # sequence (pair frame 0, pair frame 2) -- motion of frame 2 is taken against frame 0.
    want = _scored_sequence(p, [0, 2])
    assert [results[0].metrics, results[2].metrics] == want


def _scored_sequence(p, picked):
    from vmafxd.offline import resolve_models
    from vmafxd.core.scoring import CpuScorer, ScoringPlan

    refs, dists = p.pictures()
    scorer = CpuScorer(ScoringPlan.build(resolve_models([]), []), p.width, p.height, p.bitdepth)
    for i, k in enumerate(picked):
        scorer.push(i, refs[k], dists[k])
    scorer.finish()
    return [m for _, m in scorer.assembler.frames]



async def _stop_while_scoring(p, frames: int, *, wait_for_releases: bool):
    _, refs = read_all(p.ref_file)
    _, dists = read_all(p.dist_file)
    daemon = PrivateDaemon(lane="cpu")
    path = daemon.start()
    try:
        async with open_client(path) as client:
            session = await client.open_session(width=p.width, height=p.height, lane="cpu")
            bufs = [memfd_buffer_from_planes(f, "yuv420p", 8) for i in range(frames) for f in (refs[i], dists[i])]
            h = [await client.register_buffer(b) for b in bufs]
            for i in range(frames):
                await session.submit(i, h[2 * i], h[2 * i + 1])
            if wait_for_releases:
                # every frame has been read by the lane (released), the last one's result is still
                # pending (motion needs the next frame, or the session's end)
                for handle in h:
                    await handle.wait_released()
                assert client.in_flight >= 1
            daemon.terminate()  # SIGTERM, as systemctl stop sends
            results = [r async for r in session.results()]
            closed = None
            with trio.fail_after(30):
                while closed is None:
                    try:
                        await client.status()
                    except ShuttingDown:  # a request read in the shutdown drain, before the goodbye
                        await trio.sleep(0.01)
                    except ConnectionClosed as e:
                        closed = e
                    else:
                        raise AssertionError("a stopping daemon answered a status request")
            for b in bufs:
                b.close()
    finally:
        rc = daemon.stop()
    return rc, session, results, closed


async def test_sigterm_drains_frames_in_flight_then_says_goodbye():
    """What a producer sees when the daemon stops (systemctl stop/restart): every frame in flight
    is answered, the session closes with its summary, then the connection ends with the reason."""
    p = pair("p01_testsrc2_x264crf35")
    rc, session, results, closed = await _stop_while_scoring(p, 12, wait_for_releases=True)
    assert rc == 0
    assert [r.index for r in results] == list(range(12)) and all(r.ok for r in results)
    assert session.summary is not None and session.summary.frames == 12
    assert [r.metrics for r in results] == [m for _, m in expected(p, count=12)["frames"]]
    assert "shutting down" in closed.reason and not isinstance(closed, ProtocolViolation)


async def test_sigterm_right_after_submitting_still_answers_every_frame():
    p = pair("p01_testsrc2_x264crf35")
    """Submits still queued in the daemon's socket at SIGTERM are read and answered too: scored if
    they were accepted before, E_SHUTDOWN (and released, unread) if read only in the shutdown drain."""
    rc, session, results, closed = await _stop_while_scoring(p, 12, wait_for_releases=False)
    assert rc == 0
    assert [r.index for r in results] == list(range(12))
    assert all(r.ok or r.error.code is ErrorCode.E_SHUTDOWN for r in results), [r.error for r in results]
    assert session.summary is not None and session.summary.frames == sum(r.ok for r in results)
    assert not isinstance(closed, ProtocolViolation)
    assert "shutting down" in closed.reason
