"""``vmafxctl batch --ray`` on a Ray cluster of three simulated nodes on this machine.

Loopback only: every Ray process binds and talks on 127.0.0.1 (the head and
every added node get ``node_ip_address="127.0.0.1"``, the dashboard is off,
usage stats are off); a test asserts it.  Nodes have one CPU and one fake
GPU each; the jobs run on the CPU lane.  Deselect with ``-m "not ray"``.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from .conftest import ROOT, environ, local_score, read_results  # sets the loopback environment first

ray = pytest.importorskip("ray")

from vmafx.batch.jobs import load_jobs  # noqa: E402
from vmafx.batch.ray_runner import LOOPBACK_ENV, RayBackend  # noqa: E402
from vmafx.batch.results import ResultsFile  # noqa: E402
from vmafx.batch.scheduler import run_batch  # noqa: E402

from .test_batch_local import VARIANTS  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NODE_ARGS = dict(node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=1, num_gpus=1,
                 object_store_memory=100 * 1024 * 1024)
MORE_VARIANTS = VARIANTS + [(("version=vmaf_v0.6.1neg",), ()), ((), ("psnr",)), (("version=vmaf_b_v0.6.3",), ())]


def _emulated_gpu_daemon():
    """A vmafxd whose only lane is the emulated GPU lane (the kernels compiled for the CPU), or None."""
    from vmafx.private_daemon import PrivateDaemon, PrivateDaemonError

    d = PrivateDaemon(lane="emu")
    try:
        d.start()
    except PrivateDaemonError:
        return None  # no C++ compiler: the test that needs it skips
    return d


@pytest.fixture(scope="module")
def cluster():
    """Head + 2 nodes, all on 127.0.0.1; the repo importable by their workers.

    The nodes' environment names an emulated-GPU daemon as the host's vmafxd
    (``VMAFX_SOCKET``), as systemd's socket would be on a GPU host: ``--lane cpu``
    batches ignore it, ``--lane auto`` ones score through it.
    """
    from ray.cluster_utils import Cluster

    saved = dict(os.environ)
    daemon = _emulated_gpu_daemon()
    os.environ.update(environ(**LOOPBACK_ENV))  # the nodes' processes inherit this environment
    if daemon is not None:
        os.environ["VMAFX_SOCKET"] = daemon.socket_path
    c = Cluster(initialize_head=True, head_node_args=NODE_ARGS)
    try:
        for _ in range(2):
            c.add_node(**NODE_ARGS)
        c.wait_for_nodes()
        c.gpu_daemon = daemon
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        if daemon is not None:
            daemon.stop()
        os.environ.clear()
        os.environ.update(saved)


def write_job_list(path, pairs, count):
    rows = []
    for k in range(count):
        ref, dist = pairs[k % len(pairs)]
        models, features = MORE_VARIANTS[(k // len(pairs)) % len(MORE_VARIANTS)]
        rows.append({"reference": ref, "distorted": dist, "model": list(models), "feature": list(features)})
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len({(r["reference"], tuple(r["model"]), tuple(r["feature"])) for r in rows}) == count


def assert_equal_to_local(tmp_path, records):
    with cf.ThreadPoolExecutor(2) as pool:  # the local scores, two at once
        wants = list(pool.map(lambda r: local_score(tmp_path, r["reference"], r["distorted"], r["models"],
                                                    r["features"])[0], records))
    for rec, want in zip(records, wants):
        assert rec["ok"] and rec["error"] is None, rec
        assert rec["scores"] == want, rec["job_id"]


def driver(jobs, out, trace, *extra, address):
    env = environ(VMAFX_BATCH_TRACE=trace, **LOOPBACK_ENV)
    return subprocess.Popen([sys.executable, "-m", "vmafx.cli", "batch", str(jobs), "-o", str(out), "--lane", "cpu",
                             "--ray", address, *extra], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


def wait_for_records(out, n, proc, limit=120):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    pytest.fail(f"fewer than {n} records in {limit} s (driver exit {proc.poll()})")


def test_every_node_is_on_loopback_and_one_actor_a_node_scores(cluster, tmp_path, tiny_pairs):
    ray.init(address=cluster.address, logging_level="WARNING")
    try:
        nodes = ray.nodes()
        assert len(nodes) == 3 and all(n["Alive"] for n in nodes)
        assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
        assert cluster.address.startswith("127.0.0.1:")
        assert ray.util.get_node_ip_address() == "127.0.0.1"  # this driver too
        jobs = tmp_path / "jobs.jsonl"
        write_job_list(jobs, tiny_pairs[:6], 6)
        backend = RayBackend(None, str(tmp_path / "logs"), lane="cpu")
        with ResultsFile(str(tmp_path / "out.jsonl")) as results:
            summary = run_batch(load_jobs(str(jobs)), backend, results, progress=False)
        infos = backend.actor_infos()
        backend.close()
        assert summary.scored == 6 and summary.failed == 0
        assert len(infos) == 3 and {i["ip"] for i in infos} == {"127.0.0.1"}
        assert {i["node_id"] for i in infos} == {n["NodeID"] for n in nodes}
        assert {(i["kind"], i["lane"], i["concurrency"]) for i in infos} == {("subprocess", "cpu", 1)}
        records = read_results(tmp_path / "out.jsonl")
        assert_equal_to_local(tmp_path, records)
    finally:
        ray.shutdown()


def test_a_node_killed_mid_run_loses_no_job_and_scores_none_twice(cluster, tmp_path, tiny_pairs):
    jobs, out, trace = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl", tmp_path / "trace"
    write_job_list(jobs, tiny_pairs, 60)
    t0 = time.monotonic()
    proc = driver(jobs, out, trace, address=cluster.address)
    wait_for_records(out, 15, proc)
    victim = cluster.list_all_nodes()[-1]
    cluster.remove_node(victim)
    killed_at = len(out.read_text().splitlines())
    _, err = proc.communicate(timeout=240)
    took = time.monotonic() - t0
    print(f"\n--- driver stderr (node killed after {killed_at} records; {took:.1f} s) ---\n{err}")
    assert proc.returncode == 0, err
    records = read_results(out)
    ids = [r["job_id"] for r in records]
    assert len(ids) == 60 and len(set(ids)) == 60  # every job, exactly one result
    lost = re.search(r"lost the actor on node \w+ \(\w+\); (\d+) job\(s\) go elsewhere", err)
    assert lost and int(lost.group(1)) >= 1  # the kill hit jobs in flight (running or queued there)
    ran = Counter(trace.read_text().split())
    assert set(ran) == set(ids)
    again = {j for j, n in ran.items() if n > 1}  # started on the dead node, then elsewhere
    assert all(r["attempt"] == 2 for r in records if r["job_id"] in again)
    assert sum(r["attempt"] == 2 for r in records) == int(lost.group(1))
    print(f"jobs scored twice (their first node died): {len(again)}; nodes in results: "
          f"{dict(Counter(r['node'].split('/')[1] for r in records))}")
    assert_equal_to_local(tmp_path, records)
    # the surviving nodes took the rest
    ray.init(address=cluster.address, logging_level="WARNING")
    try:
        alive = {n["NodeID"][:8] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()
    late = [r for r in records if r["attempt"] == 2]
    assert late and all(r["node"].split("/")[1] in alive for r in late)


def test_resume_after_an_interrupted_ray_run_redoes_nothing_done(cluster, tmp_path, tiny_pairs):
    jobs, out, trace = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl", tmp_path / "trace"
    write_job_list(jobs, tiny_pairs, 24)
    proc = driver(jobs, out, trace, address=cluster.address)
    wait_for_records(out, 6, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = {r["job_id"] for r in read_results(out)}
    assert 6 <= len(first) < 24
    ran_first = len(trace.read_text().split())
    proc = driver(jobs, out, trace, "--resume", address=cluster.address)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    ran_second = trace.read_text().split()[ran_first:]
    assert not set(ran_second) & first
    records = read_results(out)
    assert len(records) == 24 == len({r["job_id"] for r in records})
    assert set(ran_second) == {r["job_id"] for r in records} - first


def test_actors_score_through_the_hosts_gpu_daemon(cluster, tmp_path, tiny_pairs):
    if cluster.gpu_daemon is None:
        pytest.skip("the emulated GPU lane needs a C++ compiler (g++)")
    jobs, out, trace = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl", tmp_path / "trace"
    write_job_list(jobs, tiny_pairs[:6], 6)
    env = environ(VMAFX_BATCH_TRACE=trace, **LOOPBACK_ENV)
    r = subprocess.run([sys.executable, "-m", "vmafx.cli", "batch", str(jobs), "-o", str(out), "--ray",
                        cluster.address, "-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    records = read_results(out)
    assert len(records) == 6 and {rec["lane"] for rec in records} == {"emu"}  # the daemon's lane, not cpu
    assert_equal_to_local(tmp_path, records)  # the emulated GPU lane is exact: equal to the cpu lane


def test_a_node_that_joins_mid_run_gets_an_actor_and_jobs(cluster, tmp_path, tiny_pairs):
    jobs, out, trace = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl", tmp_path / "trace"
    write_job_list(jobs, tiny_pairs, 48)
    proc = driver(jobs, out, trace, address=cluster.address)
    wait_for_records(out, 4, proc)
    node = cluster.add_node(**NODE_ARGS)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    records = read_results(out)
    assert len(records) == 48 == len({r["job_id"] for r in records})
    assert node.node_id[:8] in {r["node"].split("/")[1] for r in records}, err
