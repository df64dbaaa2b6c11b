"""Session.submit_many (async and blocking): as few packets as the daemon takes, the same outcomes,
back-pressure, one submit per frame with an older daemon, nothing sent when a frame is bad."""

import pytest
import trio

from vmafx.blocking import BlockingClient
from vmafx.client import open_client
from vmafx.frames import EventFdFence, memfd_buffer
from vmafx.protocol.errors import LocalProtocolError
from vmafx.protocol.limits import Limits

from .fake_daemon import FakeDaemon
from .test_client_protocol import H, W, _luma, _sum


async def _serve(nursery, tmp_path, **kw) -> FakeDaemon:
    fake = FakeDaemon(**kw)
    fake.path = str(tmp_path / "fake.sock")
    await nursery.start(fake.serve, fake.path)
    return fake


async def _handles(client, n):
    out = []
    for i in range(n):
        ref, dist = memfd_buffer(W, H), memfd_buffer(W, H)
        ref.write_frame(_luma(10 + i))
        dist.write_frame(_luma(50 + i))
        out.append((await client.register_buffer(ref), await client.register_buffer(dist)))
    return out


@pytest.mark.parametrize("offer", [True, False])
async def test_async_submit_many_packs_what_the_limits_let_go_and_every_frame_is_answered(nursery, tmp_path, offer):
    fake = await _serve(nursery, tmp_path, submit_many=offer,
                        limits=Limits(max_frames_in_flight=6, max_frames_per_submit=4))
    async with open_client(fake.path) as client:
        session = await client.open_session(width=W, height=H)
        handles = await _handles(client, 10)
        fence = EventFdFence()
        fence.signal()
        frames = [(2 * i, r, d) for i, (r, d) in enumerate(handles)]
        frames[3] = (*frames[3], fence)  # a fenced frame among them: its fd travels in the packet
        await session.submit_many(frames)
        summary = await session.close()
        results = [x async for x in session.results()]
        fence.close()
    assert [x.index for x in results] == [2 * i for i in range(10)]
    assert [(x.metrics["ref_sum"], x.metrics["dist_sum"]) for x in results] == [
        (_sum(10 + i), _sum(50 + i)) for i in range(10)]
    assert summary.frames == 10 and fake.max_seen_in_flight <= 6
    assert sum(fake.packets) == 10
    if offer:  # never more than max_frames_per_submit a packet, and fewer packets than frames
        assert max(fake.packets) <= 4 and len(fake.packets) < 10
    else:  # an older daemon: one submit per frame, as before
        assert fake.packets == [1] * 10


async def test_a_bad_frame_anywhere_refuses_the_whole_call_before_anything_is_sent(nursery, tmp_path):
    fake = await _serve(nursery, tmp_path, submit_many=True)
    async with open_client(fake.path) as client:
        session = await client.open_session(width=W, height=H)
        (r, d), = await _handles(client, 1)
        with pytest.raises(LocalProtocolError) as e:
            await session.submit_many([(0, r, d), (1, r, d), (1, r, d)])
        assert e.value.field == "index"
        with pytest.raises(LocalProtocolError) as e:
            await session.submit_many([(0, r, d), (1, r)])
        assert e.value.field == "frames[1]"
        assert fake.packets == [] and client.in_flight == 0
        await session.submit_many([(0, r, d), (1, r, d)])  # the session is fine: nothing was booked
        await session.close()
    assert fake.packets == [2]


async def test_blocking_submit_many_has_the_same_surface(nursery, tmp_path):
    fake = await _serve(nursery, tmp_path, submit_many=True,
                        limits=Limits(max_frames_in_flight=4, max_frames_per_submit=8))

    def run():
        with BlockingClient.connect(fake.path) as client:
            session = client.open_session(width=W, height=H)
            bufs = [memfd_buffer(W, H), memfd_buffer(W, H)]
            for b, v in zip(bufs, (7, 9)):
                b.write_frame(_luma(v))
            r, d = (client.register_buffer(b) for b in bufs)
            session.submit_many([(i, r, d) for i in range(9)], timeout=5)  # past the limit: it pumps replies
            summary = session.close(timeout=5)
            seen = [(x.index, x.metrics["ref_sum"]) for x in session.results()]
            for b in bufs:
                b.close()
            return summary, seen

    summary, seen = await trio.to_thread.run_sync(run)
    assert summary.frames == 9 and seen == [(i, _sum(7)) for i in range(9)]
    assert sum(fake.packets) == 9 and max(fake.packets) <= 4 and len(fake.packets) < 9
