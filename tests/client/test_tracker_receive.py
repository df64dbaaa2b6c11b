"""The client library's receive path, sans I/O: a bundle of frames' results and releases."""

import dataclasses

import msgpack
import pytest

from vmafx.protocol import messages as m
from vmafx.protocol.errors import RemoteProtocolError
from vmafx.protocol.state import State
from vmafx.tracking import ClientTracker, FrameResult


def _tracker():
    t = ClientTracker("t")
    t.conn.state, t.conn.bundles, t.conn.submit_many = State.OPEN, True, True
    st = t.opened(m.SessionOpened(re=0, session=3, lane="cpu", metrics=("psnr_y",)),
                  width=64, height=64, pixel_format="yuv420p", bitdepth=8)
    ref, dist = (t.registered(m.BufferRegistered(re=0, buffer=b)) for b in (1, 2))
    return t, st, ref, dist


def _bundle(maps):
    return msgpack.packb(maps, use_bin_type=True)


def test_a_bundle_of_frames_gives_each_its_result_and_frees_the_buffers_once():
    t, st, ref, dist = _tracker()
    freed = []
    ref.on_released.append(lambda: freed.append("ref"))
    t.submit_packet(st, [(i, ref, dist) for i in (0, 1)])
    assert ref.busy and dist.busy and t.in_flight == 2
    maps = [{"t": "released", "buffer": b, "session": 3, "index": i, "role": r}
            for i in (0, 1) for b, r in ((1, "ref"), (2, "dist"))]
    maps += [{"t": "result", "session": 3, "index": i, "metrics": {"psnr_y": 40.0 + i, "x": None}} for i in (0, 1)]
    t.receive(_bundle(maps))
    got = [t.next_outcome(st), t.next_outcome(st)]
    assert got == [FrameResult(3, 0, {"psnr_y": 40.0, "x": None}), FrameResult(3, 1, {"psnr_y": 41.0, "x": None})]
    assert got[0].ok and got[0].check() is got[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].index = 5
    assert not ref.busy and not dist.busy and freed == ["ref"] and t.in_flight == 0


def test_a_release_the_frame_did_not_hold_is_a_protocol_violation():
    t, st, ref, dist = _tracker()
    t.submit_packet(st, [(0, ref, dist)])
    wrong = {"t": "released", "buffer": 2, "session": 3, "index": 0, "role": "ref"}  # dist's buffer as ref
    with pytest.raises(RemoteProtocolError) as e:
        t.receive(_bundle([wrong]))
    assert e.value.field == "buffer" and "did not reference as ref" in e.value.message
