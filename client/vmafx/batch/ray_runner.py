"""The batch on a Ray cluster: one long-lived actor a scoring node, fed by the driver.

Placement.  The driver lists the cluster's live nodes (``ray.nodes()``): where
any node offers GPUs, each GPU node gets one actor (a CPU-only head stays a
head); on a CPU-only cluster every node gets one.  The actor is pinned to its
node (``NodeAffinitySchedulingStrategy``, not soft) and reserves no Ray
resources: it does not run the scoring itself, it hands each job to that
host's vmafxd (found as ``vmafxctl score`` finds it: ``$VMAFX_SOCKET``, the
system socket, else a private daemon the actor starts) or, on the CPU lane,
to ``vmafxctl score`` subprocesses -- :func:`vmafx.batch.scorers.make_scorer`,
the same rule as a local batch.  Nodes that join later get an actor within a
few seconds.

Flow.  Each actor says how many jobs keep its node busy (its scorer's
concurrency: the node's CPUs on the CPU lane, four a GPU on a daemon); the
driver keeps at most that many plus a small prefetch outstanding on it, and
the actor's own semaphore holds the prefetched ones until a slot frees --
so queues stay short and a dying node strands only a few jobs.  Jobs travel
as small dicts (paths or URLs every node can open); only the result record
(pooled scores, frame count, the per-frame log's path on that node, timings)
travels back.

Failure.  A call that fails with a Ray error (the actor died, its node was
removed or stopped answering) hands its job back to the driver's queue; it
runs on another actor (up to ``--max-attempts`` times, then it is recorded as
failed).  The driver alone writes results, one a job id, so a job that
finished on a node whose answer was lost is simply scored again and recorded
once.  The dead actor is dropped; its node gets a new one if it is still
alive a few seconds later.  When no node can take jobs for ``no_worker_wait``
seconds the batch stops (exit 1) and ``--resume`` continues it later.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .jobs import Job
from .scheduler import Done, NoWorkers
from .scorers import make_scorer, run_job

__all__ = ["RayBackend", "RayUnavailable", "BatchActor", "LOOPBACK_ENV"]

log = logging.getLogger("vmafx.batch.ray")

#: what the tests and the benchmark put in the environment for a loopback-only cluster
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


class RayUnavailable(RuntimeError):
    """ray is not installed, or the cluster cannot be reached."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs ray: pip install 'vmafxd[ray]'") from None
    return ray


class BatchActor:
    """Runs on one node: scores jobs through that node's scorer, a bounded number at once."""

    def __init__(self, lane: str, logs_dir: str, concurrency: int | None, timeout: float | None,
                 node_cpus: int | None = None, env: dict | None = None):
        os.environ.update(env or {})
        self.logs_dir = logs_dir
        self.timeout = timeout
        self.setup = make_scorer(lane, concurrency=concurrency)
        if concurrency is None and node_cpus and self.setup.scorer.kind == "subprocess":
            self.setup.scorer.concurrency = node_cpus  # the node's share, not this machine's core count
        self.concurrency = self.setup.scorer.concurrency
        self._slots = threading.BoundedSemaphore(self.concurrency)
        import ray

        ctx = ray.get_runtime_context()
        self.node_id = ctx.get_node_id()
        self.node = f"{socket.gethostname()}/{self.node_id[:8]}"
        self.ip = ray.util.get_node_ip_address()

    def info(self) -> dict:
        return {"node_id": self.node_id, "node": self.node, "ip": self.ip, "pid": os.getpid(),
                "concurrency": self.concurrency, **self.setup.scorer.describe()}

    def run(self, job: dict, attempt: int) -> dict:
        with self._slots:
            return run_job(self.setup.scorer, Job.from_dict(job), self.logs_dir, timeout=self.timeout,
                           attempt=attempt, node=self.node)

    def close(self) -> None:
        self.setup.close()


@dataclass
class _Worker:
    node_id: str
    handle: Any
    info_ref: Any = None
    info: dict | None = None
    limit: int = 0
    outstanding: dict = field(default_factory=dict)  # ref -> (job, attempt)


