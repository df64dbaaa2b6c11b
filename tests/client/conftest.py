"""Fixtures for the client tests: a real vmafxd (CPU lane) and the in-process numbers to compare with."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference import Pair, vendored_pairs
from vmafx.private_daemon import PrivateDaemon
from vmafx.transport import open_fd_count

ROOT = Path(__file__).resolve().parents[2]

needs_daemon = pytest.mark.skipif(importlib.util.find_spec("vmafxd.__main__") is None,
                                  reason="the daemon (python -m vmafxd) is not in this tree yet")


def pair(pair_id: str) -> Pair:
    return next(p for p in vendored_pairs() if p.id == pair_id)


@pytest.fixture(scope="module")
def daemon_socket():
    """One private CPU-lane daemon for a test module; it must stop cleanly (exit 0 on SIGTERM)."""
    if importlib.util.find_spec("vmafxd.__main__") is None:
        pytest.skip("the daemon (python -m vmafxd) is not in this tree yet")
    d = PrivateDaemon(lane="cpu")
    path = d.start()
    try:
        yield path
    finally:
        rc = d.stop()
        assert rc == 0, f"vmafxd exited {rc} on SIGTERM:\n{d.final_log}"


def expected(p: Pair, *, start: int = 0, count: int | None = None, models=(), features=()) -> dict:
    """The in-process scoring core's numbers for frames start..start+count of a pair, indexed from 0."""
    from vmafxd.offline import resolve_models
    from vmafxd.core.scoring import CpuScorer, ScoringPlan, parse_feature_spec

    # The protocol's default: no models and no features means vmaf_v0.6.1; features alone mean no model.
    model_sets = resolve_models(list(models)) if models or not features else []
    plan = ScoringPlan.build(model_sets, [parse_feature_spec(f) for f in features])
    refs, dists = p.pictures()
    end = None if count is None else start + count
    scorer = CpuScorer(plan, p.width, p.height, p.bitdepth)
    for i, (r, d) in enumerate(zip(refs[start:end], dists[start:end])):
        scorer.push(i, r, d)
    scorer.finish()
    return {"frames": [[i, m] for i, m in scorer.assembler.frames], "pooled": scorer.pooled()}


def run_producer(socket: str, p: Pair, out: Path, *, start=0, count=None, models=(), features=(),
                 api="async", pool=2) -> subprocess.Popen:
    """Start tests/client/producer.py as its own process."""
    cmd = [sys.executable, "-m", "tests.client.producer", "--socket", socket, "--ref", str(p.ref_file),
           "--dist", str(p.dist_file), "--start", str(start), "--api", api, "--pool", str(pool), "--out", str(out)]
    if count is not None:
        cmd += ["--count", str(count)]
    for m in models:
        cmd += ["--model", m]
    for f in features:
        cmd += ["--feature", f]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def load(out: Path) -> dict:
    return json.loads(out.read_text())


def assert_same_scores(got: dict, want: dict) -> None:
    """Every frame's metrics and every pooled value exactly equal (floats compared as doubles)."""
    assert [i for i, _ in got["frames"]] == [i for i, _ in want["frames"]]
    for (i, g), (_, w) in zip(got["frames"], want["frames"]):
        assert g == w, f"frame {i} differs"
    assert got["pooled"] == want["pooled"]


def settled_fd_count() -> int:
    """Open fds of this process once garbage from earlier tests (pipes of finished subprocesses,
    dropped sockets) has been collected -- so a before/after comparison sees only this test."""
    gc.collect()
    return open_fd_count()


def environ_without_daemon(tmp: Path) -> dict:
    env = dict(os.environ)
    env.pop("VMAFX_SOCKET", None)
    env["TMPDIR"] = str(tmp)
    return env
