"""``vmafxctl batch`` on this machine: results equal to ``vmafxctl score``, failures recorded, resume.

Every record's pooled scores are compared with a local ``vmafxctl score --json``
of the same pair (and its per-frame log with that score's log, fps aside).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from .conftest import ROOT, environ, local_score, read_results, vmafxctl, without_fps

VARIANTS = [((), ()), (("version=vmaf_v0.6.1", "version=vmaf_v0.6.1neg"), ("psnr",))]


def write_jobs(path, pairs, *, variants=VARIANTS):
    rows = []
    for k, (ref, dist) in enumerate(pairs):
        models, features = variants[k % len(variants)]
        row = {"reference": ref, "distorted": dist}
        if models:
            row["model"] = list(models)
        if features:
            row["feature"] = list(features)
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def check_against_local(tmp_path, records, rows):
    by_pair = {(r["reference"], r["distorted"], tuple(r.get("model", ())), tuple(r.get("feature", ()))): r
               for r in rows}
    for rec in records:
        key = (rec["reference"], rec["distorted"], tuple(rec["models"]), tuple(rec["features"]))
        assert key in by_pair
        assert rec["ok"] and rec["error"] is None and rec["frames"] == 4, rec
        pooled, log_text = local_score(tmp_path, *key)
        assert rec["scores"] == pooled
        with open(rec["log"]) as f:
            assert without_fps(f.read()) == without_fps(log_text)
        assert rec["elapsed_s"] > 0 and rec["started_at"].endswith("+00:00")


def test_a_batch_equals_local_scores_and_records_a_failure_without_stopping(tmp_path, tiny_pairs):
    jobs = tmp_path / "jobs.jsonl"
    rows = write_jobs(jobs, tiny_pairs[:5])
    with open(jobs, "a") as f:
        f.write(json.dumps({"id": "missing", "reference": tiny_pairs[0][0], "distorted": "nope.y4m"}) + "\n")
        f.write(json.dumps({"id": "badmodel", "reference": tiny_pairs[0][0], "distorted": tiny_pairs[0][1],
                            "model": "version=no_such_model"}) + "\n")
    r = vmafxctl("batch", jobs, "--lane", "cpu", "-j", "2")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("vmafxctl batch: 2 of 7 job(s) failed (")
    assert "7/7 jobs, 2 failed" in lines[-2] and "jobs/s, ETA" in lines[-2]  # not a tty: plain lines
    records = read_results(tmp_path / "jobs.results.jsonl")
    assert Counter(x["job_id"] for x in records) == Counter({x["job_id"]: 1 for x in records}) and len(records) == 7
    bad = {x["job_id"]: x for x in records if not x["ok"]}
    assert set(bad) == {"missing", "badmodel"}
    assert "nope.y4m" in bad["missing"]["error"] and "\n" not in bad["missing"]["error"]
    assert "no_such_model" in bad["badmodel"]["error"]
    assert all(b["log"] is None and b["scores"] == {} for b in bad.values())
    check_against_local(tmp_path, [x for x in records if x["ok"]], rows)
    assert sorted(p.name for p in (tmp_path / "jobs.results.logs").iterdir()) == sorted(
        f"{x['job_id']}.json" for x in records if x["ok"])


def test_resume_after_an_interrupted_run_redoes_nothing_done(tmp_path, tiny_pairs):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("reference,distorted\n" + "".join(f"{a},{b}\n" for a, b in tiny_pairs))
    out = tmp_path / "out.jsonl"
    trace = tmp_path / "trace"
    env = environ(VMAFX_BATCH_TRACE=trace)
    proc = subprocess.Popen([sys.executable, "-m", "vmafx.cli", "batch", str(jobs), "-o", str(out), "-j", "1",
                             "--lane", "cpu"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while (not out.exists() or len(out.read_text().splitlines()) < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; the results so far are in" in err and "--resume" in err
    first = {x["job_id"] for x in read_results(out)}
    assert 3 <= len(first) < len(tiny_pairs)
    ran_first = trace.read_text().split()
    r = vmafxctl("batch", jobs, "-o", out, "--resume", "-j", "2", "--lane", "cpu", env=env)
    assert r.returncode == 0, r.stderr
    ran_second = trace.read_text().split()[len(ran_first):]
    assert not set(ran_second) & first  # nothing done was done again
    assert Counter(ran_second) == Counter({j: 1 for j in ran_second})
    records = read_results(out)
    assert len(records) == len(tiny_pairs) == len({x["job_id"] for x in records})
    assert set(ran_second) == {x["job_id"] for x in records} - first
    assert f"{len(first)} already done" in r.stderr
    # everything done: a third run scores nothing and exits 0
    r = vmafxctl("batch", jobs, "-o", out, "--resume", env=env)
    assert r.returncode == 0 and trace.read_text().split()[len(ran_first) + len(ran_second):] == []


def test_usage_errors_exit_2_with_one_line(tmp_path, tiny_pairs):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"reference": tiny_pairs[0][0]}) + "\n")
    r = vmafxctl("batch", jobs)
    assert r.returncode == 2 and r.stderr == f"vmafxctl batch: {jobs}:1: distorted: is required\n"
    jobs.write_text(json.dumps({"reference": tiny_pairs[0][0], "distorted": tiny_pairs[0][1]}) + "\n")
    (tmp_path / "jobs.results.jsonl").write_text("")
    r = vmafxctl("batch", jobs)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "exists: add --resume" in r.stderr
    for bad in (["-j", "0"], ["--timeout", "-1"], ["--retry-failed"]):
        r = vmafxctl("batch", jobs, "--overwrite", *bad)
        assert r.returncode == 2, (bad, r.stderr)
    r = vmafxctl("batch", tmp_path / "absent.csv")
    assert r.returncode == 2 and "absent.csv: No such file" in r.stderr


def test_parquet_results_and_the_daemon_path_give_the_same_scores(tmp_path, tiny_pairs):
    pytest.importorskip("pyarrow")
    from vmafx.batch.results import read_records
    from vmafx.private_daemon import PrivateDaemon

    jobs = tmp_path / "jobs.jsonl"
    rows = write_jobs(jobs, tiny_pairs[:4])
    ref, dist = tiny_pairs[5]
    with open(jobs, "a") as f:  # an option the library path takes, and one it hands to vmafxctl score
        f.write(json.dumps({"id": "two", "reference": ref, "distorted": dist, "options": {"frames": 2}}) + "\n")
        f.write(json.dumps({"id": "flag", "reference": ref, "distorted": dist, "options": {"quiet": True}}) + "\n")
    with PrivateDaemon(lane="cpu") as sock:
        r = vmafxctl("batch", jobs, "-o", tmp_path / "d.parquet", "--socket", sock, "-q")
    assert r.returncode == 0 and r.stderr == ""
    records = {x["job_id"]: x for x in read_records(str(tmp_path / "d.parquet"))}
    assert len(records) == 6 and {x["lane"] for x in records.values()} == {"cpu"}
    two, flag = records.pop("two"), records.pop("flag")
    check_against_local(tmp_path, list(records.values()), rows)
    assert two["frames"] == 2 and two["options"] == {"frames": 2}
    log = tmp_path / "two.json"
    r = vmafxctl("score", "-r", ref, "-d", dist, "--frames", "2", "--in-process", "-q", "--json", "-o", log)
    assert r.returncode == 0 and two["scores"] == json.loads(log.read_text())["pooled_metrics"]
    assert flag["frames"] == 4 and flag["scores"] == local_score(tmp_path, ref, dist)[0]


def test_a_job_over_its_timeout_is_recorded_as_failed(tmp_path, tiny_pairs):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"id,reference,distorted\nslow,{tiny_pairs[0][0]},{tiny_pairs[0][1]}\n")
    r = vmafxctl("batch", jobs, "--lane", "cpu", "--timeout", "0.01", "-q")
    assert r.returncode == 1 and r.stderr.endswith("1 of 1 job(s) failed (slow); see the error field in "
                                                   f"{tmp_path / 'jobs.results.jsonl'}\n")
    (rec,) = read_results(tmp_path / "jobs.results.jsonl")
    assert rec["error"] == "timed out after 0.01 s" and not rec["ok"]


def test_progress_draws_a_bar_on_a_terminal_and_lines_elsewhere():
    import io

    from vmafx.batch.progress import Progress, format_eta

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    p = Progress(4, skipped=2, stream=tty)
    p.start()
    p.update(True)
    p.update(False)
    p.finish()
    text = tty.getvalue()
    assert "\r[############............] 2/4 jobs, 1 failed, 2 already done, " in text and text.endswith("\n")
    assert "\033[K" in text
    plain = io.StringIO()
    p = Progress(3, stream=plain, interval=3600)
    p.start()
    for _ in range(3):
        p.update(True)
    p.finish()
    lines = plain.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmafxctl batch: 3/3 jobs, ") and lines[0].endswith("ETA 00:00")
    assert format_eta(3725) == "1:02:05" and format_eta(65) == "01:05" and format_eta(None) == "--:--"
