"""The client library against a scriptable stand-in daemon: pipelining, back-pressure, typed errors,
buffer release tracking, and loud failure when the daemon breaks the protocol's promises.

The stand-in "scores" a frame as the sums of its luma planes, so a result says
which buffer content the daemon saw.  End-to-end scoring is in test_end_to_end.py.
"""


import numpy as np
import pytest
import trio

from vmafx.blocking import BlockingClient
from vmafx.client import Client, open_client
from vmafx.exceptions import (
    ConnectionClosed, DaemonLost, DaemonUnavailable, FenceTimeout, InvalidArgument, NotFound, ProtocolViolation,
)
from vmafx.frames import EventFdFence, memfd_buffer
from vmafx.protocol import messages as m
from vmafx.protocol.errors import ErrorCode, LocalProtocolError
from vmafx.protocol.limits import Limits

from .conftest import settled_fd_count
from .fake_daemon import FakeDaemon

W, H = 16, 8


def _luma(value: int):
    y = np.full((H, W), value, np.uint8)
    c = np.zeros((H // 2, W // 2), np.uint8)
    return [y, c, c.copy()]


def _sum(value: int) -> float:
    return float(value * W * H)


@pytest.fixture
async def daemon(nursery, tmp_path):
    fake = FakeDaemon()
    path = str(tmp_path / "fake.sock")
    await nursery.start(fake.serve, path)
    fake.path = path
    return fake


async def _pair(client, ref_value, dist_value):
    ref, dist = memfd_buffer(W, H), memfd_buffer(W, H)
    ref.write_frame(_luma(ref_value))
    dist.write_frame(_luma(dist_value))
    return await client.register_buffer(ref), await client.register_buffer(dist)


async def test_hello_exposes_limits_lanes_and_requests_answer(daemon):
    async with open_client(daemon.path) as client:
        assert client.info.server == "fake-vmafxd"
        assert client.limits.max_frames_in_flight == 4
        assert client.lanes == ({"lane": "fake", "devices": []},)
        st = await client.status()
        assert st["version"] == "fake"
        session = await client.open_session(width=W, height=H)
        assert [s["session"] for s in await client.list_sessions()] == [session.id]


async def test_results_arrive_in_order_with_the_submitted_content_and_a_summary(daemon):
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H, features=["psnr"])
        handles = [await _pair(client, 10 + i, 20 + i) for i in range(3)]
        for i, (r, d) in enumerate(handles):
            await session.submit(i * 2, r, d)
        summary = await session.close()
        results = [x async for x in session.results()]
        assert [x.index for x in results] == [0, 2, 4]
        assert [x.metrics["ref_sum"] for x in results] == [_sum(10), _sum(11), _sum(12)]
        assert [x.metrics["dist_sum"] for x in results] == [_sum(20), _sum(21), _sum(22)]
        assert summary.frames == 3 and summary.failed == 0 and session.summary is summary
        assert all(not h.busy for pair in handles for h in pair)
        for pair in handles:
            for h in pair:
                h.buffer.close()


async def test_submit_waits_at_the_in_flight_limit_instead_of_failing(daemon):
    daemon.gate = trio.Event()  # hold every frame
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 1, 2)
        submitted = []

        async def producer():
            for i in range(10):
                await session.submit(i, r, d)
                submitted.append(i)

        async with trio.open_nursery() as n:
            n.start_soon(producer)
            await trio.sleep(0.2)
            assert submitted == [0, 1, 2, 3] and client.in_flight == 4
            daemon.gate.set()
        assert submitted == list(range(10))
        await session.close()
        assert len([x async for x in session.results()]) == 10
        assert daemon.max_seen_in_flight == 4


