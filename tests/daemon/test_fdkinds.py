"""What a received fd really is (real fds here; dma-buf/sync_file names as the kernel writes them)."""

import fcntl
import os
import socket
import stat

import pytest

from vmafx.field_error import FieldError
from vmafx.protocol import ErrorCode
from vmafxd.core.fdkinds import F_SEAL_GROW, F_SEAL_SHRINK, FdKind, classify, inspect_fd, seal_names
from vmafxd.lane_errors import protocol_code, protocol_error
from vmafxd.lanes.cpu_import import DMA_BUF_IOCTL_SYNC


def test_real_fds(tmp_path):
    made = []
    try:
        m = os.memfd_create("frame", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        e = os.eventfd(0)
        r, w = os.pipe()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        f = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
        d = os.open(tmp_path, os.O_RDONLY)
        n = os.open("/dev/null", os.O_RDONLY)
        made = [m, e, r, w, f, d, n]
        expect = {m: FdKind.MEMFD, e: FdKind.EVENTFD, r: FdKind.PIPE, s.fileno(): FdKind.SOCKET,
                  f: FdKind.REGULAR_FILE, d: FdKind.DIRECTORY, n: FdKind.CHAR_DEVICE}
        for fd, kind in expect.items():
            assert inspect_fd(fd, "x").kind is kind, fd
        s.close()
    finally:
        for fd in made:
            os.close(fd)


def test_names_the_kernel_gives_dmabufs_and_sync_files():
    reg = stat.S_IFREG | 0o600
    assert classify(reg, "/dmabuf:nv_dmabuf") is FdKind.DMABUF
    assert classify(0o600, "anon_inode:dmabuf") is FdKind.DMABUF
    assert classify(reg, "/weird", "pos:\t0\nexp_name:\tnv_dmabuf\n") is FdKind.DMABUF
    assert classify(0o600, "anon_inode:sync_file") is FdKind.SYNC_FILE
    assert classify(reg, "anon_inode:[eventfd]") is FdKind.EVENTFD
    assert classify(0o600, "anon_inode:[timerfd]") is FdKind.ANON_INODE
    # a /memfd: name that cannot carry seals is not trusted as a memfd
    assert classify(reg, "/memfd:x (deleted)", sealable=False) is FdKind.REGULAR_FILE
    assert classify(reg, "/memfd:x (deleted)", sealable=True) is FdKind.MEMFD


def test_a_closed_fd_is_refused_naming_the_field():
    fd = os.eventfd(0)
    os.close(fd)
    with pytest.raises(FieldError) as e:
        inspect_fd(fd, "planes[2].fd")
    assert e.value.field == "planes[2].fd" and e.value.reason == "cannot inspect the fd: Bad file descriptor"
    # the daemon answers it E_INVAL, naming the field
    assert (protocol_code(e.value), protocol_error(e.value).field) == (ErrorCode.E_INVAL, "planes[2].fd")


def test_seal_names_and_dma_buf_ioctl_number():
    assert seal_names(F_SEAL_SHRINK | F_SEAL_GROW) == "F_SEAL_SHRINK|F_SEAL_GROW"
    assert seal_names(0) == "no seals"
    # <linux/dma-buf.h>: _IOW('b', 0, struct dma_buf_sync) with an 8-byte struct
    assert DMA_BUF_IOCTL_SYNC == 0x40086200
    m = os.memfd_create("s", os.MFD_ALLOW_SEALING)
    try:
        fcntl.fcntl(m, 1033, F_SEAL_SHRINK)
        assert inspect_fd(m, "x").kind is FdKind.MEMFD
    finally:
        os.close(m)
