"""The batch's driver loop: feed a backend, write each result once, count progress.

A backend runs jobs somewhere -- :class:`LocalBackend` in this process's
threads, :class:`~vmafx.batch.ray_runner.RayBackend` on a Ray cluster's actors
-- and says how many more it can take now (``capacity``), so jobs are handed
out as room appears rather than queued up front: a job list of a million rows
costs memory for the jobs, not for a million pending futures, and a backend
that loses a worker hands its unfinished jobs back (``poll`` returns them as
*lost*) to be given to another.

Only this loop writes the results file, so each job's record is written
exactly once however the backend retried it (ResultsFile refuses a second
record for a job id).
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
from dataclasses import dataclass, field
from typing import Iterable, Protocol

from .jobs import Job
from .progress import Progress
from .results import ResultsFile
from .scorers import Scorer, run_job

__all__ = ["Backend", "LocalBackend", "BatchSummary", "run_batch", "NoWorkers"]


class NoWorkers(RuntimeError):
    """The backend has no worker left to run the remaining jobs."""


@dataclass
class Done:
    job: Job
    record: dict | None  # None: lost (the worker died); the job goes back to the queue
    why: str = ""


class Backend(Protocol):
    def capacity(self) -> int: ...
    def submit(self, job: Job, attempt: int) -> None: ...
    def poll(self, timeout: float) -> list[Done]: ...
    def close(self) -> None: ...


class LocalBackend:
    """Jobs on this machine: ``concurrency`` threads, each running one job at a time through ``scorer``."""

    def __init__(self, scorer: Scorer, logs_dir: str, *, concurrency: int | None = None,
                 timeout: float | None = None):
        self.scorer = scorer
        self.logs_dir = logs_dir
        self.timeout = timeout
        self.concurrency = concurrency or scorer.concurrency
        self._pool = cf.ThreadPoolExecutor(self.concurrency, thread_name_prefix="vmafx-batch")
        self._running: set[cf.Future] = set()

    def capacity(self) -> int:
        return self.concurrency - len(self._running)

    def submit(self, job: Job, attempt: int) -> None:
        fut = self._pool.submit(run_job, self.scorer, job, self.logs_dir, timeout=self.timeout, attempt=attempt)
        fut.job = job  # type: ignore[attr-defined]
        self._running.add(fut)

    def poll(self, timeout: float) -> list[Done]:
        if not self._running:
            return []
        finished, _ = cf.wait(self._running, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out = []
        for fut in finished:
            self._running.discard(fut)
            out.append(Done(fut.job, fut.result()))  # type: ignore[attr-defined]
        return out

    def close(self) -> None:
        # Jobs still running (Ctrl-C) finish on their own; nothing more starts.
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class BatchSummary:
    total: int = 0
    skipped: int = 0
    scored: int = 0
    failed: int = 0  # in this run
    failed_before: int = 0  # skipped jobs whose earlier record is a failure
    retries: int = 0
    failed_ids: list[str] = field(default_factory=list)

    @property
    def any_failed(self) -> bool:
        return bool(self.failed or self.failed_before)


def run_batch(jobs: Iterable[Job], backend: Backend, results: ResultsFile, *, progress: bool = True,
              max_attempts: int = 3, stream=None, interval: float = 10.0) -> BatchSummary:
    """Run every job without a record in ``results``; returns the counts.

    A backend that can no longer run anything raises :class:`NoWorkers` from ``poll``.
    """
    jobs = list(jobs)
    done_before = results.done
    todo = collections.deque(j for j in jobs if j.id not in done_before)
    summary = BatchSummary(total=len(jobs), skipped=len(jobs) - len(todo))
    summary.failed_before = sum(1 for j in jobs if j.id in done_before and results.records[j.id].get("error"))
    bar = Progress(len(todo), skipped=summary.skipped, enabled=progress, stream=stream, interval=interval)
    bar.start()
    attempts: dict[str, int] = collections.Counter()
    in_flight = 0
    try:
        while todo or in_flight:
            while todo and backend.capacity() > 0:
                job = todo.popleft()
                attempts[job.id] += 1
                backend.submit(job, attempts[job.id])
                in_flight += 1
            for d in backend.poll(0.5):
                in_flight -= 1
                rec = d.record
                if rec is None:
                    summary.retries += 1
                    if attempts[d.job.id] < max_attempts:
                        todo.appendleft(d.job)  # first in line: it has waited longest
                        continue
                    rec = _lost_record(d.job, attempts[d.job.id], d.why)
                if results.write(rec):
                    summary.scored += 1
                    if rec.get("error"):
                        summary.failed += 1
                        summary.failed_ids.append(rec["job_id"])
                    bar.update(not rec.get("error"))
    finally:
        bar.finish()
    return summary


def _lost_record(job: Job, attempts: int, why: str) -> dict:
    return {"job_id": job.id, "reference": job.reference, "distorted": job.distorted,
            "models": list(job.models), "features": list(job.features), "options": dict(job.options),
            "ok": False, "error": f"the worker running it was lost {attempts} times ({why})", "scores": {},
            "frames": 0, "log": None, "lane": None, "node": None, "attempt": attempts, "started_at": None,
            "elapsed_s": 0.0}
