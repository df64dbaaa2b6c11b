"""session_opened's max_frames_in_flight: the frames of a session the daemon's byte budgets hold.

The client library waits before sending more (so vmafxctl's 32 buffer pairs never make a 4K
session's frames refused with E_NOMEM); a client whose hello did not ask never sees the field.
"""

from __future__ import annotations

import trio

from vmafx.client import Client
from vmafx.frames import EventFdFence, memfd_buffer
from vmafx.protocol import Limits, SessionOpened
from vmafxd.core.layout import Geometry
from vmafxd.core.working_set import frame_bytes
from vmafxd.session import build_plan
from vmafx.formats import PixelFormat

from ..daemon.conftest import Daemon
from ..daemon.rawclient import RawClient


def _cost() -> int:
    return frame_bytes(build_plan([], ["psnr"], Limits()), Geometry(64, 64, PixelFormat.YUV420P, 8))


def test_the_client_waits_for_the_sessions_byte_budget():
    d = Daemon("--limit", f"max_bytes_in_flight_per_client={_cost() * 5 // 2}", fence_timeout_ms=5000)
    try:
        raw = RawClient(d.socket)
        raw.hello()  # asks for no session budgets: the field is not sent
        opened = raw.open_ok(width=64, height=64, features=["psnr"])
        assert isinstance(opened, SessionOpened) and opened.max_frames_in_flight is None
        raw.close_session(opened.session)
        raw.close()

        async def main() -> None:
            async with await Client.connect(d.socket) as client:
                session = await client.open_session(width=64, height=64, features=["psnr"])
                assert session.max_in_flight == 2  # 2.5 frames' bytes hold 2 frames
                bufs = [memfd_buffer(64, 64) for _ in range(6)]
                handles = [await client.register_buffer(b) for b in bufs]
                fences = [EventFdFence() for _ in range(2)]
                await session.submit(0, handles[0], handles[1], ref_fence=fences[0])
                await session.submit(1, handles[2], handles[3], ref_fence=fences[1])
                sent = trio.Event()

                async def third() -> None:
                    await session.submit(2, handles[4], handles[5])
                    sent.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(third)
                    with trio.move_on_after(0.5):
                        await sent.wait()
                    assert not sent.is_set()  # two frames held: the third waits, it is not refused
                    for f in fences:
                        f.signal()
                    await sent.wait()
                results = []
                async for r in session.results():
                    results.append(r)
                    if len(results) == 3:
                        break
                assert [r.ok for r in results] == [True, True, True]  # none refused with E_NOMEM
                await session.close()
                for h in handles:
                    await client.unregister_buffer(h)
                for b in bufs:
                    b.close()
                for f in fences:
                    f.close()

        trio.run(main)
    finally:
        d.close()
