"""Frame pairs read by position on several threads (vmafx/io/parallel_read.py): the same bytes
in the same order as the sequential reader, the readers left where the sequential one would
leave them, and every way a file can stop or fail met as the sequential reader meets it."""

from __future__ import annotations

import errno
import lzma
import os

import numpy as np
import pytest

from vmafx.io import video
from vmafx.io.inputs import InputError, open_input
from vmafx.io.parallel_read import ParallelPairReads, read_mapped, read_threads

from ..reference import vendored_pairs


def _pair(prefix):
    return next(p for p in vendored_pairs() if p.id.startswith(prefix))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Uncompressed y4m pairs: odd-sized 641x361 (6 frames) and 10-bit 1280x720 (2 frames)."""
    d = tmp_path_factory.mktemp("plain")
    out = {}
    for prefix in ("p16_", "p15_"):
        pair = _pair(prefix)
        names = []
        for f in (pair.ref_file, pair.dist_file):
            path = d / f.name[:-3]
            path.write_bytes(lzma.decompress(f.read_bytes()))
            names.append(str(path))
        out[prefix] = (pair, *names)
    return out


def _sequential(path, **geo) -> list[bytes]:
    with open_input(path, **geo) as inp:
        frames, buf = [], bytearray(inp.info.frame_size)
        while inp.read_frame_into(memoryview(buf)):
            frames.append(bytes(buf))
    return frames


def _raw_copy(y4m: str, out) -> str:
    with open(out, "wb") as f:
        for frame in _sequential(y4m):
            f.write(frame)
    return str(out)


def _read_all(ref, dist, pool, batch, mapped=False):
    """Every pair through the pool, ``batch`` at a time; (pairs, the pairs' bytes)."""
    fs = ref.info.frame_size
    host = bytearray(2 * batch * fs)
    got = []
    while True:
        ra, da = ref.frames_at(mapped=mapped), dist.frames_at(mapped=mapped)
        n = pool.read(ra, da, memoryview(host), fs, batch)
        ra.advance(n)
        da.advance(n)
        ra.close()
        da.close()
        got += [bytes(host[k * fs:(k + 1) * fs]) for k in range(2 * n)]
        if n < batch:
            return got


@pytest.mark.parametrize("mapped", [False, True], ids=["preadv", "mmap"])
@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("prefix", ["p16_", "p15_"])
def test_pairs_come_in_order_equal_to_the_sequential_reader(files, prefix, threads, mapped):
    pair, ref_path, dist_path = files[prefix]
    want = [f for ab in zip(_sequential(ref_path), _sequential(dist_path)) for f in ab]
    pool = ParallelPairReads(threads)
    try:
        with open_input(ref_path) as ref, open_input(dist_path) as dist:
            got = _read_all(ref, dist, pool, 4, mapped)  # 4 a call: the last call is short
            assert ref.frames_read == dist.frames_read == pair.frames
            assert ref.read_frame() is None and dist.read_frame() is None  # the end, as the sequential reader's
    finally:
        pool.close()
    assert len(got) == 2 * pair.frames and got == want


def test_raw_yuv_in_order_and_the_reader_continues_where_the_pool_stopped(files, tmp_path):
    pair, ref_y4m, dist_y4m = files["p16_"]
    geo = dict(width=641, height=361, pixel_format="420", bitdepth=8)
    ref_path, dist_path = _raw_copy(ref_y4m, tmp_path / "r.yuv"), _raw_copy(dist_y4m, tmp_path / "d.yuv")
    want_ref = _sequential(ref_path, **geo)
    pool = ParallelPairReads(3)
    try:
        with open_input(ref_path, **geo) as ref, open_input(dist_path, **geo) as dist:
            fs = ref.info.frame_size
            host = bytearray(2 * 4 * fs)
            ra, da = ref.frames_at(), dist.frames_at()
            assert pool.read(ra, da, memoryview(host), fs, 4) == 4
            ra.advance(4)
            da.advance(4)
            assert bytes(host[2 * fs:3 * fs]) == want_ref[1]
            assert ref.frames_read == 4
            nxt = bytearray(fs)
            assert ref.read_frame_into(memoryview(nxt)) and bytes(nxt) == want_ref[4]  # sequential again
            assert ref.frames_read == 5
    finally:
        pool.close()


@pytest.mark.parametrize("mapped", [False, True], ids=["preadv", "mmap"])
def test_a_truncated_last_frame_stops_the_pool_and_fails_as_before(files, tmp_path, mapped):
    _pair_, ref_path, dist_path = files["p16_"]
    cut = tmp_path / "cut.y4m"
    data = open(dist_path, "rb").read()
    cut.write_bytes(data[:-1000])  # the sixth frame loses its last 1,000 bytes
    pool = ParallelPairReads(4)
    try:
        with open_input(ref_path) as ref, open_input(str(cut)) as dist:
            fs = ref.info.frame_size
            host = bytearray(2 * 8 * fs)
            ra, da = ref.frames_at(mapped=mapped), dist.frames_at(mapped=mapped)
            assert pool.read(ra, da, memoryview(host), fs, 8) == 5
            ra.advance(5)
            da.advance(5)
            with pytest.raises(InputError) as parallel:
                dist.read_frame_into(memoryview(bytearray(fs)))
        with open_input(str(cut)) as alone:
            for _ in range(5):
                alone.read_frame()
            with pytest.raises(InputError) as sequential:
                alone.read_frame()
    finally:
        pool.close()
    assert str(parallel.value) == str(sequential.value)
    assert str(parallel.value).endswith(f"frame 5 is truncated ({fs - 1000} of {fs} bytes)")


@pytest.mark.parametrize("mapped", [False, True], ids=["preadv", "mmap"])
def test_frame_lines_with_parameters_are_left_to_the_sequential_reader(files, tmp_path, mapped):
    """A ``FRAME`` line with parameters changes every later offset: the pool stops before it."""
    _pair_, ref_path, _dist = files["p16_"]
    frames = _sequential(ref_path)
    header = open(ref_path, "rb").readline()
    odd = tmp_path / "params.y4m"
    with open(odd, "wb") as f:
        f.write(header)
        for k, frame in enumerate(frames):
            f.write(b"FRAME Ixyz\n" if k == 2 else b"FRAME\n")
            f.write(frame)
    pool = ParallelPairReads(2)
    try:
        with open_input(ref_path) as ref, open_input(str(odd)) as dist:
            fs = ref.info.frame_size
            ra, da = ref.frames_at(mapped=mapped), dist.frames_at(mapped=mapped)
            assert pool.read(ra, da, memoryview(bytearray(2 * 6 * fs)), fs, 6) == 2
            da.advance(2)
            buf = bytearray(fs)
            assert dist.read_frame_into(memoryview(buf)) and bytes(buf) == frames[2]
    finally:
        pool.close()


def test_read_errors_surface_as_one_input_error_naming_the_file_and_frame(files, monkeypatch):
    _pair_, ref_path, dist_path = files["p16_"]
    real = os.preadv

    def failing(fd, bufs, offset):
        if os.path.realpath(f"/proc/self/fd/{fd}") == os.path.realpath(dist_path) and offset > 300_000:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, bufs, offset)

    monkeypatch.setattr(video.os, "preadv", failing)
    pool = ParallelPairReads(8)  # several threads fail: one error comes out, the first frame's
    try:
        with open_input(ref_path) as ref, open_input(dist_path) as dist:
            fs = ref.info.frame_size  # 347,603 bytes: distorted frame 0 reads, frame 1 on fail
            ra, da = ref.frames_at(), dist.frames_at()
            with pytest.raises(InputError, match=rf"^{dist_path}: frame 1 cannot be read \(Input/output error\)$"):
                pool.read(ra, da, memoryview(bytearray(2 * 6 * fs)), fs, 6)
    finally:
        pool.close()