async def test_wait_released_and_callbacks_follow_the_releases(daemon):
    daemon.gate = trio.Event()
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 3, 4)
        calls = []
        r.on_released(lambda h: calls.append((h.id, h.outstanding)))
        await session.submit(0, r, d)
        await session.submit(1, r, r)  # the same buffer in both roles: two references
        assert r.busy and r.outstanding == 3 and d.outstanding == 1
        with trio.move_on_after(0.1) as scope:
            await r.wait_released()
        assert scope.cancelled_caught
        daemon.gate.set()
        await r.wait_released()
        await d.wait_released()
        assert calls and calls[-1] == (r.id, 0)
        await session.close()


async def test_daemon_errors_are_typed_and_name_the_field(daemon):
    async with open_client(daemon.path) as client:
        with pytest.raises(InvalidArgument) as e:
            await client.open_session(width=5000, height=H)
        assert e.value.code is ErrorCode.E_INVAL and e.value.field == "width"
        r, _ = await _pair(client, 0, 0)
        await client.unregister_buffer(r)
        assert r.unregistered
        with pytest.raises(NotFound) as e:
            await client.unregister_buffer(r)
        assert e.value.field == "buffer"
        # still usable after a refused request
        assert (await client.status())["clients"] == 1


async def test_a_fence_timeout_is_a_result_with_a_typed_error_and_the_session_goes_on(daemon):
    daemon.fence_timeout = 0.2
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 5, 6)
        late, ok = EventFdFence(), EventFdFence()
        ok.signal()
        await session.submit(0, r, d, ref_fence=late)
        await session.submit(1, r, d, dist_fence=ok)
        summary = await session.close()
        first, second = [x async for x in session.results()]
        assert not first.ok and isinstance(first.error, FenceTimeout)
        assert first.error.field == "ref_fence" and first.error.index == 0
        with pytest.raises(FenceTimeout):
            first.check()
        assert second.ok and second.metrics["dist_sum"] == _sum(6)
        assert (summary.frames, summary.failed) == (1, 1)
        late.close()
        ok.close()


async def test_local_misuse_is_refused_before_sending(daemon):
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 0, 0)
        await session.submit(5, r, d)
        with pytest.raises(LocalProtocolError) as e:
            await session.submit(5, r, d)
        assert e.value.field == "index"
        await session.close()
        with pytest.raises(LocalProtocolError) as e:
            await session.submit(6, r, d)
        assert e.value.field == "session"
    assert daemon.submits == [(session.id, 5)]


def _swap_first_two(state={}):
    def rewrite(sid, index, out):
        if index == 0:
            state["held"] = out
            return []
        if index == 1:
            return out + state.pop("held")
        return out
    return rewrite


@pytest.mark.parametrize("rewrite, field", [
    (_swap_first_two(), "index"),  # outcomes out of order
    (lambda sid, i, out: out + [out[-1]], "index"),  # two outcomes for one frame
    (lambda sid, i, out: [out[0], out[0], out[-1]], "role"),  # ref released twice
    (lambda sid, i, out: [m.Released(buffer=out[1].buffer, session=sid, index=i, role="ref")] + out[1:], "buffer"),
])
async def test_a_daemon_breaking_a_promise_fails_loudly(daemon, rewrite, field):
    daemon.rewrite = rewrite
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 1, 2)
        with pytest.raises(ProtocolViolation) as e:
            await session.submit(0, r, d)
            await session.submit(1, r, d)
            await session.close()
        assert e.value.field == field
        with pytest.raises(ProtocolViolation):
            await client.status()


async def test_no_daemon_is_a_typed_error(tmp_path):
    with pytest.raises(DaemonUnavailable) as e:
        await Client.connect(str(tmp_path / "none.sock"))
    assert e.value.path.endswith("none.sock") and e.value.field == "path"


async def test_client_leaves_no_fd_behind(daemon):
    before = settled_fd_count()
    async with open_client(daemon.path) as client:
        session = await client.open_session(width=W, height=H)
        r, d = await _pair(client, 1, 2)
        f = EventFdFence()
        f.signal()
        await session.submit(0, r, d, ref_fence=f)
        await session.close()
        f.close()
        r.buffer.close()
        d.buffer.close()
    await daemon.idle()  # the stand-in daemon lives in this process: count only once it let go
    assert settled_fd_count() == before


