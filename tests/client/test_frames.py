"""Frame buffers, plane layouts and fences: sealed memfds refilled in place, typed layout errors, one owner per fd."""

import fcntl
import mmap
import os

import numpy as np
import pytest

from vmafx.exceptions import LayoutError
from vmafx.formats import PixelFormat, storage_planes
from vmafx.frames import (
    ALLOW_COPY, SEALS, EventFdFence, SyncFileFence, from_semi_planar, from_y4m_frame, memfd_buffer,
    memfd_buffer_from_planes, plane_layout, to_semi_planar, wrap_dmabuf,
)
from vmafx.io.video import VideoInfo
from .conftest import settled_fd_count
from vmafxd.core.picture import PlaneLayout, picture_from_buffer, picture_from_stored

F_GET_SEALS = 1034


def _frame(w, h, fmt, depth, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if depth == 8 else np.uint16
    hi = (1 << depth) - 1
    return [rng.integers(0, hi, size=(s.height, s.width * s.components), dtype=dtype)
            for s in storage_planes(PixelFormat(fmt), w, h, depth)]


def _daemon_view(buf):
    """What the daemon's CPU lane reads: a separate read-only mapping of the same fd."""
    fd = buf.fds[0].fileno()
    mm = mmap.mmap(fd, buf.size, mmap.MAP_SHARED, mmap.PROT_READ)
    arr = np.frombuffer(mm, np.uint8)
    pic = picture_from_buffer(arr, buf.pixel_format, buf.width, buf.height, buf.bitdepth,
                              [PlaneLayout(p.offset, p.pitch) for p in buf.planes])
    return [p.copy() for p in pic.planes]


@pytest.mark.parametrize("fmt, depth", [("yuv420p", 8), ("yuv422p", 10), ("yuv444p", 8), ("yuv400p", 10)])
def test_memfd_from_planes_is_sealed_and_reads_back_through_another_mapping(fmt, depth):
    w, h = 37, 21  # odd: ceil-size chroma in the buffer
    planes = _frame(w, h, fmt, depth)
    with memfd_buffer_from_planes(planes, fmt, depth, pitch_align=64) as buf:
        assert buf.kind == "memfd" and buf.size == os.fstat(buf.fds[0].fileno()).st_size
        seals = fcntl.fcntl(buf.fds[0].fileno(), F_GET_SEALS)
        assert seals & SEALS == SEALS and not seals & 0x8  # shrink|grow|seal, never F_SEAL_WRITE
        assert all(p.pitch % 64 == 0 and p.offset % 64 == 0 for p in buf.planes)
        want = picture_from_stored(planes, PixelFormat(fmt), depth).planes
        got = _daemon_view(buf)
        assert all(np.array_equal(a, b) for a, b in zip(want, got))
        with pytest.raises(OSError):  # sealed: cannot grow
            os.ftruncate(buf.fds[0].fileno(), buf.size + 4096)


def test_write_frame_refills_in_place_and_the_other_mapping_sees_it():
    a, b = _frame(16, 8, "yuv420p", 8, 1), _frame(16, 8, "yuv420p", 8, 2)
    with memfd_buffer(16, 8, "yuv420p", 8) as buf:
        inode = os.fstat(buf.fds[0].fileno()).st_ino
        buf.write_frame(a)
        first = _daemon_view(buf)
        buf.write_frame(b)
        second = _daemon_view(buf)
        assert os.fstat(buf.fds[0].fileno()).st_ino == inode
        assert np.array_equal(first[0], a[0]) and np.array_equal(second[0], b[0])
        assert not np.array_equal(first[0], second[0])


def test_explicit_offsets_and_pitches_are_used_and_checked():
    lay = plane_layout("yuv420p", 8, 4, 8, pitches=[16, 8, 8], offsets=[100, 0, 40])
    assert [(p.offset, p.pitch) for p in lay.planes] == [(100, 16), (0, 8), (40, 8)]
    assert lay.size == 100 + 16 * 4  # whole pitches, the last row's padding included
    with pytest.raises(LayoutError) as e:
        plane_layout("yuv420p", 8, 4, 8, pitches=[16, 2, 8])
    assert e.value.field == "planes[1].pitch"
    with pytest.raises(LayoutError) as e:
        plane_layout("yuv420p", 8, 4, 8, offsets=[0, 8, 60])  # chroma 1 inside luma
    assert e.value.field == "planes[1].offset"
    with pytest.raises(LayoutError) as e:
        plane_layout("yuv420p", 8, 4, 8, size=20)
    assert e.value.field.startswith("planes[") and "beyond" in e.value.message
    with pytest.raises(LayoutError) as e:
        memfd_buffer(0, 4)
    assert e.value.field == "width"
    with pytest.raises(LayoutError) as e:
        memfd_buffer(4, 4, "p010", 8)
    assert e.value.field == "bitdepth"


def test_write_frame_refuses_wrong_shapes_and_dtypes_naming_the_plane():
    with memfd_buffer(8, 4, "yuv420p", 10) as buf:
        good = _frame(8, 4, "yuv420p", 10)
        with pytest.raises(LayoutError) as e:
            buf.write_frame([good[0], good[1], good[2][:1]])
        assert e.value.field == "planes[2]"
        with pytest.raises(LayoutError) as e:
            buf.write_frame([good[0].astype(np.uint8), good[1], good[2]])
        assert e.value.field == "planes[0]"


@pytest.mark.parametrize("depth", [8, 10])
def test_semi_planar_layouts_convert_both_ways_and_the_daemon_reads_the_same_picture(depth):
    planar = _frame(10, 6, "yuv420p", depth, 3)
    semi, fmt = to_semi_planar(planar, depth)
    assert fmt is (PixelFormat.NV12 if depth == 8 else PixelFormat.P010)
    assert semi[1].shape == (3, 10)
    back = from_semi_planar(semi, fmt)
    assert all(np.array_equal(a, b) for a, b in zip(planar, back))
    info = VideoInfo(10, 6, PixelFormat.YUV420P, depth)
    with from_y4m_frame(planar, info, pixel_format=fmt.value, pitch_align=32) as buf:
        assert buf.pixel_format is fmt and len(buf.planes) == 2
        got = _daemon_view(buf)
        want = picture_from_stored(planar, PixelFormat.YUV420P, depth).planes
        assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_from_y4m_frame_refills_a_given_buffer():
    info = VideoInfo(8, 4, PixelFormat.YUV420P, 8)
    a, b = _frame(8, 4, "yuv420p", 8, 5), _frame(8, 4, "yuv420p", 8, 6)
    with from_y4m_frame(a, info) as buf:
        assert from_y4m_frame(b, info, buffer=buf) is buf
        assert np.array_equal(buf.read_planes()[0], b[0])
        with pytest.raises(LayoutError) as e:
            from_y4m_frame(a, VideoInfo(8, 6, PixelFormat.YUV420P, 8), buffer=buf)
        assert e.value.field == "buffer"


def test_wrap_dmabuf_borrows_by_default_and_takes_its_size_from_the_fd():
    with memfd_buffer(8, 4, "nv12") as backing:
        fd = backing.fds[0].fileno()
        buf = wrap_dmabuf(fd, 8, 4, "nv12", planes=[(0, 8), (32, 8)], flags=ALLOW_COPY)
        assert buf.kind == "dmabuf" and buf.size == backing.size and buf.bitdepth == 8
        msg = buf.register_message(7)
        assert msg.flags == 1 and msg.modifier == 0 and msg.fds == (fd,)
        buf.close()
        os.fstat(fd)  # borrowed: still open
        with pytest.raises(LayoutError) as e:
            wrap_dmabuf(fd, 8, 4, "nv12", planes=[(0, 8), (32, 8)], size=backing.size + 1)
        assert e.value.field == "size"
        with pytest.raises(LayoutError) as e:
            wrap_dmabuf(fd, 8, 4, "nv12", planes=[(0, 8), (40, 8)])
        assert e.value.field == "planes[1].offset"
    r, w = os.pipe()
    try:
        with pytest.raises(LayoutError) as e:
            wrap_dmabuf(r, 8, 4, "nv12", planes=[(0, 8), (32, 8)])
        assert e.value.field == "fd"
    finally:
        os.close(r)
        os.close(w)


def test_wrap_dmabuf_with_ownership_closes_the_fd_once():
    src = memfd_buffer(8, 4, "yuv400p")
    fd = os.dup(src.fds[0].fileno())
    src.close()
    buf = wrap_dmabuf(fd, 8, 4, "yuv400p", planes=[(0, 8)], take_ownership=True)
    buf.close()
    buf.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_fences_poll_like_sync_files_and_close_once():
    before = settled_fd_count()
    f = EventFdFence()
    assert f.kind == "eventfd" and not f.signalled()
    dup = os.dup(f.fileno())  # what the daemon receives: a duplicate sharing the counter
    f.signal()
    assert f.signalled() and f.signalled()  # polling does not consume
    os.close(dup)
    f.close()
    f.close()
    assert f.closed
    s = SyncFileFence(os.eventfd(0, os.EFD_CLOEXEC))
    assert s.kind == "sync_file"
    s.close()
    assert settled_fd_count() == before


def test_buffers_leave_no_fd_or_mapping_behind():
    before = settled_fd_count()
    bufs = [memfd_buffer(64, 32, "yuv420p", 10) for _ in range(5)]
    for b in bufs:
        b.write_frame(_frame(64, 32, "yuv420p", 10))
        b.close()
        b.close()
        assert b.closed
    assert settled_fd_count() == before
