"""Fair admission: per-uid caps (with fake uids), peer credentials, and a second user served at every cap."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from vmafx.protocol import Error, ErrorCode, Limits
from vmafxd.admission import Admission, Holdings, peer_creds

from ..daemon.conftest import ROOT, Daemon
from ..daemon.rawclient import RawClient

NOBODY = 65534


def test_connection_caps_per_uid_and_for_the_daemon():
    adm = Admission(Limits(max_clients=5, max_clients_per_uid=2))
    for _ in range(2):
        assert adm.admit(1000) is None
        adm.connected(1000)
    err = adm.admit(1000)
    assert (err.code, err.field) == (ErrorCode.E_LIMIT, "limits.max_clients_per_uid")
    assert "uid 1000 already has 2 connections" in err.message
    # Another user is still served, up to the daemon's own cap.
    for uid in (1001, 1001, 1002):
        assert adm.admit(uid) is None
        adm.connected(uid)
    err = adm.admit(1003)
    assert (err.code, err.field) == (ErrorCode.E_LIMIT, "limits.max_clients")
    adm.disconnected(1000, Holdings())
    assert adm.admit(1003) is None and adm.admit(1000) is None
    assert adm.accounts[1000].clients == 1 and adm.clients == 4


def test_sessions_buffers_and_frames_are_capped_per_uid_and_in_total():
    lim = Limits(max_sessions_per_uid=3, max_buffers_per_uid=4, max_frames_in_flight_per_uid=5,
                 max_buffers_total=6, max_frames_in_flight_total=7)
    adm = Admission(lim)
    for uid in (1000, 1001):
        adm.connected(uid)
    full = Holdings(sessions=3, buffers=4, frames=5, bytes=500)
    adm.sync(1000, Holdings(), full)
    assert adm.total == full
    for check, field, limit in ((lambda u: adm.check_session(u), "session", "max_sessions_per_uid"),
                                (lambda u: adm.check_buffer(u), "buffer", "max_buffers_per_uid"),
                                (lambda u: adm.check_frame(u, 0, 1), "index", "max_frames_in_flight_per_uid")):
        with pytest.raises(Exception) as ei:
            check(1000)
        assert (ei.value.code, ei.value.field) == (ErrorCode.E_NOMEM, field) and limit in ei.value.message
        check(1001)  # the other user is not affected
    # The daemon's totals bind every user.
    adm.sync(1001, Holdings(), Holdings(buffers=2, frames=2))
    with pytest.raises(Exception) as ei:
        adm.check_buffer(1001)
    assert "limits.max_buffers_total" in ei.value.message
    with pytest.raises(Exception) as ei:
        adm.check_frame(1001, 0, 1)
    assert "limits.max_frames_in_flight_total" in ei.value.message
    # A client that goes takes what it held with it.
    adm.disconnected(1000, full)
    assert 1000 not in adm.accounts and adm.total == Holdings(buffers=2, frames=2)
    adm.check_buffer(1001)


def test_peer_credentials_of_a_unix_socket():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        creds = peer_creds(a)
    assert (creds.pid, creds.uid, creds.gid) == (os.getpid(), os.geteuid(), os.getegid())
    assert set(os.getgroups()) | {os.getegid()} <= creds.groups


def _peer(sock_path: str, uid: int | None, *extra: str) -> dict:
    args = [sys.executable, "-m", "tests.reliability.peer_client", sock_path, str(uid if uid is not None else os.getuid()),
            *extra]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'client'}", PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=str(ROOT), env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _shared_daemon(tmp_path, config: str) -> Daemon:
    cfg = tmp_path / "vmafxd.toml"
    cfg.write_text(config)
    os.chmod(tmp_path, 0o755)
    d = Daemon("--config", str(cfg))
    os.chmod(d.dir, 0o755)  # another user must reach the socket (mode 0666 below)
    return d


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs root (setuid to nobody)")


@needs_root
def test_one_user_at_its_connection_cap_leaves_another_user_served(tmp_path):
    d = _shared_daemon(tmp_path, 'socket_mode = "0666"\nallow_users = ["root", "65534"]\n'
                                 '[limits]\nmax_clients_per_uid = 2\n')
    held = []
    try:
        for _ in range(2):
            c = RawClient(d.socket)
            c.hello()
            held.append(c)
        # Our uid is at its cap: refused with a typed error, delivered before the close.
        refused = _peer(d.socket, None)
        assert (refused["outcome"], refused["code"], refused["field"]) == (
            "error", "E_LIMIT", "limits.max_clients_per_uid"), refused
        # Another user is served, and scores exactly: psnr of 100 vs 110 is 10*log10(255^2/100).
        other = _peer(d.socket, NOBODY)
        assert other["uid"] == NOBODY and other["outcome"] == "scored", other
        assert other["psnr_y"] == pytest.approx(28.1308, abs=1e-3)
        # The daemon's status, asked by root, shows both users' counts; a freed slot serves our uid again.
        held.pop().close()
        d.wait_fds(d.baseline + 1)
        assert _peer(d.socket, None)["outcome"] == "scored"
    finally:
        for c in held:
            c.close()
        d.close()


@needs_root
def test_a_user_not_allowed_gets_e_perm_before_the_close(tmp_path):
    d = _shared_daemon(tmp_path, 'socket_mode = "0666"\n')
    try:
        out = _peer(d.socket, NOBODY)
        assert (out["outcome"], out["code"], out["field"]) == ("error", "E_PERM", "uid"), out
        assert f"uid {NOBODY} may not use this daemon" in out["message"]
        assert "refusing a connection" in d.log()
        # Our own uid (the daemon's) is allowed without being named.
        assert _peer(d.socket, None)["outcome"] == "scored"
    finally:
        d.close()


def test_a_refused_connection_is_a_typed_exception_and_one_line_from_vmafxctl(tmp_path):
    d = Daemon("--limit", "max_clients_per_uid=1")
    try:
        held = RawClient(d.socket)
        held.hello()
        import trio

        from vmafx import ConnectionRefused
        from vmafx.client import Client

        async def connect():
            with pytest.raises(ConnectionRefused) as ei:
                await Client.connect(d.socket)
            return ei.value

        exc = trio.run(connect)
        assert (exc.code, exc.field) == (ErrorCode.E_LIMIT, "limits.max_clients_per_uid")
        env = dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'client'}")
        out = subprocess.run([sys.executable, "-m", "vmafx.cli", "status", "--socket", d.socket],
                             capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))
        assert out.returncode != 0
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "E_LIMIT" in lines[0] and "max_clients_per_uid" in lines[0], out.stderr
        held.close()
    finally:
        d.close()


def test_list_sessions_and_status_show_only_the_callers_uid(tmp_path):
    """Unit level: a viewer that is not an admin sees its own uid's clients only."""
    from vmafxd.admission import Authorizer, PeerCreds

    auth = Authorizer(allow_users=(), allow_groups=("4242",), admin_groups=("777",), own_uid=5000)
    member = PeerCreds(1, 6000, 6000, frozenset({6000, 4242}))
    stranger = PeerCreds(2, 6001, 6001, frozenset({6001}))
    admin = PeerCreds(3, 6002, 6002, frozenset({6002, 777}))
    assert auth.refusal(member) is None and auth.refusal(PeerCreds(4, 5000, 5000)) is None
    err = auth.refusal(stranger)
    assert (err.code, err.field) == (ErrorCode.E_PERM, "uid") and "uid 6001" in err.message
    assert auth.refusal(None).code is ErrorCode.E_PERM
    assert [auth.is_admin(c) for c in (member, stranger, admin, PeerCreds(5, 0, 0), PeerCreds(6, 5000, 5000))] == [
        False, False, True, True, True]


