"""Acquire fences: bounded host waits, kinds verified on the fd, consumed exactly once (R2, R8)."""

import os

import pytest
import trio

from vmafx.protocol import ErrorCode, Fence, RemoteProtocolError
from vmafx.transport import OwnedFd, open_fd_count
from vmafxd.fences import AcquireFence, wait_implicit_fences


async def test_signalled_and_unsignalled_eventfd_fences():
    before = open_fd_count()
    fd = os.eventfd(0)
    signal_side = os.dup(fd)
    fence = AcquireFence.take(Fence("eventfd", fd=0), OwnedFd(fd), "ref_fence")
    t0 = trio.current_time()
    assert await fence.wait(0.05) is False
    assert trio.current_time() - t0 >= 0.05
    os.eventfd_write(signal_side, 1)
    assert await fence.wait(5) is True
    fence.close()
    fence.close()  # consumed once; a second close is a no-op
    os.close(signal_side)
    assert open_fd_count() == before


async def test_a_fence_signalled_while_waited_for_wakes_the_waiter():
    fd = os.eventfd(0)
    signal_side = os.dup(fd)
    fence = AcquireFence.take(Fence("eventfd", fd=0), OwnedFd(fd), "dist_fence")

    async def later():
        await trio.sleep(0.05)
        os.eventfd_write(signal_side, 1)

    async with trio.open_nursery() as n:
        n.start_soon(later)
        assert await fence.wait(5) is True
    fence.close()
    os.close(signal_side)


@pytest.mark.parametrize("declared", ["sync_file", "eventfd"])
async def test_wrong_fd_kinds_are_refused_and_closed(declared):
    before = open_fd_count()
    wrong = os.memfd_create("not-a-fence") if declared == "eventfd" else os.eventfd(0)
    with pytest.raises(RemoteProtocolError) as e:
        AcquireFence.take(Fence(declared, fd=0), OwnedFd(wrong), "ref_fence")
    assert (e.value.code, e.value.field) == (ErrorCode.E_INVAL, "ref_fence.fd")
    assert f"declared {declared}" in e.value.message
    assert open_fd_count() == before  # consumed even when refused


async def test_implicit_fence_wait_polls_a_private_dup():
    # An eventfd stands in for a dma-buf's POLLIN (no dma-buf can be made here).
    fd = os.eventfd(0)
    before = open_fd_count()
    assert await wait_implicit_fences(fd, 0.02) is False
    os.eventfd_write(fd, 1)
    # two waiters on one buffer at once (R14) do not collide in epoll
    async with trio.open_nursery() as n:
        results = []

        async def one():
            results.append(await wait_implicit_fences(fd, 1))

        n.start_soon(one)
        n.start_soon(one)
    assert results == [True, True]
    assert open_fd_count() == before
    os.close(fd)
