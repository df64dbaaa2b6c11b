"""The command line: exit codes, the socket file, flags over the config file."""

import os
import socket
import stat
import subprocess
import sys
import tempfile

import pytest

from .conftest import ROOT, Daemon
from .rawclient import RawClient


def _run(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "vmafxd", *args], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout)


@pytest.mark.parametrize("lane", ["cuda", "hip"])
def test_a_lane_that_is_not_available_is_a_usage_error(lane):
    out = _run("--lane", lane, "--socket", "/tmp/never-made/x.sock")
    assert out.returncode == 2
    assert f"lane {lane} is not available:" in out.stderr
    assert not os.path.exists("/tmp/never-made")


def test_config_and_usage_errors_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits]\nmax_clientz = 3\n")
    out = _run("--config", str(bad))
    assert out.returncode == 2 and "limits.max_clientz: unknown limit" in out.stderr
    assert _run("--config", str(tmp_path / "missing.toml")).returncode == 2
    assert _run("--ready-fd", "917").returncode == 2
    assert _run("--cpu-workers", "zero").returncode == 2  # argparse


def test_socket_file_parent_mode_stale_and_busy(tmp_path):
    d = tempfile.mkdtemp(prefix="vxs", dir="/tmp")
    path = os.path.join(d, "run", "vmafx", "vmafxd.sock")  # parents are created
    os.makedirs(os.path.dirname(path))
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stale.bind(path)  # a dead daemon's socket file: nobody listens
    stale.close()
    cfg = tmp_path / "vmafxd.toml"
    cfg.write_text(f'socket = "{path}"\ncpu_workers = 1\nfence_timeout_ms = 111\n')
    daemon = Daemon("--config", str(cfg), socket_path=path)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
        c = RawClient(path)
        hello = c.hello()
        assert hello.limits["fence_timeout_ms"] == 300  # the flag (Daemon passes 300) beats the file
        assert len(hello.lanes[0]["devices"]) == 2  # --cpu-workers 2 (the flag) beats the file's 1
        c.close()
        busy = _run("--socket", path, "--lane", "cpu")
        assert busy.returncode == 1 and "another daemon is listening" in busy.stderr
        assert daemon.stop() == 0
        assert not os.path.exists(path)  # our socket file is removed on exit
    finally:
        daemon.close()
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def test_a_non_socket_in_the_way_is_not_removed(tmp_path):
    d = tempfile.mkdtemp(prefix="vxs", dir="/tmp")
    path = os.path.join(d, "vmafxd.sock")
    open(path, "w").close()
    try:
        out = _run("--socket", path, "--lane", "cpu")
        assert out.returncode == 1 and "is not a socket" in out.stderr
        assert os.path.isfile(path)
    finally:
        import shutil

        shutil.rmtree(d, ignore_errors=True)
