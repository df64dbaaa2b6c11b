"""Several devices: sessions are placed on devices, a buffer is read only on the device it lives on.

Runs on the GPU lane over the emulator with two emulated devices
(VMAFXD_EMU_DEVICES=2), so the placement logic is exercised without two GPUs;
the same code runs one worker and one library stream per real device.
"""

import pytest

from vmafx.protocol import FrameError, Result

from ..daemon.conftest import Daemon
from ..daemon.test_daemon_scoring import reference_frames
from ..daemon.rawclient import RawClient, frame_memfd
from ..reference import vendored_pairs
from .conftest import load_runtime


@pytest.fixture(scope="module", params=["in-process", "lane-process"])
def two_device_daemon(request):
    """The lane in the daemon, and in worker processes (--lane-process: one per device)."""
    load_runtime("emu")
    extra = ("--lane-process",) if request.param == "lane-process" else ()
    d = Daemon("--lane", "emu", "--gpu-batch", "4", *extra, workers=1, env={"VMAFXD_EMU_DEVICES": "2"})
    try:
        yield d
    finally:
        rc = d.stop()
        log = d.log()
        d.close()
        assert rc == 0, log[-3000:]


@pytest.fixture(scope="module")
def p01():
    refs, dists = vendored_pairs()[0].pictures()
    return refs, dists


def _expected(refs, dists, n):
    return reference_frames(refs, dists, features=("psnr", "vif"), models=(), n=n)[0]


def test_sessions_spread_over_devices_and_score_at_the_same_time(two_device_daemon, p01):
    refs, dists = p01
    c = RawClient(two_device_daemon.socket, "placement")
    hello = c.hello()
    lane = hello.lanes[0]
    assert [d["device"] for d in lane["devices"]] == [0, 1]
    s0 = c.open_ok(features=["psnr", "vif"])
    s1 = c.open_ok(features=["psnr", "vif"])
    assert {s0.device, s1.device} == {0, 1}
    bufs = {}
    for s in (s0, s1):
        for k in range(3):
            rb, db = frame_memfd(refs[k]), frame_memfd(dists[k])
            bufs[(s.session, k)] = (rb, db, c.register_ok(rb, device=s.device), c.register_ok(db, device=s.device))
    for k in range(3):  # interleaved: both devices busy at once
        for s in (s0, s1):
            _, _, rid, did = bufs[(s.session, k)]
            c.submit(s.session, k, rid, did)
    want = _expected(refs, dists, 3)
    for s in (s0, s1):
        c.close_session(s.session, timeout=120)
        for k in range(3):
            out = c.outcomes[(s.session, k)]
            assert isinstance(out, Result) and out.metrics == want[k], (s.device, k)
    c.close()
    for rb, db, _, _ in bufs.values():
        rb.close()
        db.close()


def test_a_buffer_on_another_device_is_refused_naming_the_device(two_device_daemon, p01):
    refs, dists = p01
    c = RawClient(two_device_daemon.socket, "wrong-device")
    c.hello()
    s = c.open_ok(features=["psnr"], device=1)
    assert s.device == 1
    rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
    rid = c.register_ok(rb, device=0)
    did = c.register_ok(db, device=1)
    c.submit(s.session, 0, rid, did)
    out = c.outcome(s.session, 0)
    assert isinstance(out, FrameError) and out.code == "E_INVAL" and out.field == "ref"
    assert "device 0" in out.message and "device 1" in out.message
    reply = c.open_session(features=["psnr"], device=5)
    assert reply.TYPE == "error" and reply.code == "E_NOTSUP" and reply.field == "device"
    c.close_session(s.session)
    c.close()
    rb.close()
    db.close()


def test_a_buffer_on_another_device_within_a_group_fails_that_frame_alone(two_device_daemon, p01):
    """A submit_many whose middle frame reads a buffer of another device: that frame gets its one error
    (E_INVAL naming the role), the frames before and after it in the group score."""
    refs, dists = p01
    c = RawClient(two_device_daemon.socket, "wrong-device-group", submit_many=True)
    c.hello()
    s = c.open_ok(features=["psnr"], device=1)
    bufs = [(frame_memfd(refs[k]), frame_memfd(dists[k])) for k in range(3)]
    ids = [(c.register_ok(rb, device=1), c.register_ok(db, device=1)) for rb, db in bufs]
    elsewhere = frame_memfd(dists[1])
    other = c.register_ok(elsewhere, device=0)
    c.submit_many(s.session, [(0, *ids[0]), (1, ids[1][0], other), (2, *ids[2])])
    c.close_session(s.session, timeout=60)
    out = c.outcomes[(s.session, 1)]
    assert isinstance(out, FrameError) and out.code == "E_INVAL" and out.field == "dist"
    assert "device 0" in out.message and "device 1" in out.message
    want = reference_frames(refs, dists, features=("psnr",), models=(), n=3)[0]
    for k in (0, 2):
        assert isinstance(c.outcomes[(s.session, k)], Result) and c.outcomes[(s.session, k)].metrics == want[k]
    assert c.conn.ledger.unanswered() == [] and c.conn.ledger.unreleased() == 0
    c.close()
    for rb, db in bufs:
        rb.close()
        db.close()
    elsewhere.close()


@pytest.mark.parametrize("mode", ["in-process", "lane-process"])
def test_a_subset_of_devices_keeps_their_ordinals(p01, mode):
    """--gpu-devices 1: the lane has device 1 (not 0), takes buffers and sessions there, and scores."""
    load_runtime("emu")
    refs, dists = p01
    extra = ("--lane-process",) if mode == "lane-process" else ()
    d = Daemon("--lane", "emu", "--gpu-devices", "1", *extra, workers=1, env={"VMAFXD_EMU_DEVICES": "2"})
    try:
        c = RawClient(d.socket, "subset")
        assert [dev["device"] for dev in c.hello().lanes[0]["devices"]] == [1]
        s = c.open_ok(features=["psnr"], device=1)
        assert s.device == 1
        rb, db = frame_memfd(refs[0]), frame_memfd(dists[0])
        rid, did = c.register_ok(rb, device=1), c.register_ok(db)  # no device: the lane's first, 1
        c.submit(s.session, 0, rid, did)
        out = c.outcome(s.session, 0, timeout=60)
        assert isinstance(out, Result) and out.metrics == reference_frames(refs, dists, features=("psnr",),
                                                                           models=(), n=1)[0][0]
        assert c.register(rb, device=0).code == "E_INVAL"
        assert c.open_session(features=["psnr"], device=0).code == "E_NOTSUP"
        c.close_session(s.session)
        c.close()
        rb.close()
        db.close()
        assert d.stop() == 0
    finally:
        d.close()
