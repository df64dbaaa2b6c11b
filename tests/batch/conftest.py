"""Fixtures for the batch tests: tiny clip pairs, vmafxctl runs, local scores to compare with."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
import sys
from pathlib import Path

import pytest

from vmafx.batch.ray_runner import LOOPBACK_ENV

from .clips import make_pairs

# Ray reads these when it is imported (ray_constants), so they are set before any test module
# imports it: with them, "127.0.0.1" stays 127.0.0.1 instead of becoming this machine's network
# address -- every Ray process of these tests binds and talks on loopback only.
os.environ.update(LOOPBACK_ENV)

ROOT = Path(__file__).resolve().parents[2]


def environ(**extra) -> dict:
    """The test process's environment with the repo importable (Ray workers and subprocesses need it)."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "client")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("VMAFX_SOCKET", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def vmafxctl(*args, env=None, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmafx.cli", *map(str, args)], cwd=cwd or ROOT,
                          env=env or environ(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory):
    """12 distinct 128x72 4-frame pairs."""
    return make_pairs(tmp_path_factory.mktemp("clips"), 12)


_local_cache: dict = {}


def local_score(tmp: Path, ref: str, dist: str, models=(), features=()) -> tuple[dict, str]:
    """``vmafxctl score --json -o LOG`` of one pair on the cpu lane: (pooled_metrics, log text)."""
    key = (ref, dist, tuple(models), tuple(features))
    if key not in _local_cache:
        log = tmp / f"local-{uuid.uuid4().hex}.json"  # callers run in threads: one file each
        args = ["score", "-r", ref, "-d", dist, "--lane", "cpu", "--in-process", "-q", "--json", "-o", log]
        for m in models:
            args += ["-m", m]
        for f in features:
            args += ["--feature", f]
        r = vmafxctl(*args)
        assert r.returncode == 0, r.stderr
        text = log.read_text()
        _local_cache[key] = (json.loads(text)["pooled_metrics"], text)
    return _local_cache[key]


def read_results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def without_fps(text: str) -> str:
    import re

    return re.sub(r'"fps": ([0-9.]+|null)', '"fps": FPS', text)