def test_compressed_files_and_given_back_frames_are_not_read_by_position(files):
    pair, ref_path, _dist = files["p16_"]
    with open_input(str(pair.ref_file)) as xz:
        assert xz.frames_at() is None
    with open_input(ref_path) as ref:
        frame = ref.read_frame()
        ref.pushback(frame)
        assert ref.frames_at() is None
        assert ref.read_frame() is frame
        assert ref.frames_at() is not None


def test_mapped_reads_are_asked_for_by_the_environment(monkeypatch):
    monkeypatch.delenv("VMAFX_READ_MMAP", raising=False)
    assert read_mapped() is False
    monkeypatch.setenv("VMAFX_READ_MMAP", "1")
    assert read_mapped() is True
    monkeypatch.setenv("VMAFX_READ_MMAP", "yes")
    with pytest.raises(ValueError, match=r"VMAFX_READ_MMAP: expected 0 or 1, got 'yes'"):
        read_mapped()


def test_read_threads_from_the_environment(monkeypatch):
    monkeypatch.setenv("VMAFX_READ_THREADS", "3")
    assert read_threads() == 3 and read_threads(5) == 5
    monkeypatch.setenv("VMAFX_READ_THREADS", "many")
    with pytest.raises(ValueError, match=r"VMAFX_READ_THREADS: expected a whole number"):
        read_threads()
    monkeypatch.delenv("VMAFX_READ_THREADS")
    assert read_threads() == min(8, os.cpu_count() or 1)
    with pytest.raises(ValueError, match="at least 1"):
        read_threads(0)


def test_ten_bit_samples_keep_their_little_endian_values(files):
    """The 10-bit pair read by position unpacks to the values the plane reader gives."""
    _pair_, ref_path, dist_path = files["p15_"]
    pool = ParallelPairReads(2)
    try:
        with open_input(ref_path) as ref, open_input(dist_path) as dist:
            got = _read_all(ref, dist, pool, 2)
    finally:
        pool.close()
    planes = video.read_all(ref_path)[1][1]
    y = np.frombuffer(got[2], "<u2", planes[0].size).reshape(planes[0].shape)
    assert y.max() > 255 and np.array_equal(y, planes[0])
