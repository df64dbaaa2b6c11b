"""vmafxctl: score through a daemon (given, or private), status and sessions, exit codes.

Every daemon-backed score is compared with ``vmafxctl score --in-process``, the
scoring core run in the same process -- the printed means and the whole
per-frame log in each of libvmaf's layouts (only the fps figure may differ).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vmafx.status_text import format_sessions, format_status

from .conftest import ROOT, environ_without_daemon, needs_daemon, pair

P16 = pair("p16_chelsea641x361_x264crf35")  # odd size, 6 frames
# no -q: with -o it would silence the score lines, as libvmaf's -q does (the progress meter
# shows only on a terminal anyway)
SCORE = ["score", "-r", str(P16.ref_file), "-d", str(P16.dist_file), "--lane", "cpu"]


def vmafxctl(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmafx.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _without_fps(text: str) -> str:
    return re.sub(r'("fps": |fps=")[0-9.]+|null', "FPS", text)


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The reference: --in-process output and logs in all four layouts."""
    d = tmp_path_factory.mktemp("inproc")
    out = {}
    for fmt in ("json", "xml", "csv", "sub"):
        r = vmafxctl(*SCORE, "--in-process", "-m", "version=vmaf_v0.6.1", "-m", "version=vmaf_b_v0.6.3",
                     "--feature", "psnr", f"--{fmt}", "-o", str(d / f"log.{fmt}"))
        assert r.returncode == 0, r.stderr
        out[fmt] = (d / f"log.{fmt}").read_text()
        out["stdout"] = r.stdout
    return out


