"""Reading frames straight into a frame buffer (``Input.read_frame_into``): the same bytes and the
same errors as ``read_frame``, for y4m (regular file: preadv; pipe: buffered), raw .yuv, and a
FRAME line with parameters; reads mixed with ``read_frame`` keep the file position."""

from __future__ import annotations

import lzma
import os
import threading

import numpy as np
import pytest

from vmafx.formats import PixelFormat
from vmafx.frames import memfd_buffer
from vmafx.io.inputs import InputError, open_input
from vmafx.io.video import VideoInfo
from vmafx.io.y4m_writer import write_y4m


def _frames(n: int, info: VideoInfo) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(7)
    dtype = np.uint8 if info.bitdepth == 8 else np.dtype("<u2")
    top = (1 << info.bitdepth) - 1
    w, h = info.width, info.height
    return [[rng.integers(0, top, (h, w), dtype=dtype), rng.integers(0, top, ((h + 1) // 2, (w + 1) // 2), dtype=dtype),
             rng.integers(0, top, ((h + 1) // 2, (w + 1) // 2), dtype=dtype)] for _ in range(n)]


def _into(inp, info) -> list[list[np.ndarray]]:
    buf = memfd_buffer(info.width, info.height, info.pixel_format, info.bitdepth)
    out = []
    try:
        while True:
            with buf.frame_view() as view:
                if not inp.read_frame_into(view):
                    break
            out.append(buf.read_planes())
    finally:
        buf.close()
    return out


def _same(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for fa, fb in zip(a, b) for x, y in zip(fa, fb))


@pytest.mark.parametrize("bitdepth,size", [(8, (18, 10)), (10, (17, 9))])
def test_y4m_and_raw_read_into_the_buffer_equal_read_frame(tmp_path, bitdepth, size):
    info = VideoInfo(size[0], size[1], PixelFormat.YUV420P, bitdepth)
    frames = _frames(5, info)
    y4m = tmp_path / "a.y4m"
    write_y4m(y4m, info, frames)
    with open_input(str(y4m)) as inp:
        assert inp.reads_into
        assert _same(_into(inp, info), frames) and inp.frames_read == 5
    raw = tmp_path / "a.yuv"
    raw.write_bytes(b"".join(p.tobytes() for f in frames for p in f))
    with open_input(str(raw), width=info.width, height=info.height, pixel_format="420", bitdepth=bitdepth) as inp:
        assert _same(_into(inp, info), frames)
    xz = tmp_path / "a.y4m.xz"
    xz.write_bytes(lzma.compress(y4m.read_bytes()))
    with open_input(str(xz)) as inp:  # a decompressor: the buffered path
        assert _same(_into(inp, info), frames)


def test_mixed_reads_keep_the_position_and_pushback_comes_first(tmp_path):
    info = VideoInfo(16, 8, PixelFormat.YUV420P, 8)
    frames = _frames(6, info)
    path = tmp_path / "m.y4m"
    write_y4m(path, info, frames)
    buf = memfd_buffer(16, 8)
    got = []
    with open_input(str(path)) as inp:
        for i in range(6):
            if i in (1, 4):
                got.append(inp.read_frame())
            else:
                with buf.frame_view() as view:
                    assert inp.read_frame_into(view)
                got.append(buf.read_planes())
            if i == 2:
                inp.pushback(got.pop())  # given back: the next read, either way, returns it
        with buf.frame_view() as view:
            assert inp.read_frame_into(view)
        got.append(buf.read_planes())
        assert inp.read_frame() is None
    buf.close()
    assert _same(got, frames)


def test_a_frame_line_with_parameters_and_a_pipe_read_the_same(tmp_path):
    info = VideoInfo(16, 8, PixelFormat.YUV420P, 8)
    frames = _frames(3, info)
    path = tmp_path / "p.y4m"
    write_y4m(path, info, frames)
    data = path.read_bytes().replace(b"FRAME\n", b"FRAME Ixyz\n")
    path.write_bytes(data)
    with open_input(str(path)) as inp:
        assert _same(_into(inp, info), frames)
    fifo = tmp_path / "f.y4m"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(data))
    writer.start()
    try:
        with open_input(str(fifo)) as inp:
            assert _same(_into(inp, info), frames)
    finally:
        writer.join()


def test_truncation_and_a_bad_frame_line_say_what_read_frame_says(tmp_path):
    info = VideoInfo(16, 8, PixelFormat.YUV420P, 8)
    path = tmp_path / "t.y4m"
    write_y4m(path, info, _frames(3, info))
    data = path.read_bytes()
    cases = {"short.y4m": (data[:-50], "frame 2 is truncated (142 of 192 bytes)"),
             "bad.y4m": (data.replace(b"FRAME", b"FRAMX", 2).replace(b"FRAMX", b"FRAME", 1),
                         "frame 1: expected FRAME")}
    for name, (content, says) in cases.items():
        (tmp_path / name).write_bytes(content)
        with open_input(str(tmp_path / name)) as inp:
            with pytest.raises(InputError) as direct:
                while inp.read_frame() is not None:
                    pass
        with open_input(str(tmp_path / name)) as inp:
            with pytest.raises(InputError) as into:
                _into(inp, info)
        assert str(into.value) == str(direct.value) and says in str(direct.value)


class _Handle:
    def __init__(self, buf):
        self.buffer = buf


@pytest.mark.parametrize("parallel", [False, True])
def test_the_pair_filler_reads_pairs_and_says_which_input_ended_first(tmp_path, parallel):
    """vmafxctl's reader (one thread, or the distorted in a second one for large frames): the
    frames, libvmaf's notice and the frame given back for the frame-count warning alike."""
    from concurrent.futures import ThreadPoolExecutor

    from vmafx.remote_score import _PairFiller

    info = VideoInfo(16, 8, PixelFormat.YUV420P, 8)
    long_frames = _frames(4, info)
    write_y4m(tmp_path / "long.y4m", info, long_frames)
    write_y4m(tmp_path / "short.y4m", info, long_frames[:2])
    helper = ThreadPoolExecutor(1) if parallel else None
    pair = (_Handle(memfd_buffer(16, 8)), _Handle(memfd_buffer(16, 8)))
    try:
        for ref, dist in (("short", "long"), ("long", "short")):
            with open_input(str(tmp_path / f"{ref}.y4m")) as rr, open_input(str(tmp_path / f"{dist}.y4m")) as dr:
                fill = _PairFiller(rr, dr)
                for i in range(2):
                    assert fill(pair, helper)
                    assert _same([pair[0].buffer.read_planes(), pair[1].buffer.read_planes()],
                                 [long_frames[i], long_frames[i]])
                assert not fill(pair, helper)
                assert fill.ended_early == f'"{tmp_path / "short.y4m"}" ended before "{tmp_path / "long.y4m"}".'
                longer = rr if ref == "long" else dr
                assert _same([longer.read_frame()], [long_frames[2]])  # given back, then read again
        with open_input(str(tmp_path / "long.y4m")) as rr, open_input(str(tmp_path / "long.y4m")) as dr:
            fill = _PairFiller(rr, dr)
            while fill(pair, helper):
                pass
            assert fill.ended_early is None  # both ended together: no notice
        (tmp_path / "cut.y4m").write_bytes((tmp_path / "long.y4m").read_bytes()[:-10])
        with open_input(str(tmp_path / "cut.y4m")) as rr, open_input(str(tmp_path / "long.y4m")) as dr:
            fill = _PairFiller(rr, dr)
            with pytest.raises(InputError, match="cut.y4m: frame 3 is truncated"):
                while fill(pair, helper):
                    pass
    finally:
        for h in pair:
            h.buffer.close()
        if helper is not None:
            helper.shutdown()
