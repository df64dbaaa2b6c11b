"""How one batch job is scored, on this machine or on a Ray actor's node.

Two scorers, one record shape (:func:`run_job`):

* :class:`SubprocessScorer` runs ``vmafxctl score ... --json -o LOG`` as a child
  process -- with ``--in-process`` on the CPU lane, or ``--socket S`` through a
  daemon.  Each job is its own process: isolated (a crash or a leak is the
  job's alone), one per core without sharing a GIL, and every option of the
  installed ``vmafxctl score`` works per job.  Its start costs ~0.2 s.
* :class:`DaemonScorer` scores through a vmafxd socket with the client library
  (:func:`vmafx.remote_score.score_through_daemon`) in the calling thread, and
  writes the per-frame log itself.  Several jobs at once keep a GPU daemon's
  batches full; the daemon shares its devices between them.  A job with an
  option the library path does not take is handed to a SubprocessScorer with
  ``--socket`` (same daemon, the score command's full option set).

:func:`make_scorer` picks one for a lane: ``cpu`` (and ``auto`` where no daemon
with a GPU lane answers) -> subprocesses, one per core; ``cuda``/``hip`` -> the
daemon at ``--socket``/``$VMAFX_SOCKET``/the system socket, else a private one
this process starts and stops.

Either way a record's ``scores`` are the per-frame log's own ``pooled_metrics``
(what ``vmafxctl score --json`` writes), so a batch result equals a local score
of the same pair digit for digit.

``VMAFX_BATCH_TRACE=FILE`` appends each job id to FILE as its scoring starts
(the tests count executions with it).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from .jobs import Job

__all__ = ["Scorer", "SubprocessScorer", "DaemonScorer", "JobFailed", "make_scorer", "run_job", "cpu_count",
           "daemon_lanes"]

#: options the client-library path understands, -> score_through_daemon's keyword
_LIBRARY_OPTIONS = {"width": "width", "w": "width", "height": "height", "H": "height",
                    "pixel-format": "pixel_format", "pixel_format": "pixel_format", "p": "pixel_format",
                    "bitdepth": "bitdepth", "b": "bitdepth", "frames": "max_frames", "frame_cnt": "max_frames"}


class JobFailed(Exception):
    """The job could not be scored; the message is one line for the record's ``error``."""


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _one_line(text: str, limit: int = 400) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_log_scores(path: str) -> tuple[dict, int]:
    """(pooled_metrics, frame count) of a libvmaf-layout JSON log."""
    try:
        with open(path, encoding="utf-8") as f:
            log = json.load(f)
        return dict(log.get("pooled_metrics") or {}), len(log.get("frames") or [])
    except (OSError, ValueError) as e:
        raise JobFailed(f"the per-frame log {path} is unreadable ({e})") from None


class Scorer:
    """Scores one job into ``log_path``; returns (pooled scores, frames, lane).  Thread-safe."""

    kind = "?"
    lane = "?"
    #: how many jobs at once keep this scorer busy without oversubscribing
    concurrency = 1

    def score(self, job: Job, log_path: str, timeout: float | None) -> tuple[dict, int, str]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": self.kind, "lane": self.lane, "concurrency": self.concurrency}


class SubprocessScorer(Scorer):
    kind = "subprocess"

    def __init__(self, lane: str = "cpu", *, socket_path: str | None = None, concurrency: int | None = None,
                 python: str | None = None):
        if socket_path is None and lane not in ("cpu", "auto"):
            raise ValueError(f"--lane: {lane} needs a daemon; without one only the cpu lane scores in-process")
        self.lane = "cpu" if socket_path is None else lane
        self.socket_path = socket_path
        self.concurrency = concurrency or cpu_count()
        self.python = python or sys.executable
        # One job a core: numpy's BLAS must not start a thread a core in each of them as well
        # (measured: ~20 % longer jobs with it, when the cores are already taken).  A value the
        # user set wins.
        self.env = dict(os.environ)
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            self.env.setdefault(k, "1")

    def command(self, job: Job, log_path: str) -> list[str]:
        cmd = [self.python, "-m", "vmafx.cli", "score", *job.score_args(), "--json", "-o", log_path, "-q"]
        if "lane" not in job.options:
            cmd += ["--lane", self.lane]
        cmd += ["--socket", self.socket_path] if self.socket_path else ["--in-process"]
        return cmd

    def score(self, job: Job, log_path: str, timeout: float | None) -> tuple[dict, int, str]:
        try:
            r = subprocess.run(self.command(job, log_path), stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=timeout, env=self.env)
        except subprocess.TimeoutExpired:
            raise JobFailed(f"timed out after {timeout:g} s") from None
        if r.returncode != 0:
            why = _one_line(r.stderr) or f"vmafxctl score exited with status {r.returncode}"
            raise JobFailed(why.removeprefix("vmafxctl: "))
        scores, frames = read_log_scores(log_path)
        return scores, frames, str(job.options.get("lane", self.lane))


