"""The daemon's own encoding of a frame's result and releases: the protocol's bytes, or None."""

import pytest

from vmafx.protocol import Released, ReleasedMany, Result, ResultMany
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


@pytest.mark.parametrize("metrics", [{"psnr_y": 40.5, "vmaf": None}, {}, {f"m{i}": i / 7 for i in range(40)}])
def test_frame_packets_result_runs_are_the_general_paths_bytes(metrics):
    frames = [(i, {k: (None if v is None else v + i) for k, v in metrics.items()}) for i in (4, 5, 9)]
    (data,) = FramePackets().result_run(3, frames, 65536)
    columns = {k: [m[k] for _, m in frames] for k in metrics}
    assert data == encode(ResultMany(session=3, indices=(4, 5, 9), metrics=columns))[0]
    assert decode(data).results() == [Result(session=3, index=i, metrics=m) for i, m in frames]


def test_frame_packets_release_runs_are_the_general_paths_bytes():
    (data,) = FramePackets().released_many(3, [1, 2], [7, (1 << 32) - 1], [8, 0])
    assert data == encode(ReleasedMany(session=3, indices=(1, 2), ref=(7, (1 << 32) - 1), dist=(8, 0)))[0]


def test_a_result_run_is_cut_to_the_packet_size_and_the_frames_limit():
    frames = [(i, {f"metric_{k}": float(k * i) for k in range(40)}) for i in range(2000)]
    packets = FramePackets().result_run(3, frames, 65536)
    assert len(packets) > 2 and max(map(len, packets)) <= 65536
    runs = [decode(d) for d in packets]
    assert [i for r in runs for i in r.indices] == list(range(2000))
    small = FramePackets().result_run(3, [(i, {"a": 1.0}) for i in range(2500)], 1 << 20)
    assert [len(decode(d).indices) for d in small] == [1024, 1024, 452]  # MAX_FRAMES_PER_RUN


@pytest.mark.parametrize("frames", [[(1, {"a": 1})], [(1, {"a": "x"})], [(1, {2: 1.0})], [(-1, {"a": 1.0})],
                                    [(1, {"a": 1.0}), (2, [])]])
def test_frame_packets_result_runs_leave_what_is_not_plainly_valid_to_each_frame(frames):
    assert FramePackets().result_run(3, frames, 65536) is None
