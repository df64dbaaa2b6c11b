"""``vmafxctl batch JOBS``: the command line over the batch package.

    vmafxctl batch JOBS [-o RESULTS] [--format jsonl|parquet] [--logs DIR] [--resume | --overwrite]
                   [--retry-failed] [-m SPEC ...] [--feature SPEC ...] [--lane auto|cpu|cuda|hip]
                   [--socket PATH] [-j N] [--timeout S] [--ray ADDRESS|auto] [-q]

Exit status: 0 every job scored, 1 any job failed (in this run or, with
--resume, before), 2 usage (bad flags, a malformed job list, a results file
that exists without --resume/--overwrite), 130 interrupted (the results so far
are kept; --resume continues).
"""

from __future__ import annotations

import os
import sys

from ..score_args import number_type

__all__ = ["COMMAND", "add_batch_arguments", "cmd_batch"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


_positive = number_type(int, "a whole number", lambda n: n >= 1, "must be at least 1, got {value}")
_seconds = number_type(float, "seconds", lambda s: s > 0, "must be positive, got {text}")


class _BatchCommand:
    """vmafxctl's ``batch`` subcommand (an entry of ``vmafx.cli.SUBCOMMANDS``)."""

    help = "score a list of jobs (CSV or JSON Lines), locally or on a Ray cluster"
    parser_kw = dict(description="Score every (reference, distorted, models) job of JOBS; one result record "
                                 "a job is streamed to RESULTS. See docs/operations.md, 'Batches'.")

    @staticmethod
    def add_arguments(p) -> None:
        add_batch_arguments(p)

    @staticmethod
    def run(args) -> int:
        return cmd_batch(args)


COMMAND = _BatchCommand


def add_batch_arguments(p) -> None:
    """The ``batch`` subcommand's options."""
    p.add_argument("job_list", metavar="JOBS", help="job list: .csv, or .jsonl (one JSON object a line); '-' for stdin")
    p.add_argument("--output", "-o", metavar="RESULTS",
                   help="results file (default JOBS' name with .results.jsonl, or .parquet with --format parquet)")
    p.add_argument("--format", choices=("jsonl", "parquet"), help="results format (default from RESULTS' name; "
                                                                  "parquet needs pyarrow)")
    p.add_argument("--logs", metavar="DIR", help="folder for the per-frame logs, JOB_ID.json "
                                                  "(default RESULTS' name with .logs)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="skip the jobs RESULTS already has a record for")
    again.add_argument("--overwrite", action="store_true", help="start RESULTS afresh")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: drop the failed jobs' records and score them again")
    p.add_argument("--model", "-m", action="append", default=[], metavar="SPEC",
                   help="model for jobs that name none (as vmafxctl score --model; repeat for several)")
    p.add_argument("--feature", action="append", default=[], metavar="SPEC",
                   help="extra feature for jobs that name none (as vmafxctl score --feature)")
    p.add_argument("--lane", default="auto", choices=("auto", "cpu", "cuda", "hip"),
                   help="auto: a running daemon's GPU lane if one answers, else the cpu lane (one job a core)")
    p.add_argument("--socket", "-s", metavar="PATH", help="score through the daemon at PATH (it must answer)")
    p.add_argument("--jobs", "-j", type=_positive, metavar="N",
                   help="jobs at once (default: one a CPU core on the cpu lane, four a GPU on a daemon); "
                        "with --ray, on each node")
    p.add_argument("--timeout", type=_seconds, metavar="S", help="give up on a job after S seconds (recorded as failed)")
    p.add_argument("--ray", metavar="ADDRESS", help="run on the Ray cluster at ADDRESS ('auto': the one this "
                                                    "machine belongs to); needs the [ray] extra")
    p.add_argument("--max-attempts", type=_positive, default=3, metavar="N",
                   help="with --ray: tries of a job whose node or worker died before it is recorded as failed "
                        "(default 3)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _default_output(jobs: str, fmt: str | None) -> str:
    base = "batch" if jobs == "-" else os.path.splitext(jobs)[0]
    return base + (".results.parquet" if fmt == "parquet" else ".results.jsonl")


def _default_logs(output: str) -> str:
    base = output
    for ext in (".jsonl", ".parquet", ".ndjson"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    return base + ".logs"


def _err(msg: str) -> None:
    print(f"vmafxctl batch: {msg}", file=sys.stderr)


def cmd_batch(args) -> int:
    from .jobs import JobListError, load_jobs
    from .results import ResultsError, ResultsFile
    from .scheduler import LocalBackend, NoWorkers, run_batch

    if args.retry_failed and not args.resume:
        _err("--retry-failed goes with --resume")
        return EXIT_USAGE
    if args.ray and args.socket:
        _err("--socket names this machine's daemon; with --ray each node finds its own (VMAFX_SOCKET there)")
        return EXIT_USAGE
    try:
        jobs = load_jobs(args.job_list, models=args.model, features=args.feature)
    except JobListError as e:
        _err(str(e))
        return EXIT_USAGE
    except (OSError, UnicodeDecodeError) as e:
        _err(f"{args.job_list}: {getattr(e, 'strerror', None) or e}")
        return EXIT_USAGE
    output = args.output or _default_output(args.job_list, args.format)
    logs = os.path.abspath(args.logs or _default_logs(output))
    try:
        results = ResultsFile(output, args.format, resume=args.resume, overwrite=args.overwrite,
                              retry_failed=args.retry_failed)
    except ResultsError as e:
        _err(str(e))
        return EXIT_USAGE
    except OSError as e:
        _err(f"{output}: {e.strerror or e}")
        return EXIT_USAGE
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("vmafxctl batch: %(message)s"))
    batch_log = logging.getLogger("vmafx.batch")
    batch_log.addHandler(handler)
    batch_log.setLevel(logging.WARNING)
    batch_log.propagate = False
    backend = setup = None
    summary = None
    try:
        if args.ray:
            from .ray_runner import RayBackend, RayUnavailable

            try:
                backend = RayBackend(args.ray, logs, lane=args.lane, concurrency=args.jobs, timeout=args.timeout)
            except RayUnavailable as e:
                _err(str(e))
                return EXIT_USAGE
        else:
            from .scorers import make_scorer

            try:
                setup = make_scorer(args.lane, socket_path=args.socket, concurrency=args.jobs)
            except ValueError as e:
                _err(str(e))
                return EXIT_USAGE
            backend = LocalBackend(setup.scorer, logs, timeout=args.timeout)
        summary = run_batch(jobs, backend, results, progress=not args.quiet, max_attempts=args.max_attempts)
    except NoWorkers as e:
        _err(f"{e}; the results so far are in {output} (continue with --resume)")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _err(f"interrupted; the results so far are in {output} (continue with --resume)")
        return 130
    except Exception as e:  # a daemon that would not start, a cluster that would not connect: one line
        from .scorers import _one_line

        _err(_one_line(f"{e}") or type(e).__name__)
        return EXIT_FAILURE
    finally:
        if backend is not None:
            backend.close()
        if setup is not None:
            setup.close()
        results.close()
    if summary.failed or summary.failed_before:
        n = summary.failed + summary.failed_before
        shown = ", ".join(summary.failed_ids[:5]) + (" ..." if len(summary.failed_ids) > 5 else "")
        _err(f"{n} of {summary.total} job(s) failed" + (f" ({shown})" if shown else "")
             + f"; see the error field in {output}")
        return EXIT_FAILURE
    return EXIT_OK