class DaemonScorer(Scorer):
    kind = "daemon"

    def __init__(self, socket_path: str, lane: str = "auto", *, concurrency: int | None = None,
                 python: str | None = None):
        self.socket_path = socket_path
        self.lane = lane
        lanes = daemon_lanes(socket_path)
        if lanes is None:
            raise JobFailed(f"no daemon answers at {socket_path}")
        names = [ln.get("lane") for ln in lanes]
        if lane != "auto" and lane not in names:
            have = ", ".join(map(str, names)) or "none"
            raise ValueError(f"--lane: the daemon at {socket_path} has no {lane} lane (it has {have})")
        # The lane the jobs will use: the one asked for; for auto a GPU lane when there is one
        # (the daemon's own choice), else its cpu lane.
        used = [ln for ln in lanes if ln.get("lane") == lane] if lane != "auto" else (
            [ln for ln in lanes if ln.get("lane") != "cpu"] or lanes)
        gpu = sum(len(ln.get("devices") or [1]) for ln in used if ln.get("lane") != "cpu")
        cpu_workers = sum(len(ln.get("devices") or [1]) for ln in used if ln.get("lane") == "cpu")
        # GPU: several sessions a device, so that while one job reads its next frames from disk
        # others fill the device's batch.  CPU lane: one session a worker thread (a session is
        # pinned to one worker; more would only queue).
        self.concurrency = concurrency or max(1, 4 * gpu + cpu_workers)
        # For the jobs vmafxctl score runs against this daemon: the lane named, so that the
        # record says where they ran (the daemon's auto pick is its first GPU lane, else cpu).
        self.resolved_lane = str(used[0].get("lane")) if lane == "auto" and used else lane
        self._fallback = SubprocessScorer(self.resolved_lane, socket_path=socket_path,
                                          concurrency=self.concurrency, python=python)

    def score(self, job: Job, log_path: str, timeout: float | None) -> tuple[dict, int, str]:
        kw: dict[str, Any] = {}
        for name, value in job.options.items():
            key = _LIBRARY_OPTIONS.get(name)
            if key is None:
                if name == "lane":
                    continue
                return self._fallback.score(job, log_path, timeout)
            kw[key] = int(value) if key in ("width", "height", "bitdepth", "max_frames") else str(value)
        import trio

        from .. import __version__
        from ..exceptions import VmafxError
        from .. import in_process
        from ..io.scores import in_collector_order, log_version, write_json
        from ..remote_score import score_through_daemon

        lane = str(job.options.get("lane", self.lane))

        async def run():
            with trio.fail_after(timeout if timeout else float("inf")):
                return await score_through_daemon(self.socket_path, job.reference, job.distorted,
                                                  models=job.models, features=job.features, lane=lane, **kw)

        try:
            report = trio.run(run)
        except trio.TooSlowError:
            raise JobFailed(f"timed out after {timeout:g} s") from None
        except (VmafxError, ValueError, OSError) as e:
            raise JobFailed(_one_line(str(e)) or type(e).__name__) from None
        if report.failed:
            r = report.failed[0]
            raise JobFailed(f"{len(report.failed)} frame(s) failed; frame {r.index}: {_one_line(str(r.error))}")
        if not report.frames:
            raise JobFailed("no frames were scored")
        # The same log `vmafxctl score` writes: libvmaf's key order and our version string.
        models = list(job.models) or ["version=vmaf_v0.6.1"]
        frames, pooled = in_collector_order(report.frames, report.pooled,
                                            in_process.metric_order(models, list(job.features)))
        with open(log_path, "w", encoding="utf-8") as f:
            write_json(f, frames, pooled, report.aggregate, version=log_version(__version__), fps=report.fps)
        scores, frames = read_log_scores(log_path)
        return scores, frames, report.lane or lane