async def test_blocking_client_has_the_same_surface(daemon):
    def run():
        with BlockingClient.connect(daemon.path) as client:
            assert client.limits.max_frames_in_flight == 4
            session = client.open_session(width=W, height=H)
            bufs = [memfd_buffer(W, H), memfd_buffer(W, H)]
            r, d = (client.register_buffer(b) for b in bufs)
            seen = []
            for i in range(12):  # more than the in-flight limit: submit pumps replies
                r.wait_released(timeout=5)
                d.wait_released(timeout=5)
                bufs[0].write_frame(_luma(i))
                bufs[1].write_frame(_luma(100 + i))
                session.submit(i, r, d, timeout=5)
                assert client.in_flight <= 4
            summary = session.close(timeout=5)
            for x in session.results():
                seen.append((x.index, x.metrics["ref_sum"], x.metrics["dist_sum"]))
            with pytest.raises(InvalidArgument) as e:
                client.open_session(width=5000, height=H)
            assert e.value.field == "width"
            assert client.status()["clients"] == 1
            for b in bufs:
                b.close()
            return summary, seen

    summary, seen = await trio.to_thread.run_sync(run)
    assert summary.frames == 12
    assert seen == [(i, _sum(i), _sum(100 + i)) for i in range(12)]


async def test_blocking_calls_time_out_and_the_connection_stays_usable(daemon):
    daemon.gate = trio.Event()

    def run():
        with BlockingClient.connect(daemon.path) as client:
            session = client.open_session(width=W, height=H)
            b = memfd_buffer(W, H)
            h = client.register_buffer(b)
            session.submit(0, h, h)
            with pytest.raises(TimeoutError):
                h.wait_released(timeout=0.2)
            assert client.status(timeout=5)["clients"] == 1
            b.close()
            return True

    assert await trio.to_thread.run_sync(run)
    daemon.gate.set()


async def test_the_callers_exception_comes_back_unwrapped_and_outer_cancellation_works(daemon):
    # The body runs inside the client's nursery; trio would wrap its exception in a group.
    with pytest.raises(KeyError):
        async with open_client(daemon.path) as client:
            await client.status()
            raise KeyError("mine")
    with trio.move_on_after(0.2) as scope:
        async with open_client(daemon.path):
            await trio.sleep(10)
    assert scope.cancelled_caught


async def test_a_raising_release_callback_ends_the_client_loudly(daemon):
    with pytest.raises(BaseExceptionGroup) as e:
        async with open_client(daemon.path) as client:
            session = await client.open_session(width=W, height=H)
            r, d = await _pair(client, 1, 2)
            r.on_released(lambda h: 1 / 0)
            await session.submit(0, r, d)
            await trio.sleep(5)  # cancelled when the receive task fails
    assert e.group_contains(ZeroDivisionError)


def test_blocking_code_and_vmafxctl_do_not_import_trio():
    import subprocess
    import sys

    code = "import sys, vmafx, vmafx.blocking, vmafx.cli, vmafx.frames\nprint('trio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def _goodbye_without_reading(path, *, task_status=trio.TASK_STATUS_IGNORED):
    """A daemon that answers the hello, then stops reading, says goodbye and closes -- with the
    client's request unread, so the client's next read is ECONNRESET before the queued goodbye."""
    import socket as _socket

    from vmafx.protocol.state import ServerConnection
    from vmafx.transport import TrioPacketChannel

    listener = trio.socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    await listener.bind(path)
    listener.listen(1)
    task_status.started()
    conn, _ = await listener.accept()
    chan = TrioPacketChannel(conn)
    sc = ServerConnection(Limits(), "short-lived")
    hello = sc.receive((await chan.receive()).data)
    await chan.send(sc.send(m.HelloReply(re=hello.seq, version=1, server="short-lived", limits=Limits().to_wire()))[0])
    await trio.sleep(0.3)  # the client's status request arrives and stays unread
    await chan.send(sc.send(m.Goodbye(reason="maintenance"))[0])
    chan.close()
    listener.close()