@pytest.fixture(scope="module")
def hand_started(tmp_path_factory):
    """``vmafxd --socket PATH --lane cpu`` as an operator starts it (no ready fd: poll the socket)."""
    if importlib.util.find_spec("vmafxd.__main__") is None:
        pytest.skip("the daemon (python -m vmafxd) is not in this tree yet")
    d = tmp_path_factory.mktemp("daemon")
    path = str(d / "vmafxd.sock")
    log = open(d / "vmafxd.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "vmafxd", "--socket", path, "--lane", "cpu"], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.connect(path)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail(f"vmafxd did not start:\n{(d / 'vmafxd.log').read_text()}")
            time.sleep(0.05)
    yield proc, path
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    log.close()


@needs_daemon
@pytest.mark.parametrize("fmt", ["json", "xml", "csv", "sub"])
def test_score_through_a_hand_started_daemon_equals_in_process(hand_started, in_process, tmp_path, fmt):
    _, path = hand_started
    r = vmafxctl(*SCORE, "--socket", path, "-m", "version=vmaf_v0.6.1", "-m", "version=vmaf_b_v0.6.3",
                 "--feature", "psnr", f"--{fmt}", "-o", str(tmp_path / f"log.{fmt}"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == in_process["stdout"]
    assert re.match(r"vmaf_v0\.6\.1: \d+\.\d{6}\nvmaf_b_v0\.6\.3: \d+\.\d{6} \(bagging", r.stdout)
    assert _without_fps((tmp_path / f"log.{fmt}").read_text()) == _without_fps(in_process[fmt])


def test_score_finds_the_daemon_through_its_config_file_and_verbose_says_so(hand_started, in_process, tmp_path):
    _, path = hand_started
    cfg = tmp_path / "vmafxd.toml"
    cfg.write_text(f'socket = "{path}"\n')
    env = {**os.environ, "VMAFX_CONFIG": str(cfg)}
    env.pop("VMAFX_SOCKET", None)
    r = vmafxctl(*SCORE, "--verbose", "-m", "version=vmaf_v0.6.1", "-m", "version=vmaf_b_v0.6.3",
                 "--feature", "psnr", env=env)
    assert r.returncode == 0, r.stderr
    assert f"scored by the daemon at {path} (socket in {cfg})" in r.stderr
    assert r.stdout == in_process["stdout"]
    env["VMAFX_CONFIG"] = str(tmp_path / "none.toml")
    r = vmafxctl(*SCORE, "--verbose", env=env)
    assert r.returncode == 0 and "scored in this process" in r.stderr


@needs_daemon
def test_status_and_sessions_count_what_was_scored_and_sigterm_exits_0(hand_started, in_process, tmp_path):
    proc, path = hand_started
    before = json.loads(vmafxctl("status", "--socket", path, "--json").stdout)
    r = vmafxctl(*SCORE, "--socket", path)  # the default model: 6 more frames
    assert r.returncode == 0, r.stderr
    st = vmafxctl("status", "--socket", path, "--json")
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["frames_scored"] - before["frames_scored"] == P16.frames
    assert status["frames_failed"] == 0 and status["sessions"] == 0 and status["buffers"] == 0
    assert status["clients"] == 1  # the status query itself
    assert status["pending_releases"] == 0 and status["host_copies"] == 0
    assert status["lanes"][0]["lane"] == "cpu" and status["lanes"][0]["devices"]
    human = vmafxctl("status", "--socket", path)
    assert human.returncode == 0
    assert re.search(rf"^frames scored:\s+{status['frames_scored']}$", human.stdout, re.M)
    assert re.search(r"^lanes:\n  cpu  0: ", human.stdout, re.M)
    s = vmafxctl("sessions", "--socket", path, "--json")
    assert s.returncode == 0 and json.loads(s.stdout) == []
    assert vmafxctl("sessions", "--socket", path).stdout == "no open sessions\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path)


def _processes_mentioning(text: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out.append(int(pid))
    return out


@needs_daemon
def test_score_private_starts_and_stops_a_private_one(in_process, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = environ_without_daemon(tmp)
    env["VMAFX_SOCKET"] = str(tmp_path / "nobody-listens.sock")  # does not answer: --private starts one
    proc = subprocess.Popen([sys.executable, "-m", "vmafx.cli", *SCORE, "--private", "-m", "version=vmaf_v0.6.1", "-m",
                             "version=vmaf_b_v0.6.3", "--feature", "psnr"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_daemon, seen_socket = set(), False
    while proc.poll() is None:
        seen_daemon.update(_processes_mentioning(f"{tmp}/vmafxd-private-"))
        seen_socket |= any(p.exists() for p in tmp.glob("vmafxd-private-*/vmafxd.sock"))
        time.sleep(0.01)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    assert stdout == in_process["stdout"]
    assert seen_daemon and seen_socket  # a private daemon served the run...
    assert list(tmp.iterdir()) == []  # ...and left no directory or socket behind
    assert _processes_mentioning(f"{tmp}/vmafxd-private-") == []
    assert all(not Path(f"/proc/{pid}").exists() for pid in seen_daemon)


def test_in_process_needs_no_daemon(in_process):
    assert in_process["stdout"].startswith("vmaf_v0.6.1: ")


@pytest.mark.parametrize("args, code, says", [
    (["score", "-r", "x.y4m"], 2, "required"),
    (["status", "--bogus"], 2, "unrecognized"),
    (["score", "-r", "a", "-d", "b", "--in-process", "--lane", "cuda"], 1, "a: no such file"),  # inputs first
    (["score", "-r", str(P16.ref_file), "-d", str(P16.dist_file), "--socket", "/nonexistent/vmafxd.sock"], 69,
     "no daemon answers at /nonexistent/vmafxd.sock"),
    (["status", "--socket", "/nonexistent/vmafxd.sock"], 1, "cannot connect to /nonexistent/vmafxd.sock"),
    (["sessions", "--socket", "/nonexistent/vmafxd.sock", "--json"], 1, "cannot connect"),
])
def test_exit_codes(args, code, says):
    r = vmafxctl(*args)
    assert r.returncode == code, r.stderr
    assert says in r.stderr


def test_status_text_shows_known_fields_first_and_unknown_ones_too():
    status = {"frames_scored": 7, "version": "9.9", "clients": 2, "host_copies": 3, "pending_releases": 1,
              "uptime_s": 3725.0, "new_field": "x", "stopping": False,
              "lanes": [{"lane": "cuda", "devices": [{"device": 0, "name": "NVIDIA H200"}]}]}
    text = format_status(status)
    lines = text.splitlines()
    assert lines[0].startswith("version:") and lines[0].endswith("9.9")
    assert "uptime:           01:02:05" in lines
    assert "stopping:         no" in lines
    assert lines.index("frames scored:    7") < lines.index("new field:        x")
    assert lines[-2:] == ["lanes:", "  cuda  0: NVIDIA H200"]
    rows = format_sessions([{"session": 3, "client": "obs", "lane": "cpu", "scored": 10},
                            {"session": 12, "client": "x", "lane": "cuda", "scored": 2}]).splitlines()
    assert rows[0].split() == ["session", "client", "lane", "scored"]
    assert rows[2].split() == ["12", "x", "cuda", "2"]