class RayBackend:
    """Jobs on a Ray cluster's actors; see the module's doc."""

    PREFETCH = 1  # jobs queued on an actor beyond its concurrency: hides the round trip, strands little

    def __init__(self, address: str | None, logs_dir: str, *, lane: str = "auto", concurrency: int | None = None,
                 timeout: float | None = None, no_worker_wait: float = 60.0, refresh_s: float = 2.0,
                 init_kwargs: dict | None = None):
        ray = self.ray = _ray()
        #: what every node's actor is made with (BatchActor's lane, logs_dir, concurrency, timeout)
        self._actor_args = (lane, logs_dir, concurrency, timeout)
        self.no_worker_wait = no_worker_wait
        self.refresh_s = refresh_s
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, logging_level=logging.WARNING, **(init_kwargs or {}))
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayUnavailable(f"--ray {address}: {e}") from None
            self._owns_ray = True
        # max_concurrency bounds the actor's threads; the semaphore inside bounds the scoring.
        self._actor_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0,
                                     max_concurrency=256)(BatchActor)
        # The actors run in the nodes' environment, not ours; the execution trace follows the driver.
        self._actor_env = {k: os.environ[k] for k in ("VMAFX_BATCH_TRACE",) if k in os.environ}
        self.workers: dict[str, _Worker] = {}  # node id -> its actor
        self._dead_at: dict[str, float] = {}  # node id -> when its actor died
        self._last_refresh = 0.0
        self._no_worker_since: float | None = None
        self.lost = 0  # calls lost to dead actors (tests read it)
        self._refresh(force=True)

    # -- nodes and actors ------------------------------------------------------------

    def _eligible_nodes(self) -> list[dict]:
        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        gpu = [n for n in alive if n.get("Resources", {}).get("GPU", 0) > 0]
        return gpu or alive

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_refresh < self.refresh_s:
            return
        self._last_refresh = now
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for node in self._eligible_nodes():
            nid = node["NodeID"]
            if nid in self.workers or now - self._dead_at.get(nid, -1e9) < 5.0:
                continue
            cpus = int(node.get("Resources", {}).get("CPU", 0)) or None
            handle = self._actor_cls.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
                name=None).remote(*self._actor_args, cpus, self._actor_env)
            w = _Worker(nid, handle)
            w.info_ref = handle.info.remote()
            self.workers[nid] = w

    def _drop(self, w: _Worker, why: str) -> list[Done]:
        """The actor is gone: its outstanding jobs go back to the driver."""
        self.workers.pop(w.node_id, None)
        self._dead_at[w.node_id] = time.monotonic()
        try:
            self.ray.kill(w.handle, no_restart=True)
        except Exception:
            pass
        lost = [Done(job, None, why) for job, _ in w.outstanding.values()]
        self.lost += len(lost)
        w.outstanding.clear()
        log.warning("lost the actor on node %s (%s); %d job(s) go elsewhere", w.node_id[:8], why, len(lost))
        return lost

    # -- Backend ---------------------------------------------------------------------

    def capacity(self) -> int:
        return sum(max(0, w.limit - len(w.outstanding)) for w in self.workers.values() if w.info)

    def submit(self, job: Job, attempt: int) -> None:
        ready = [w for w in self.workers.values() if w.info and len(w.outstanding) < w.limit]
        # the least loaded actor (relative to its size) takes it
        w = min(ready, key=lambda w: len(w.outstanding) / w.limit)
        ref = w.handle.run.remote(job.to_dict(), attempt)
        w.outstanding[ref] = (job, attempt)

    def poll(self, timeout: float) -> list[Done]:
        ray = self.ray
        self._refresh()
        waiting = {}
        for w in list(self.workers.values()):
            if w.info is None and w.info_ref is not None:
                waiting[w.info_ref] = (w, None)
            for ref in w.outstanding:
                waiting[ref] = (w, ref)
        self._check_stranded()
        if not waiting:
            time.sleep(min(timeout, 0.2))
            return []
        ready, _ = ray.wait(list(waiting), num_returns=1, timeout=timeout)
        if ready:  # take everything else that is ready too
            more, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=0)
            ready = list(dict.fromkeys(ready + more))
        out: list[Done] = []
        for ref in ready:
            w, job_ref = waiting[ref]
            if self.workers.get(w.node_id) is not w:
                continue  # dropped while we looked
            try:
                value = ray.get(ref)
            except ray.exceptions.RayError as e:
                out += self._drop(w, type(e).__name__)
                continue
            if job_ref is None:
                w.info = value
                w.limit = int(value["concurrency"]) + self.PREFETCH
                log.info("actor on %s (%s): %s lane, %s, %d at once", value["node"], value["ip"],
                         value["lane"], value["kind"], value["concurrency"])
            else:
                job, _attempt = w.outstanding.pop(ref)
                out.append(Done(job, value))
        return out

    def _check_stranded(self) -> None:
        if self.workers:  # an actor that works, or one still starting
            self._no_worker_since = None
            return
        now = time.monotonic()
        if self._no_worker_since is None:
            self._no_worker_since = now
        elif now - self._no_worker_since > self.no_worker_wait:
            raise NoWorkers(f"no Ray node could take jobs for {self.no_worker_wait:.0f} s")

    def actor_infos(self) -> list[dict]:
        return [w.info for w in self.workers.values() if w.info]

    def close(self) -> None:
        for w in list(self.workers.values()):
            try:
                ray_ref = w.handle.close.remote()
                self.ray.wait([ray_ref], timeout=10)
                self.ray.kill(w.handle, no_restart=True)
            except Exception:
                pass
        self.workers.clear()
        if self._owns_ray:
            self.ray.shutdown()
