"""The per-client outgoing queue: one message per packet, or bundles for clients that asked."""

import msgpack
import trio
import trio.testing

from vmafx.protocol import Released, encode
from vmafx.protocol.codec import decode_packet
from vmafxd.outgoing import OutgoingQueue


class _Capture:
    """A stand-in channel that records the packets sent."""

    def __init__(self):
        self.packets: list[bytes] = []

    async def send(self, data: bytes, fds=()) -> None:
        self.packets.append(data)
        await trio.lowlevel.checkpoint()


def _released(i: int) -> bytes:
    return encode(Released(buffer=1, session=1, index=i, role="ref"))[0]


async def _run(q: OutgoingQueue, messages: list[bytes]) -> _Capture:
    """Queue everything before the sender runs, then let it send and stop."""
    cap = _Capture()
    for data in messages:
        assert q.put(data)
    q.close()
    await q.run(cap)
    return cap


async def test_without_bundles_every_message_is_its_own_packet():
    msgs = [_released(i) for i in range(20)]
    cap = await _run(OutgoingQueue(64), msgs)
    assert cap.packets == msgs


async def test_queued_messages_go_out_as_one_bundle_in_order():
    msgs = [_released(i) for i in range(20)]
    q = OutgoingQueue(64)
    q.bundle_bytes = 65536
    cap = await _run(q, msgs)
    assert len(cap.packets) == 1 and q.sent == 20 and q.pending == 0
    got = decode_packet(cap.packets[0], bundles=True)
    assert [m.index for m in got] == list(range(20))


async def test_bundles_respect_the_size_limit_and_carry_the_rest_over():
    msgs = [_released(i) for i in range(50)]
    size = len(msgs[0])
    q = OutgoingQueue(64)
    q.bundle_bytes = 3 + 7 * size  # room for seven
    cap = await _run(q, msgs)
    assert [len(decode_packet(p, bundles=True)) for p in cap.packets] == [7] * 7 + [1]
    assert all(len(p) <= q.bundle_bytes for p in cap.packets)
    got = [m.index for p in cap.packets for m in decode_packet(p, bundles=True)]
    assert got == list(range(50)) and q.sent == 50
    # a lone message is sent as itself, not as a bundle of one
    assert isinstance(msgpack.unpackb(cap.packets[-1]), dict)


async def test_a_message_sent_while_the_sender_waits_is_not_held_back():
    q = OutgoingQueue(64)
    q.bundle_bytes = 65536
    cap = _Capture()
    async with trio.open_nursery() as n:
        n.start_soon(q.run, cap)
        await trio.testing.wait_all_tasks_blocked()
        assert q.put(_released(0))
        with trio.fail_after(5):
            await q.flushed()
        assert len(cap.packets) == 1 and decode_packet(cap.packets[0], bundles=True)[0].index == 0
        q.close()


async def test_put_many_queues_in_order_as_one_bundle_and_refuses_what_would_overflow():
    q = OutgoingQueue(bound=5)
    q.bundle_bytes = 65536
    assert q.put(_released(0))
    assert q.put_many([_released(1), _released(2), _released(3)])
    assert not q.put_many([_released(4), _released(5)])  # 4 + 2 > 5: none of them is queued
    assert q.pending == 4 and q.put_many([_released(4)])
    q.close()
    cap = _Capture()
    await q.run(cap)
    assert len(cap.packets) == 1
    assert [m.index for m in decode_packet(cap.packets[0], bundles=True)] == [0, 1, 2, 3, 4]
