"""Buffer layouts and CPU-lane imports: every refusal names its field (and, for seals, the seal)."""

import fcntl
import os

import numpy as np
import pytest

from vmafx.protocol import ErrorCode, Limits, Plane, RegisterBuffer, RemoteProtocolError
from vmafx.transport import OwnedFd, open_fd_count
from vmafxd.buffers import validate_layout
from vmafxd.lane_errors import lane_boundary
from vmafxd.lanes.cpu_import import import_host_buffer

W, H = 64, 36


def _msg(**kw):
    base = dict(seq=1, kind="memfd", width=W, height=H, pixel_format="yuv420p", bitdepth=8,
                size=W * H * 3 // 2, planes=(Plane(0, 0, W), Plane(0, W * H, W // 2), Plane(0, W * H * 5 // 4, W // 2)),
                fds=(3,))
    base.update(kw)
    return RegisterBuffer(**base)


@pytest.mark.parametrize("kw, code, field", [
    (dict(pixel_format="rgb24"), ErrorCode.E_INVAL, "pixel_format"),
    (dict(width=0), ErrorCode.E_INVAL, "width"),
    (dict(height=16385), ErrorCode.E_INVAL, "height"),
    (dict(pixel_format="nv12", bitdepth=10), ErrorCode.E_INVAL, "bitdepth"),
    (dict(bitdepth=12), ErrorCode.E_INVAL, "bitdepth"),
    (dict(planes=(Plane(0, 0, W),)), ErrorCode.E_INVAL, "planes"),
    (dict(planes=(Plane(0, 0, W - 1), Plane(0, W * H, W // 2), Plane(0, W * H * 5 // 4, W // 2))),
     ErrorCode.E_INVAL, "planes[0].pitch"),
    (dict(planes=(Plane(0, 0, W), Plane(0, W * H, W // 2), Plane(0, W * H * 5 // 4 + 1, W // 2))),
     ErrorCode.E_INVAL, "planes[2].offset"),
    (dict(size=(1 << 31) + 1), ErrorCode.E_INVAL, "size"),
])
def test_layout_refusals_name_the_field(kw, code, field):
    with pytest.raises(RemoteProtocolError) as e:
        validate_layout(_msg(**kw), Limits())
    assert (e.value.code, e.value.field) == (code, field)


def _memfd(size, seals=0x2 | 0x4, allow=True):
    fd = os.memfd_create("t", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if allow else 0))
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, 1033, seals)
    return OwnedFd(fd)


def _import(fd, **kw):
    """The import as the daemon makes it: the lane's refusals leave as protocol errors."""
    layout = validate_layout(_msg(**kw), Limits())
    with lane_boundary():
        return import_host_buffer(layout, {0: fd})


def test_unsealed_memfd_is_refused_naming_the_missing_seal():
    before = open_fd_count()
    for fd in (_memfd(W * H * 2, seals=0), _memfd(W * H * 2, seals=0, allow=False), _memfd(W * H * 2, seals=0x4)):
        with fd, pytest.raises(RemoteProtocolError) as e:
            _import(fd)
        assert e.value.code is ErrorCode.E_INVAL and e.value.field == "planes[0].fd"
        assert e.value.message.startswith(
            "memfd lacks F_SEAL_SHRINK: a client could shrink it under the daemon's mapping")
    assert open_fd_count() == before


def test_declared_size_larger_than_the_memfd_is_refused_naming_size():
    with _memfd(W * H) as fd, pytest.raises(RemoteProtocolError) as e:
        _import(fd)
    assert (e.value.code, e.value.field) == (ErrorCode.E_INVAL, "size")


def test_regular_files_pipes_and_sockets_are_refused(tmp_path):
    import socket
    r, w = os.pipe()
    s1, s2 = socket.socketpair()
    path = tmp_path / "f"
    path.write_bytes(b"\0" * (W * H * 2))
    cases = {"a regular file": os.open(path, os.O_RDONLY), "a pipe": r, "a socket": s1.detach()}
    try:
        for what, raw in cases.items():
            with OwnedFd(raw) as fd, pytest.raises(RemoteProtocolError) as e:
                _import(fd)
            assert e.value.code is ErrorCode.E_INVAL and e.value.field == "planes[0].fd"
            assert e.value.message.startswith(what), e.value.message
    finally:
        os.close(w)
        s2.close()


def test_kind_and_modifier_the_cpu_lane_cannot_read():
    with _memfd(W * H * 2) as fd:
        with pytest.raises(RemoteProtocolError) as e:
            _import(fd, modifier=0x0100000000000001)
        assert (e.value.code, e.value.field) == (ErrorCode.E_NOTSUP, "modifier")
        with pytest.raises(RemoteProtocolError) as e:
            _import(fd, kind="cuda_vmm")
        assert (e.value.code, e.value.field) == (ErrorCode.E_NOTSUP, "kind")
        with pytest.raises(RemoteProtocolError) as e:
            _import(fd, kind="dmabuf")  # a memfd declared as a dma-buf
        assert (e.value.code, e.value.field) == (ErrorCode.E_INVAL, "planes[0].fd")


def test_import_is_a_zero_copy_view_and_one_mapping_per_fd():
    size = W * H * 3 // 2
    fd = _memfd(size, seals=0)
    data = (np.arange(size) % 251).astype(np.uint8)
    os.pwrite(fd.fileno(), data.tobytes(), 0)
    fcntl.fcntl(fd.fileno(), 1033, 0x2)
    before = open_fd_count()
    imp = _import(fd)
    fd.close()
    assert imp.zero_copy and imp.copied_planes == 0
    assert open_fd_count() == before  # one mapping (its own fd) replaces the closed packet fd
    with imp.reading():
        pic = imp.picture()
        assert np.array_equal(pic.planes[0], data[: W * H].reshape(H, W))
        assert np.shares_memory(pic.planes[0], imp._mappings[0].array)  # a view, no copy
        del pic
    imp.close()
    imp.close()  # idempotent
    assert open_fd_count() == before - 1 and imp.view_leaks == 0


def test_odd_16bit_layout_is_counted_as_a_host_copy():
    w = W
    size = 1 + (w * 2) * H + (w) * (H // 2) * 2 + 16
    pl = (Plane(0, 1, w * 2), Plane(0, 1 + w * 2 * H, w), Plane(0, 1 + w * 2 * H + w * H // 2, w))
    with _memfd(size) as fd:
        imp = _import(fd, bitdepth=10, size=size, planes=pl)
    assert not imp.zero_copy and imp.copied_planes == 3
    imp.close()


# -- the dma-buf branch, with a memfd dressed up as a dma-buf (no real one can be made here) --


@pytest.fixture
def fake_dmabuf(monkeypatch):
    """inspect_fd says "dma-buf"; DMA_BUF_IOCTL_SYNC calls are recorded instead of issued."""
    from vmafxd.core import fdkinds
    from vmafxd.lanes import cpu_import

    real = fdkinds.inspect_fd

    def inspect(fd, field):
        info = real(fd, field)
        return fdkinds.FdInfo(fdkinds.FdKind.DMABUF, "/dmabuf:test", info.st_size, "test_exporter")

    syncs = []
    monkeypatch.setattr(cpu_import, "inspect_fd", inspect)
    monkeypatch.setattr(cpu_import, "dma_buf_sync", lambda fd, flags: syncs.append(flags))
    return syncs


def test_dmabuf_import_sizes_a_dup_and_brackets_reads(fake_dmabuf):
    from vmafxd.lanes.cpu_import import DMA_BUF_SYNC_END, DMA_BUF_SYNC_READ, DMA_BUF_SYNC_START

    size = W * H * 3 // 2
    fd = _memfd(size)
    before = open_fd_count()
    imp = _import(fd, kind="dmabuf")
    fd.close()  # the packet's fd goes; the import keeps its own dup (R3)
    dup_fds = imp.implicit_fence_fds()
    assert len(dup_fds) == 1 and os.fstat(dup_fds[0]).st_size == size
    with imp.reading():
        assert fake_dmabuf == [DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ]
        imp.picture()
    assert fake_dmabuf[-1] == DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ
    imp.close()
    assert open_fd_count() == before - 1


def test_dmabuf_real_size_comes_from_lseek(fake_dmabuf):
    fd = _memfd(W * H)  # smaller than declared
    with fd, pytest.raises(RemoteProtocolError) as e:
        _import(fd, kind="dmabuf")
    assert (e.value.code, e.value.field) == (ErrorCode.E_INVAL, "size")
    assert "has 2304" in e.value.message


def test_dmabuf_that_cannot_be_mapped_is_not_supported(fake_dmabuf, monkeypatch):
    from vmafxd.lanes import cpu_import

    def refuse(*a, **kw):
        raise OSError(524, "Unknown error 524")

    monkeypatch.setattr(cpu_import.mmap, "mmap", refuse)
    before = open_fd_count()
    with _memfd(W * H * 2) as fd, pytest.raises(RemoteProtocolError) as e:
        _import(fd, kind="dmabuf")
    assert (e.value.code, e.value.field) == (ErrorCode.E_NOTSUP, "planes[0].fd")
    assert "errno 524" in e.value.message and "test_exporter" in e.value.message
    assert open_fd_count() == before  # the dup was closed
