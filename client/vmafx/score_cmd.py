"""``vmafxctl score`` (and ``vmafx-vmaf``): what libvmaf's ``vmaf`` tool does, through a daemon or here.

Order of work, so that nothing is scored before everything that can be checked is:
the command line, the output path, the models (``path=`` files read and checked here,
their content sent to a daemon), the two inputs and their geometry; then scoring; then
the frame-count warning, the log (written whole at the end: Ctrl-C leaves none) and the
score lines.  Where it scores: ``--socket PATH`` (must answer), else ``$VMAFX_SOCKET``, else
the system socket, when one answers; else in this process (on the CPU lane, or on the GPU
a ``--lane cuda|hip`` names), unless ``--private`` asks for a private daemon.

Every failure is one line ``vmafxctl: ...`` on stderr naming the file/flag/field; exit 2 for
usage, 1 for failures, 130 for Ctrl-C (``--debug`` shows tracebacks).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

__all__ = ["run_score", "CliError", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: sysexits' EX_UNAVAILABLE: the lane asked for cannot run here
EXIT_UNAVAILABLE = 69


class CliError(Exception):
    """A failure to report as one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code = code


def _say(text: str) -> None:
    sys.stderr.write(f"vmafxctl: {text}\n")


# -- checks before scoring ------------------------------------------------------------