@pytest.mark.parametrize("api", ["async", "blocking"])
async def test_the_goodbye_reason_survives_a_connection_reset(nursery, tmp_path, api):
    path = str(tmp_path / "bye.sock")
    await nursery.start(_goodbye_without_reading, path)
    if api == "async":
        async with open_client(path) as client:
            with pytest.raises(ConnectionClosed) as e:
                await client.status()
    else:
        def run():
            with BlockingClient.connect(path) as client:
                with pytest.raises(ConnectionClosed) as e:
                    client.status(timeout=5)
                return e
        e = await trio.to_thread.run_sync(run)
    assert e.value.reason == "maintenance"
    assert not isinstance(e.value, ProtocolViolation)


async def _fatal_error_then_stop_reading(path, error_first, *, task_status=trio.TASK_STATUS_IGNORED):
    """A daemon that answers the hello, then closes the connection as vmafxd does after a fatal
    error: its ``error`` (E_PROTO), ``shutdown(SHUT_RD)`` (the client's next send fails with
    EPIPE), a moment of draining, then the close.  ``error_first=False`` stops reading before the
    error goes out: a client whose send fails before the error arrived."""
    import socket as _socket

    from vmafx.protocol.state import ServerConnection
    from vmafx.transport import TrioPacketChannel

    listener = trio.socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    await listener.bind(path)
    listener.listen(1)
    task_status.started()
    conn, _ = await listener.accept()
    chan = TrioPacketChannel(conn)
    sc = ServerConnection(Limits(), "strict")
    hello = sc.receive((await chan.receive()).data)
    await chan.send(sc.send(m.HelloReply(re=hello.seq, version=1, server="strict", limits=Limits().to_wire()))[0])
    error = m.Error(re=None, code=ErrorCode.E_PROTO.value, field="message", message="not a message of the protocol")
    if error_first:
        await chan.send(sc.send(error)[0])
        conn.shutdown(_socket.SHUT_RD)
    else:
        conn.shutdown(_socket.SHUT_RD)
        await trio.sleep(0.3)  # the client's send has failed by now
        await chan.send(sc.send(error)[0])
    await trio.sleep(0.5)
    chan.close()
    listener.close()


@pytest.mark.parametrize("error_first", [True, False], ids=["error_queued", "error_after_the_failed_send"])
@pytest.mark.parametrize("api", ["async", "blocking"])
async def test_a_send_refused_after_a_fatal_error_raises_the_daemons_reason(nursery, tmp_path, api, error_first):
    """The caller gets the daemon's error, not the socket's EPIPE (which read as a daemon that
    crashed: DaemonLost), also when its send failed before the error was read."""
    path = str(tmp_path / "strict.sock")
    await nursery.start(_fatal_error_then_stop_reading, path, error_first)
    if api == "async":
        async with open_client(path) as client:
            if not error_first:
                await trio.sleep(0.1)  # the daemon has stopped reading; its error is not out yet
            with pytest.raises(ConnectionClosed) as e:
                await client.status()
    else:
        def run():
            with BlockingClient.connect(path) as client:
                import time
                time.sleep(0.1)  # the error (if first) is queued unread; the daemon stopped reading
                with pytest.raises(ConnectionClosed) as e:
                    client.status(timeout=5)
                return e
        e = await trio.to_thread.run_sync(run)
    assert not isinstance(e.value, DaemonLost), e.value
    assert e.value.code is ErrorCode.E_PROTO and "not a message of the protocol" in str(e.value)
