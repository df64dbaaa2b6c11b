"""scripts/bench_gpu.py runs end to end on the emulated GPU lane (no GPU): a daemon, a producer
whose ring and frames in flight exceed one client's default limits (the script raises them), the
batch size the daemon chose by picture size, and a bad --batch refused on one line.  It measures
nothing here: the figures come from the device machine (docs/gpu-runs.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_gpu.py"


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "client")]))
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_daemon_benchmark_runs_on_the_emulated_lane_with_a_large_ring():
    pytest.importorskip("trio")
    p = _run("--lane", "emu", "--memfd", "--sizes", "32x32", "--models", "", "--features", "psnr",
             "--frames", "400", "--repeats", "1", "--inflight", "300", "--ring", "140")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    line = p.stdout.strip().splitlines()[-1]
    assert line.startswith("daemon emu psnr 32x32: ") and " fps " in line
    assert "(400 frames, batch 128, 300 in flight, submit_many, outcome runs)" in line  # auto: 128 for small pictures


def test_a_bad_batch_is_refused_on_one_line():
    p = _run("--batch", "lots")
    assert p.returncode == 2 and "--batch" in p.stderr and "Traceback" not in p.stderr


def test_a_run_the_daemon_ended_reports_the_daemons_error(tmp_path):
    """A producer whose connection the daemon closed after a fatal error gets EPIPE on its next send;
    the benchmark's failure line then quotes the error the daemon had sent (last_words)."""
    pytest.importorskip("trio")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_gpu
        from tests.daemon.rawclient import RawClient
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    sock = str(tmp_path / "d.sock")
    proc = bench_gpu.start_daemon("emu", "auto", sock)
    try:
        c = RawClient(sock, "bench")
        c.hello()
        c.send_raw(b"\xc1")  # not msgpack: a fatal E_PROTO, then the daemon stops reading and closes
        words = bench_gpu.last_words(c)
        assert "E_PROTO" in words and "Error(" in words, words
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