def daemon_lanes(path: str | None, timeout: float = 5.0) -> list[dict] | None:
    """The lanes of the daemon answering at ``path`` (None: nobody answers)."""
    if not path:
        return None
    from ..blocking import BlockingClient
    from ..exceptions import VmafxError

    try:
        with BlockingClient.connect(path, name="vmafxctl-batch", timeout=timeout) as c:
            return [dict(ln) for ln in c.lanes]
    except (VmafxError, OSError, TimeoutError):
        return None


@dataclass
class ScorerSetup:
    scorer: Scorer
    #: a private daemon this process started (stopped by close)
    daemon: Any = None

    def close(self) -> None:
        self.scorer.close()
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None


def make_scorer(lane: str = "auto", *, socket_path: str | None = None, concurrency: int | None = None,
                python: str | None = None) -> ScorerSetup:
    """The scorer for ``lane`` on this machine (see the module's doc for the rule)."""
    from ..defaults import DEFAULT_SOCKET

    if socket_path:  # asked for: it must answer
        return ScorerSetup(DaemonScorer(socket_path, lane, concurrency=concurrency, python=python))
    if lane == "cpu":
        return ScorerSetup(SubprocessScorer("cpu", concurrency=concurrency, python=python))
    for cand in dict.fromkeys(p for p in (os.environ.get("VMAFX_SOCKET"), DEFAULT_SOCKET) if p):
        lanes = daemon_lanes(cand) if os.path.exists(cand) else None
        if lanes is None:
            continue
        names = {ln.get("lane") for ln in lanes}
        if (lane == "auto" and names - {"cpu"}) or lane in names:
            return ScorerSetup(DaemonScorer(cand, lane, concurrency=concurrency, python=python))
    if lane == "auto":
        return ScorerSetup(SubprocessScorer("cpu", concurrency=concurrency, python=python))
    from ..private_daemon import PrivateDaemon

    daemon = PrivateDaemon(lane=lane, python=python)
    path = daemon.start()
    try:
        return ScorerSetup(DaemonScorer(path, lane, concurrency=concurrency, python=python), daemon)
    except BaseException:
        daemon.stop()
        raise


def _trace(job: Job) -> None:
    path = os.environ.get("VMAFX_BATCH_TRACE")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{job.id}\n".encode())  # one short O_APPEND write: whole lines across processes
        finally:
            os.close(fd)



def run_job(scorer: Scorer, job: Job, logs_dir: str, *, timeout: float | None = None, attempt: int = 1,
            node: str | None = None) -> dict:
    """Score ``job`` and return its result record; a failure is a record with ``error``, never an exception."""
    _trace(job)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.perf_counter()
    log_path = os.path.join(logs_dir, f"{job.id}.json")
    # Written under a temporary name, renamed when complete: a log that exists is whole.
    tmp = os.path.join(logs_dir, f".{job.id}.{os.getpid()}.{threading.get_ident()}.json")
    record = {"job_id": job.id, "reference": job.reference, "distorted": job.distorted,
              "models": list(job.models), "features": list(job.features), "options": dict(job.options),
              "ok": False, "error": None, "scores": {}, "frames": 0, "log": None, "lane": scorer.lane,
              "node": node or socket.gethostname(), "attempt": attempt,
              "started_at": started.isoformat(timespec="milliseconds"), "elapsed_s": 0.0}
    try:
        os.makedirs(logs_dir, exist_ok=True)
        scores, frames, lane = scorer.score(job, tmp, timeout)
        os.replace(tmp, log_path)
        record.update(ok=True, scores=scores, frames=frames, log=log_path, lane=lane)
    except JobFailed as e:
        record["error"] = str(e)
    except Exception as e:  # never abort the batch: the job's record says what went wrong
        record["error"] = _one_line(f"{type(e).__name__}: {e}")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    record["elapsed_s"] = round(time.perf_counter() - t0, 6)
    return record
