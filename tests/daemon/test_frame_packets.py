"""The daemon's own encoding of a frame's result and releases: the protocol's bytes, or None."""

import pytest

from vmafx.protocol import Released, Result
from vmafx.protocol.codec import decode, encode
from vmafxd.frame_packets import FramePackets


@pytest.mark.parametrize("session, index, ref, dist", [(3, 100, 7, 8), (0, 0, (1 << 32) - 1, 0), (200, 70000, 1, 2)])
def test_frame_packets_release_pairs_are_the_general_paths_bytes(session, index, ref, dist):
    pair = FramePackets().released_pair(session, index, ref, dist)
    assert pair == (encode(Released(buffer=ref, session=session, index=index, role="ref"))[0],
                    encode(Released(buffer=dist, session=session, index=index, role="dist"))[0])


@pytest.mark.parametrize("metrics", [{"psnr_y": 40.5, "vmaf": None}, {}, {f"m{i}": i / 7 for i in range(40)}])
def test_frame_packets_results_are_the_general_paths_bytes(metrics):
    assert FramePackets().result(3, 5, metrics) == encode(Result(session=3, index=5, metrics=metrics))[0]


@pytest.mark.parametrize("args", [(3, 1, None, 2), (3, -1, 1, 2), (3, 1 << 32, 1, 2), (True, 1, 1, 2)])
def test_frame_packets_leave_what_is_not_plainly_valid_to_the_general_path(args):
    assert FramePackets().released_pair(*args) is None


@pytest.mark.parametrize("session, metrics", [(3, {"n": 3}), (3, {"x": "1"}), (3, {1: 1.0}), (-1, {}),
                                              (3, {f"m{i}": 0.0 for i in range(4097)})])
def test_frame_packets_results_leave_what_is_not_plainly_valid_to_the_general_path(session, metrics):
    assert FramePackets().result(session, 1, metrics) is None


def test_a_frame_packet_decodes_to_its_message():
    ref, dist = FramePackets().released_pair(3, 9, 11, 12)
    assert decode(ref) == Released(buffer=11, session=3, index=9, role="ref")
    assert decode(dist) == Released(buffer=12, session=3, index=9, role="dist")
    assert decode(FramePackets().result(3, 9, {"a": 1.5, "b": None})) == Result(session=3, index=9,
                                                                                metrics={"a": 1.5, "b": None})
