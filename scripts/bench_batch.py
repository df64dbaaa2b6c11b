#!/usr/bin/env python3
"""Jobs/s of ``vmafxctl batch``: locally, and on Ray with 1, 2, 3 nodes; Ray's overhead per job.

On one machine (CPU lane, small clips, simulated nodes of one CPU each)::

    PYTHONPATH=.:client python scripts/bench_batch.py --nodes 1,2,3 --repeat 3

On a GPU host with one real Ray node and a daemon (the one at $VMAFX_SOCKET or
the system socket, else a private one the script starts for both runs)::

    python scripts/bench_batch.py --lane cuda --real-node --nodes '' --local-jobs 0 \
        --size 1920x1080 --frames 240 --count 16

Every Ray process binds to 127.0.0.1 (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 is set
before ray is imported, node_ip_address=127.0.0.1, no dashboard).  Timing
starts once every actor has answered (cluster start-up is reported apart) and
ends with the last result.  Ray's overhead per job: the extra wall time per
job slot against the local run with as many jobs at once,
``(wall_ray - wall_local) * concurrency / jobs``, as a share of a job's mean
scoring time (``elapsed_s`` of the records).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

from vmafx.batch.ray_runner import LOOPBACK_ENV  # noqa: E402

os.environ.update(LOOPBACK_ENV)  # before ray is imported: keeps 127.0.0.1 from becoming the network address
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "client")] +
                                           ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))

from vmafx.batch.jobs import Job, job_id  # noqa: E402
from vmafx.batch.results import ResultsFile  # noqa: E402
from vmafx.batch.scheduler import LocalBackend, run_batch  # noqa: E402
from vmafx.batch.scorers import make_scorer  # noqa: E402

NODE_ARGS = dict(node_ip_address="127.0.0.1", include_dashboard=False, object_store_memory=100 * 1024 * 1024)


def make_big_pair(out: Path, width: int, height: int, frames: int) -> tuple[str, str]:
    """A pair larger than the vendored clips: their frames tiled over the size, looped to length."""
    import numpy as np

    from vmafx.io.video import open_video
    from vmafx.io.y4m_writer import write_y4m

    sys.path.insert(0, str(ROOT))
    from tests.batch.clips import DATA, SOURCES

    paths = []
    for role, src in zip(("ref", "dist"), SOURCES):
        p = out / f"{role}_{width}x{height}_{frames}.y4m"
        paths.append(str(p))
        if p.exists():
            continue
        with open_video(DATA / src) as r:
            info, clip = r.info, list(r)

        def tiled(planes):
            outp = []
            for k, pl in enumerate(planes):
                w, h = (width, height) if k == 0 else ((width + 1) // 2, (height + 1) // 2)
                reps = (-(-h // pl.shape[0]), -(-w // pl.shape[1]))
                outp.append(np.ascontiguousarray(np.tile(pl, reps)[:h, :w]))
            return outp

        write_y4m(p, replace(info, width=width, height=height), (tiled(clip[i % len(clip)]) for i in range(frames)))
    return paths[0], paths[1]


def job_list(args, work: Path) -> list[Job]:
    w, h = map(int, args.size.split("x"))
    if w <= 576 and h <= 324:
        from tests.batch.clips import make_pairs

        pairs = make_pairs(work / "clips", min(args.count, 16), width=w, height=h, frames=args.frames)
    else:
        pairs = [make_big_pair(work, w, h, args.frames)]
    jobs = []
    for k in range(args.count):
        ref, dist = pairs[k % len(pairs)]
        jid = f"bench{k:04d}-" + job_id(ref, dist, (), (), {})[:8]
        jobs.append(Job(jid, ref, dist, tuple(args.model)))
    return jobs


def timed_run(jobs, backend, work: Path, tag: str) -> tuple[float, list[dict]]:
    out = work / f"{tag}.jsonl"
    with ResultsFile(str(out), overwrite=True) as results:
        t0 = time.perf_counter()
        summary = run_batch(jobs, backend, results, progress=False)
        wall = time.perf_counter() - t0
        records = list(results)
    if summary.failed:
        bad = next(r for r in records if r.get("error"))
        raise SystemExit(f"bench_batch: {tag}: {summary.failed} job(s) failed, e.g. {bad['error']}")
    return wall, records


def wait_for_actors(backend, n: int, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while len(backend.actor_infos()) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_batch: only {len(backend.actor_infos())} of {n} actors started in {limit:.0f} s")
        backend.poll(0.2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lane", default="cpu", choices=("cpu", "cuda", "hip", "auto"))
    ap.add_argument("--socket", help="the daemon for --lane cuda/hip (default: as vmafxctl finds it, else private)")
    ap.add_argument("--size", default="128x72", help="WxH of the clips (default 128x72)")
    ap.add_argument("--frames", type=int, default=4, help="frames a clip (default 4)")
    ap.add_argument("--count", type=int, default=24, help="jobs a run (default 24)")
    ap.add_argument("--model", action="append", default=[], help="model spec (default vmaf_v0.6.1)")
    ap.add_argument("--local-jobs", default="",
                    help="extra local runs with these jobs at once, 0 for the scorer's default (every Ray run "
                         "is paired with a local run of as many jobs at once anyway)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, alternating local and Ray (medians)")
    ap.add_argument("--nodes", default="1,2,3", help="simulated Ray nodes of one CPU each (default 1,2,3; '' none)")
    ap.add_argument("--real-node", action="store_true", help="also one real Ray node (this machine, all its CPUs/GPUs)")
    ap.add_argument("--ray-jobs", type=int, help="jobs at once on each Ray node (default: the scorer's own)")
    ap.add_argument("--work", help="folder for clips and results (default: a temporary one)")
    args = ap.parse_args()

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-batch-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    jobs = job_list(args, work)
    print(f"# {args.count} jobs of {args.size}, {args.frames} frames, lane {args.lane} "
          f"(clips made in {time.perf_counter() - t:.1f} s)", flush=True)
    private = None
    if args.lane in ("cuda", "hip") and not args.socket:
        setup = make_scorer(args.lane)
        private = setup.daemon
        args.socket = setup.scorer.socket_path
    if args.socket:
        os.environ["VMAFX_SOCKET"] = args.socket  # the Ray node started below inherits it: one daemon for all
    rows = []
    try:
        for c in [int(x) for x in args.local_jobs.split(",") if x]:
            wall, job_s, c = local_run(args, jobs, work, c)
            rows.append(("local", "-", c, wall, job_s, None, None))
        runs = [("sim", int(n)) for n in args.nodes.split(",") if n] + ([("real", 1)] if args.real_node else [])
        for kind, n in runs:
            rows += ray_and_local(args, jobs, work, kind, n)
    finally:
        if private is not None:
            private.stop()
    print()
    print(f"medians of {args.repeat}; overhead/job = (wall_ray - wall_local) x jobs at once / jobs")
    print("| run | nodes | jobs at once | wall s | jobs/s | mean job s | Ray start s | overhead/job s | share of a job |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, nodes, c, wall, job_s, start, base in rows:
        ov = share = ""
        if base is not None:
            per_job = (wall - base[0]) * c / args.count
            ov, share = f"{per_job:+.3f}", f"{100 * per_job / base[1]:+.1f} %"
        print(f"| {name} | {nodes} | {c} | {wall:.2f} | {args.count / wall:.2f} | {job_s:.3f} | "
              f"{'' if start is None else f'{start:.1f}'} | {ov} | {share} |", flush=True)
    return 0


def local_run(args, jobs, work: Path, c: int) -> tuple[float, float, int]:
    setup = make_scorer(args.lane, socket_path=args.socket, concurrency=c or None)
    c = setup.scorer.concurrency  # 0 asked for the scorer's own default
    backend = LocalBackend(setup.scorer, str(work / "logs"))
    try:
        wall, recs = timed_run(jobs, backend, work, f"local{c}")
    finally:
        backend.close()
        setup.close()
    return wall, statistics.mean(r["elapsed_s"] for r in recs), c


def ray_and_local(args, jobs, work: Path, kind: str, n: int) -> list[tuple]:
    """Ray on ``n`` nodes and, alternating with it, a local run with as many jobs at once."""
    import ray
    from ray.cluster_utils import Cluster

    from vmafx.batch.ray_runner import RayBackend

    t = time.perf_counter()
    cluster = None
    if kind == "sim":
        cluster = Cluster(initialize_head=True, head_node_args=dict(NODE_ARGS, num_cpus=1, num_gpus=1))
        for _ in range(n - 1):
            cluster.add_node(**NODE_ARGS, num_cpus=1, num_gpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="WARNING")
    else:
        ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, logging_level="WARNING",
                 object_store_memory=200 * 1024 * 1024)
    ray_walls, ray_jobs, loc_walls, loc_jobs = [], [], [], []
    try:
        backend = RayBackend(None, str(work / "logs"), lane=args.lane, concurrency=args.ray_jobs)
        wait_for_actors(backend, n)
        start = time.perf_counter() - t
        c = sum(i["concurrency"] for i in backend.actor_infos())
        for rep in range(args.repeat):
            wall, recs = timed_run(jobs, backend, work, f"ray-{kind}{n}")
            ray_walls.append(wall)
            ray_jobs.append(statistics.mean(r["elapsed_s"] for r in recs))
            wall, job_s, _ = local_run(args, jobs, work, c)
            loc_walls.append(wall)
            loc_jobs.append(job_s)
        backend.close()
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    med = statistics.median
    name = "ray, simulated nodes" if kind == "sim" else "ray, one real node"
    base = (med(loc_walls), med(loc_jobs))
    return [("local (same jobs at once)", "-", c, base[0], base[1], None, None),
            (name, n, c, med(ray_walls), med(ray_jobs), start, base)]


if __name__ == "__main__":
    sys.exit(main())
