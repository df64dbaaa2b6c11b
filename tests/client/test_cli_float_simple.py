"""``vmafxctl score --feature float_psnr/float_ansnr/float_moment``: libvmaf's command line, libvmaf's log.

The per-frame values and their key order are libvmaf's own run of the same
command (tests/data/scores/float_simple_libvmaf.json, printed there at full
precision; the log prints them as libvmaf's ``%.6f``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from vmafx.io.scores import format_score

from ..features.float_simple_vectors import VECTORS
from .conftest import ROOT, pair


def test_in_process_log_is_libvmafs(tmp_path):
    p = pair("p13_astronaut_sharpen")
    case = next(c for c in VECTORS["cases"] if c["pair"] == p.id and not c["shift"])
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}", "VMAFX_SOCKET": "/nonexistent/vmafxd.sock"}
    log = tmp_path / "log.json"
    r = subprocess.run([sys.executable, "-m", "vmafx.cli", "score", "--in-process", "-r", str(p.ref_file), "-d",
                        str(p.dist_file), "--no_prediction", "--feature", "float_psnr", "--feature", "float_ansnr",
                        "--feature", "float_moment", "--json", "-o", str(log), "-q"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    frames = json.loads(log.read_text())["frames"]
    assert len(frames) == len(case["frames"]) == 3
    for got, want in zip(frames, case["frames"]):
        assert list(got["metrics"]) == list(want)  # libvmaf's key order
        assert got["metrics"] == {k: float(format_score(v)) for k, v in want.items()}