def _check_output(path: str | None) -> None:
    if not path or path == "-":
        return
    if os.path.isdir(path):
        raise CliError(f"-o/--output {path}: is a directory, expected a file path")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CliError(f"-o/--output {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CliError(f"-o/--output {path}: not writable")


def _model_specs(args) -> list[str]:
    if args.no_prediction:
        return []
    return list(args.model) or ["version=vmaf_v0.6.1"]


def _model_texts(specs: Sequence[str]) -> list[str | None]:
    """The content of each ``path=`` model (read and checked here), for the daemon."""
    from .protocol.messages import MODEL_TEXT_MAX

    texts: list[str | None] = []
    for spec in specs:
        path = None
        for part in spec.split(":"):
            if part.startswith("path="):
                path = part[len("path="):]
        if path is None:
            texts.append(None)
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read(MODEL_TEXT_MAX + 1)
        if len(text) > MODEL_TEXT_MAX:
            raise CliError(f"-m/--model path={path}: larger than the {MODEL_TEXT_MAX} characters a daemon "
                           f"takes; score it with --in-process")
        texts.append(text)
    return texts


def _device(args) -> int | None:
    if not args.gpumask:
        return None
    return (args.gpumask & -args.gpumask).bit_length() - 1


def _open_inputs(args):
    from .io.inputs import open_input

    geo = dict(width=args.width, height=args.height, pixel_format=args.pixel_format, bitdepth=args.bitdepth)
    ref = open_input(args.reference, **geo)
    try:
        dist = open_input(args.distorted, **geo)
    except BaseException:
        ref.close()
        raise
    return ref, dist


def _distorted_reader(args, ref, dist):
    """``dist.read_frame``, or one that scales to the reference's size (--scale)."""
    a, b = ref.info, dist.info
    if (a.width, a.height) != (b.width, b.height):
        if not args.scale:
            raise CliError(f"{dist.name}: is {b.width}x{b.height}, the reference {ref.name} is "
                           f"{a.width}x{a.height}; add --scale bicubic (or lanczos, ...) to scale it")
    if a.bitdepth != b.bitdepth:
        raise CliError(f"{dist.name}: is {b.bitdepth}-bit, the reference {ref.name} is {a.bitdepth}-bit")
    if a.pixel_format.subsampling != b.pixel_format.subsampling:
        raise CliError(f"{dist.name}: is {b.pixel_format.value}, the reference {ref.name} is "
                       f"{a.pixel_format.value}")
    if (a.width, a.height) == (b.width, b.height):
        return None
    from .io.av_input import Scaler

    scale = Scaler(args.scale, a.width, a.height)

    def read():
        frame = dist.read_frame()
        return None if frame is None else scale(frame, b)
    return read


def _skip(inp, n: int, flag: str) -> None:
    for i in range(n):
        if inp.read_frame() is None:
            raise CliError(f"{flag} {n}: {inp.name} has only {i} frames")


# -- where to score ----------------------------------------------------------------------


def _candidates(args) -> list[tuple[str, bool, str]]:
    """(socket, must answer, how it was found) in the order tried."""
    from .defaults import DEFAULT_SOCKET

    if args.socket:
        return [(args.socket, True, "--socket")]
    if args.private or args.in_process:
        return []
    out = []
    env = os.environ.get("VMAFX_SOCKET")
    if env:
        out.append((env, False, "$VMAFX_SOCKET"))
    configured, where = _configured_socket()
    if configured and configured not in (env,):
        out.append((configured, False, f"socket in {where}"))
    if os.path.exists(DEFAULT_SOCKET) and DEFAULT_SOCKET not in (env, configured):
        out.append((DEFAULT_SOCKET, False, "the system socket"))
    return out


def _configured_socket() -> tuple[str | None, str]:
    """The ``socket`` key of the daemon's configuration ($VMAFX_CONFIG, else /etc/vmafx/vmafxd.toml)."""
    import tomllib

    path = os.environ.get("VMAFX_CONFIG") or "/etc/vmafx/vmafxd.toml"
    try:
        with open(path, "rb") as f:
            value = tomllib.load(f).get("socket")
    except (OSError, tomllib.TOMLDecodeError):
        return None, path
    return (value if isinstance(value, str) and value else None), path


def _files_request(args, specs, texts) -> dict:
    """What a daemon reading the files itself (score_files) is asked, besides the files."""
    from .remote_files import request_models

    return dict(models=request_models(specs, args.feature, args.no_prediction), features=args.feature,
                model_texts=texts, lane=args.lane, device=_device(args), max_frames=args.frame_cnt or None)


def _start_early(args):
    """The daemon asked to read and score two y4m files at once, before this process imports the
    scoring core, loads models and opens the inputs (they overlap the daemon's work): when a
    daemon socket is known (not --private), both inputs are plain y4m files read from their first
    frame, and nothing would change the request (--scale).  Anything that then turns out
    otherwise is settled by :func:`_remote` taking the job's outcome as its own, or the
    command failing before that (a bad model: the job is dropped with the connection)."""
    if args.private or args.scale or args.frame_skip_ref or args.frame_skip_dist:
        return None
    if "-" in (args.reference, args.distorted):
        return None
    candidates = _candidates(args)
    if not candidates:
        return None
    try:
        specs = _model_specs(args)
        request = _files_request(args, specs, _model_texts(specs))
    except Exception:  # said where the command checks them
        return None
    from .remote_files import start_files_job_early

    return start_files_job_early(candidates[0][0], args.reference, args.distorted, **request)


def _remote(args, socket_path, ref, dist, read_dist, specs, texts, progress):
    if read_dist is None:  # not scaled: plain files are read by the daemon itself, without trio here
        from .remote_files import check_pair, start_files_job

        job, args.files_job = getattr(args, "files_job", None), None
        if job is None or job.socket_path != socket_path:
            job = start_files_job(socket_path, ref, dist, **_files_request(args, specs, texts))
        else:
            check_pair(ref.info, dist.info)  # as start_files_job checks it
        report = None if job is None else job.report(ref, dist, progress)
        if report is not None:
            return report
    import trio

    from .remote_score import score_inputs_through_daemon

    return trio.run(lambda: score_inputs_through_daemon(
        socket_path, ref, dist, models=specs, features=args.feature, model_texts=texts, lane=args.lane,
        device=_device(args), max_frames=args.frame_cnt or None, progress=progress,
        distorted_frames=read_dist, no_prediction=args.no_prediction, files=False))


def _launch_private(args):
    """Launch a private daemon now; it imports while we open inputs and read models."""
    from .private_daemon import PrivateDaemon

    extra = ["--cpu-workers", str(args.threads)] if args.threads else []
    if args.cpu_engine:
        extra += ["--cpu-engine", args.cpu_engine]
    daemon = PrivateDaemon(lane=args.lane, extra_args=extra)
    daemon.launch()
    return daemon


def _daemon_failure(e: BaseException) -> "CliError":
    """A daemon that stopped, went away, refused or broke the protocol: one line and its status."""
    from .exceptions import describe

    line, status = describe(e)
    return CliError(line, status)


def _score(args, ref, dist, read_dist, specs, progress):
    candidates = _candidates(args)
    if candidates or args.private:
        # the client's errors stand on the wire protocol (msgpack): imported only when a
        # daemon is to be asked, so scoring in this process does not pay for them
        from .exceptions import DaemonUnavailable, VmafxError

        texts = _model_texts(specs)  # what a daemon is sent (its size limit is the protocol's)
    for path, must, how in candidates:
        try:
            report = _remote(args, path, ref, dist, read_dist, specs, texts, progress)
        except DaemonUnavailable as e:
            if must:
                raise _daemon_failure(e) from None
            if args.verbose:
                _say(f"no daemon answers at {path} ({how})")
            continue
        except (VmafxError, ExceptionGroup) as e:  # a group: trio's, holding the connection's reason
            raise _daemon_failure(e) from None
        if args.verbose:
            _say(f"scored by the daemon at {path} ({how}), lane {report.lane}"
                 + (", the files read by the daemon" if report.daemon_read else ""))
        return report
    if args.private:
        from .private_daemon import PrivateDaemonError

        daemon = args.private_daemon or _launch_private(args)
        try:
            report = _remote(args, daemon.wait_ready(), ref, dist, read_dist, specs, texts, progress)
        except (PrivateDaemonError, VmafxError, ExceptionGroup) as e:
            raise _daemon_failure(e) from None
        finally:
            args.private_daemon = None
            rc = daemon.stop()
            if rc:
                _say(f"the private vmafxd exited with status {rc}")
        if args.verbose:
            _say(f"scored by a private daemon, lane {report.lane}")
        return report
    from . import in_process

    wrapped = dist
    if read_dist is not None:
        wrapped = _Reading(dist, read_dist)
    # no daemon answered (or --in-process): a GPU lane asked for scores on this process's GPU,
    # which is faster on files than starting a private daemon (docs/performance.md)
    lane = "cpu" if args.lane == "auto" else args.lane
    try:
        report, read = in_process.score_in_process(ref, wrapped, specs, args.feature, lane=lane,
                                                   max_frames=args.frame_cnt or None, progress=progress,
                                                   cpu_engine=args.cpu_engine or "auto")
    except in_process.LaneUnavailableHere as e:
        where = "score through a daemon (without --in-process)" if args.in_process else \
            "start vmafxd (systemctl start vmafxd), or score with --private"
        raise CliError(f"{'--in-process ' if args.in_process else ''}--lane {lane}: {e}; {where} "
                       f"or on --lane cpu", EXIT_UNAVAILABLE) from None
    report.frames_read = read
    if args.verbose:
        _say(f"scored in this process ({lane} lane)")
    return report


class _Reading:
    """An input whose frames come from another reader function (the scaled distorted)."""

    def __init__(self, inp, read):
        self.inp, self.read_frame, self.name = inp, read, inp.name
        self.info = inp.info

    def pushback(self, frame):
        self.inp.pushback(frame)


# -- after scoring -----------------------------------------------------------------------


def _frame_count_warning(ref, dist, scored: int, args) -> None:
    """libvmaf's tool stops at the shorter input (saying which ended first); we say both counts."""
    if args.frame_cnt and scored >= args.frame_cnt:
        return
    if scored == 0:  # "no frames were scored" says it, on its own line
        return
    a = ref.read_frame()
    b = dist.read_frame()
    if a is None and b is None:
        return
    longer, shorter = (ref, dist) if a is not None else (dist, ref)
    skip = args.frame_skip_ref if longer is ref else args.frame_skip_dist
    total = longer.total - skip if longer.total is not None else None
    more = f"{total}" if total is not None else f"more than {scored}"
    # libvmaf's own notice first (tools/vmaf.c), word for word, for scripts that look for it
    _say(f'"{shorter.name}" ended before "{longer.name}".')
    _say(f"warning: {shorter.name} has {scored} frames, {longer.name} has {more}: scored the first {scored} "
         f"(libvmaf's rule; --frame_cnt N bounds it)")


def _print_scores(args, report, out) -> None:
    for name in report.models:
        stats = report.pooled.get(name)
        if not stats or stats.get("mean") is None:
            continue
        line = f"{name}: {stats['mean']:.6f}"
        bag = report.pooled.get(f"{name}_bagging")
        lo = report.pooled.get(f"{name}_ci_p95_lo")
        hi = report.pooled.get(f"{name}_ci_p95_hi")
        if bag and lo and hi and None not in (bag.get("mean"), lo.get("mean"), hi.get("mean")):
            line += f" (bagging {bag['mean']:.6f}, 95% CI {lo['mean']:.6f} .. {hi['mean']:.6f})"
        print(line, file=out)


def _print_summary(report, out) -> None:
    from .stats import summary

    print(f"{'model':<20} {'min':>10} {'p1':>10} {'p5':>10} {'mean':>10} {'hmean':>10} {'max':>10}", file=out)
    for name in report.models:
        values = [m[name] for _, m in report.frames if m.get(name) is not None]
        if not values:
            continue
        s = summary(values)
        print(f"{name:<20} " + " ".join(f"{s[k]:10.6f}" for k in ("min", "p1", "p5", "mean", "harmonic_mean", "max")),
              file=out)


def _write_log(args, report) -> None:
    from . import __version__, in_process
    from .io.scores import WRITERS, in_collector_order, log_version, subsampled

    fmt = args.log_format or "xml"  # libvmaf's default (cli_parse.c)
    frames, pooled = report.frames, report.pooled
    if args.subsample and args.subsample > 1:
        # libvmaf logs and pools only frames whose index is a multiple of N (libvmaf.c)
        frames = subsampled(frames, args.subsample)
        names = {n for _, m in frames for n in m}
        pooled = {n: in_process.pool([m[n] for _, m in frames if n in m]) for n in pooled if n in names}
    order = in_process.metric_order(_model_specs(args), args.feature)
    frames, pooled = in_collector_order(frames, pooled, order)
    kw = dict(version=log_version(__version__), fps=report.fps)
    if fmt == "xml":
        kw.update(width=report.width, height=report.height)
    if args.output == "-":
        WRITERS[fmt](sys.stdout, frames, pooled, report.aggregate, **kw)
        sys.stdout.flush()
        return
    tmp = f"{args.output}.vmafx-partial-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            WRITERS[fmt](f, frames, pooled, report.aggregate, **kw)
        os.replace(tmp, args.output)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def run_score(args) -> int:
    if args.version:
        from . import __version__
        from .io.scores import log_version

        sys.stderr.write(log_version(__version__) + "\n")  # libvmaf prints its version on stderr
        return EXIT_OK
    for flag, value in (("-r/--reference", args.reference), ("-d/--distorted", args.distorted)):
        if not value:
            raise CliError(f"{flag} is required", EXIT_USAGE)
    if args.reference == "-" and args.distorted == "-":
        raise CliError("-r and -d cannot both be stdin ('-')", EXIT_USAGE)
    if args.no_prediction and args.model:
        raise CliError("-n/--no_prediction and -m/--model exclude each other", EXIT_USAGE)
    if args.no_prediction and not args.feature:
        raise CliError("-n/--no_prediction needs at least one --feature", EXIT_USAGE)
    if args.cpumask:
        _say("note: -c/--cpumask is ignored (vmafx's results do not depend on instruction sets)")
    _check_output(args.output)
    args.private_daemon = _launch_private(args) if args.private else None
    args.files_job = _start_early(args)
    try:
        return _run_checked(args)
    finally:
        if args.private_daemon is not None:  # not reached scoring (an error, Ctrl-C)
            args.private_daemon.stop()


def _run_checked(args) -> int:
    specs = _model_specs(args)
    from . import in_process

    if args.lane in ("cuda", "hip") and not args.private and not _candidates(args):
        # no daemon to ask: it scores here, so the driver and the first page-locked slot are
        # started on a thread while the models load and the inputs open (docs/performance.md)
        in_process.start_gpu(args.lane)
    in_process.check_models(specs)  # reads path= models: a bad one fails before any frame is read
    in_process.check_features(args.feature)
    human = sys.stderr if args.output == "-" else sys.stdout
    ref, dist = _open_inputs(args)
    try:
        read_dist = _distorted_reader(args, ref, dist)
        _skip(ref, args.frame_skip_ref, "--frame_skip_ref")
        _skip(dist, args.frame_skip_dist, "--frame_skip_dist")
        from .progress import Progress

        total = None
        if ref.total is not None:
            total = ref.total - args.frame_skip_ref
            if args.frame_cnt:
                total = min(total, args.frame_cnt)
        progress = Progress(not args.quiet, total)
        try:
            report = _score(args, ref, dist, read_dist, specs, progress)
        finally:
            progress.done()
        scored = report.frames_read
        _frame_count_warning(ref, dist, scored, args)
    except BaseException:
        # A pipe or FIFO may still be read by an abandoned worker thread (Ctrl-C during a
        # blocked read): closing it would wait for that read.  The process is ending: leave it.
        for inp in (ref, dist):
            if not inp.stream:
                inp.close()
        raise
    ref.close()
    dist.close()
    for r in getattr(report, "failed", []):
        _say(f"frame {r.index}: {r.error}")
    if not report.frames:
        raise CliError("no frames were scored")
    if args.output:
        _write_log(args, report)
    if not (args.quiet and args.output):
        _print_scores(args, report, human)
    if args.summary:
        _print_summary(report, human)
    return EXIT_FAILURE if getattr(report, "failed", None) else EXIT_OK