def test_per_uid_caps_hold_across_a_users_connections():
    d = Daemon("--limit", "max_sessions_per_uid=2", "--limit", "max_buffers_per_uid=3")
    try:
        a, b = RawClient(d.socket), RawClient(d.socket)
        a.hello()
        b.hello()
        sa = a.open_ok(width=64, height=64, features=["psnr"]).session
        sb = b.open_ok(width=64, height=64, features=["psnr"]).session
        err = b.open_session(width=64, height=64, features=["psnr"])
        assert isinstance(err, Error) and (err.code, err.field) == ("E_NOMEM", "session")
        assert "limits.max_sessions_per_uid" in err.message
        a.close_session(sa)  # the user's share comes back when a session closes
        sb2 = b.open_ok(width=64, height=64, features=["psnr"]).session
        from ..daemon.rawclient import frame_memfd
        from .test_budgets import _picture

        bufs = [frame_memfd(_picture(v)) for v in range(4)]
        for buf in bufs[:2]:
            a.register_ok(buf)
        b.register_ok(bufs[2])
        err = b.register(bufs[3])
        assert isinstance(err, Error) and (err.code, err.field) == ("E_NOMEM", "buffer")
        assert "limits.max_buffers_per_uid" in err.message
        a.close()  # a's buffers go with its connection (once the daemon has seen it go)
        for _ in range(200):
            reply = b.register(bufs[3])
            if not isinstance(reply, Error):
                break
            time.sleep(0.02)
        assert not isinstance(reply, Error), reply
        for s in (sb, sb2):
            b.close_session(s)
        b.close()
        for buf in bufs:
            buf.close()
    finally:
        d.close()


def test_frames_fit_is_each_frame_checked_in_turn():
    """A submit_many's frames are checked in one step: frames_fit says yes exactly when check_frame
    would let every one of them in, each counted before the next (every bound at its edge)."""
    import itertools

    lim = Limits(max_frames_in_flight_per_uid=4, max_frames_in_flight_total=5,
                 max_bytes_in_flight_per_client=300, max_bytes_in_flight_total=400)
    seen = set()
    for uid_frames, other_frames, client_bytes, other_bytes, cost, count in itertools.product(
            range(5), range(2), (0, 100, 200), (0, 150), (0, 50, 100), range(1, 5)):
        adm = Admission(lim)
        adm.sync(1000, Holdings(), Holdings(frames=uid_frames, bytes=client_bytes))
        adm.sync(1001, Holdings(), Holdings(frames=other_frames, bytes=other_bytes))
        fits = adm.frames_fit(1000, client_bytes, cost, count)
        held = client_bytes
        try:
            for _ in range(count):
                adm.check_frame(1000, held, cost)
                adm.count_frames(1000, 1, cost)
                held += cost
            each = True
        except Exception:
            each = False
        assert fits == each, (uid_frames, other_frames, client_bytes, other_bytes, cost, count)
        seen.add(fits)
    assert seen == {True, False}
    assert Admission(lim).frames_fit(4242, 0, 0, 4)  # a uid without an account yet
