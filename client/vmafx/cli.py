"""vmafxctl: score video pairs, and talk to a running vmafxd.

    vmafxctl score --reference REF --distorted DIST [--model version=NAME | --model path=FILE ...]
                   [--feature NAME[=opt=val:...] ...] [--output FILE] [--json|--xml|--csv|--sub]
                   [--lane auto|cpu|cuda|hip] [--width W --height H --pixel-format FMT --bitdepth 8|10]
                   [--socket PATH | --private | --in-process]
    vmafxctl status [--socket PATH] [--json]
    vmafxctl sessions [--socket PATH] [--json]

``score`` prints the pooled (mean) score of each model; ``--output`` writes
the per-frame log in libvmaf's layout.  It scores through a daemon: the one
at ``--socket`` (which must answer), else the one at ``$VMAFX_SOCKET`` or the
system service's /run/vmafx/vmafxd.sock when one answers there, else a
private daemon it starts for the run and stops afterwards.  ``--in-process``
scores in this process with the CPU lane (vmafxd.offline, the reference the
daemon's results are checked against).

Exit status: 0 success, 1 failure (including frames the daemon failed), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Sequence

from .defaults import DEFAULT_SOCKET
from .formats import PixelFormat

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _add_score(sub) -> None:
    p = sub.add_parser("score", help="score a distorted video against a reference")
    p.add_argument("--reference", "-r", required=True, help="reference video (.y4m, .yuv; .xz/.gz accepted)")
    p.add_argument("--distorted", "-d", required=True, help="distorted video")
    p.add_argument("--model", "-m", action="append", default=[], metavar="SPEC",
                   help="version=NAME or path=FILE, then :name=...:enable_transform=true:FEATURE.OPTION=VALUE "
                        "(default version=vmaf_v0.6.1); repeat for several models")
    p.add_argument("--feature", action="append", default=[], metavar="SPEC",
                   help="an extra feature, NAME[=option=value:...] (psnr, float_ssim, float_ms_ssim, vif, adm, motion)")
    p.add_argument("--output", "-o", help="write the per-frame log here ('-' for stdout)")
    fmt = p.add_mutually_exclusive_group()
    for name in ("json", "xml", "csv", "sub"):
        fmt.add_argument(f"--{name}", dest="log_format", action="store_const", const=name,
                         help=f"write the log as {name.upper()}")
    p.add_argument("--lane", default="auto", choices=("auto", "cpu", "cuda", "hip"),
                   help="where to score (default auto: a GPU lane if one is usable, else cpu)")
    p.add_argument("--width", "-w", type=int, help="width of raw .yuv input")
    p.add_argument("--height", "-H", type=int, help="height of raw .yuv input")
    p.add_argument("--pixel-format", "-p", choices=[f.value for f in PixelFormat] + ["420", "422", "444"],
                   help="pixel format of raw .yuv input")
    p.add_argument("--bitdepth", "-b", type=int, choices=(8, 10), help="bit depth of raw .yuv input")
    p.add_argument("--frames", type=int, help="score at most this many frames")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", "-s", metavar="PATH",
                       help="score through the daemon at PATH (default: $VMAFX_SOCKET or "
                            f"{DEFAULT_SOCKET} when one answers there, else a private daemon)")
    where.add_argument("--private", action="store_true",
                       help="always start a private daemon for this run (stopped afterwards)")
    where.add_argument("--in-process", "--no-daemon", dest="in_process", action="store_true",
                       help="score in this process on the CPU lane, without any daemon")
    p.set_defaults(func=_cmd_score)


def _add_status(sub) -> None:
    p = sub.add_parser("status", help="what a running daemon is doing")
    p.add_argument("--socket", "-s", metavar="PATH", help=f"the daemon's socket (default $VMAFX_SOCKET or {DEFAULT_SOCKET})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_status)


def _add_sessions(sub) -> None:
    p = sub.add_parser("sessions", help="the open sessions of all clients of a running daemon")
    p.add_argument("--socket", "-s", metavar="PATH", help=f"the daemon's socket (default $VMAFX_SOCKET or {DEFAULT_SOCKET})")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_sessions)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vmafxctl", description="VMAF scoring through vmafxd")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_score(sub)
    _add_status(sub)
    _add_sessions(sub)
    return parser


class _Progress:
    """A one-line progress bar on stderr: only on a terminal, and only once a run lasts a moment.

    With a known frame count it draws a bar; otherwise it counts frames.
    """

    DELAY = 0.5  # seconds before anything is drawn: short runs stay silent

    def __init__(self, enabled: bool, total: int | None = None):
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self._t0 = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __call__(self, n: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._t0 < self.DELAY or (now - self._last < 0.1 and n != self.total):
            return
        self._last = now
        fps = n / (now - self._t0)
        if self.total:
            width = 30
            done = min(width, n * width // self.total)
            text = f"[{'#' * done}{'.' * (width - done)}] {n}/{self.total} frames, {fps:.1f} fps"
        else:
            text = f"scored {n} frames, {fps:.1f} fps"
        sys.stderr.write("\r" + text + "\033[K")
        sys.stderr.flush()
        self._drawn = True

    def done(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _estimate_frames(args) -> int | None:
    """Frames the run will score, when knowable cheaply (uncompressed files, or --frames)."""
    from .io.video import open_video

    path = args.reference
    try:
        with open_video(path, width=args.width, height=args.height, pixel_format=args.pixel_format,
                        bitdepth=args.bitdepth) as r:
            info = r.info
    except (ValueError, OSError):
        return args.frames
    total = None
    if not path.endswith((".xz", ".gz")):
        per_frame = info.frame_size + (6 if path.endswith(".y4m") else 0)  # y4m: "FRAME\n"
        total = os.path.getsize(path) // per_frame
    if args.frames is not None:
        total = min(total, args.frames) if total is not None else args.frames
    return total


def _write_log(args, report) -> None:
    from vmafxd import __version__
    from .io.scores import WRITERS

    fmt = args.log_format or "json"
    kw = dict(version=__version__, fps=report.fps)
    if fmt == "xml":
        kw.update(width=report.width, height=report.height)
    if args.output == "-":
        WRITERS[fmt](sys.stdout, report.frames, report.pooled, report.aggregate, **kw)
        return
    with open(args.output, "w", encoding="utf-8") as f:
        WRITERS[fmt](f, report.frames, report.pooled, report.aggregate, **kw)


def _print_models(names: Sequence[str], pooled: dict) -> None:
    for name in names:
        stats = pooled.get(name)
        if not stats or stats.get("mean") is None:
            continue
        line = f"{name}: {stats['mean']:.6f}"
        bag = pooled.get(f"{name}_bagging")
        lo = pooled.get(f"{name}_ci_p95_lo")
        hi = pooled.get(f"{name}_ci_p95_hi")
        if bag and lo and hi and None not in (bag.get("mean"), lo.get("mean"), hi.get("mean")):
            line += f" (bagging {bag['mean']:.6f}, 95% CI {lo['mean']:.6f} .. {hi['mean']:.6f})"
        print(line)


def _score_in_process(args) -> int:
    from vmafxd.offline import score_files, resolve_models
    from vmafxd.scoring import parse_feature_spec

    if args.lane not in ("auto", "cpu"):
        print(f"vmafxctl: --in-process scores on the cpu lane only, not {args.lane}", file=sys.stderr)
        return EXIT_USAGE
    models = resolve_models(args.model)
    features = [parse_feature_spec(f) for f in args.feature]
    progress = _Progress(not args.quiet, _estimate_frames(args) if not args.quiet else None)
    try:
        report = score_files(
            args.reference, args.distorted, models, features,
            width=args.width, height=args.height, pixel_format=args.pixel_format,
            bitdepth=args.bitdepth, max_frames=args.frames, progress=progress,
        )
    finally:
        progress.done()
    if args.output:
        _write_log(args, report)
    if not report.frames:
        print("vmafxctl: no frames were scored", file=sys.stderr)
        return EXIT_FAILURE
    _print_models([ms.name for ms in models], report.pooled)
    return EXIT_OK


def _daemon_candidates(args) -> list[tuple[str, bool]]:
    """(socket path, must answer) in the order score tries them; empty: start a private daemon."""
    if args.socket:
        return [(args.socket, True)]
    if args.private:
        return []
    env = os.environ.get("VMAFX_SOCKET")
    out = [(env, False)] if env else []
    if os.path.exists(DEFAULT_SOCKET) and DEFAULT_SOCKET != env:
        out.append((DEFAULT_SOCKET, False))
    return out


def _score_remote(args, socket_path: str, progress: "_Progress"):
    import trio

    from .remote_score import score_through_daemon

    return trio.run(lambda: score_through_daemon(
        socket_path, args.reference, args.distorted, models=args.model, features=args.feature, lane=args.lane,
        width=args.width, height=args.height, pixel_format=args.pixel_format, bitdepth=args.bitdepth,
        max_frames=args.frames, progress=progress))


def _cmd_score(args) -> int:
    if args.in_process:
        return _score_in_process(args)
    from .exceptions import DaemonUnavailable, VmafxError, describe
    from .private_daemon import PrivateDaemon, PrivateDaemonError

    progress = _Progress(not args.quiet, _estimate_frames(args) if not args.quiet else None)
    report = None
    try:
        for path, must_answer in _daemon_candidates(args):
            try:
                report = _score_remote(args, path, progress)
                break
            except DaemonUnavailable as e:
                if must_answer:
                    line, status = describe(e)
                    print(f"vmafxctl: {line}", file=sys.stderr)
                    return status
        if report is None:
            daemon = PrivateDaemon(lane=args.lane)
            try:
                report = _score_remote(args, daemon.start(), progress)
            except PrivateDaemonError as e:
                line, status = describe(e)
                print(f"vmafxctl: {line}", file=sys.stderr)
                return status
            finally:
                rc = daemon.stop()
                if rc:
                    last = daemon.final_log.strip().splitlines()[-1:]
                    print(f"vmafxctl: the private vmafxd exited with status {rc}"
                          + (f"; its log ends: {last[0]}" if last else ""), file=sys.stderr)
    except VmafxError as e:
        line, status = describe(e)
        print(f"vmafxctl: {line}", file=sys.stderr)
        return status
    finally:
        progress.done()
    for r in report.failed:
        print(f"vmafxctl: frame {r.index}: {r.error}", file=sys.stderr)
    if not report.frames:
        print("vmafxctl: no frames were scored", file=sys.stderr)
        return EXIT_FAILURE
    if args.output:
        _write_log(args, report)
    _print_models(report.models, report.pooled)
    return EXIT_FAILURE if report.failed else EXIT_OK


def _query(args, what: str):
    from .blocking import BlockingClient
    from .defaults import default_socket_path

    with BlockingClient.connect(args.socket or default_socket_path(), name="vmafxctl", timeout=10) as client:
        if what == "status":
            return client.info, client.status(timeout=10)
        return client.info, client.list_sessions(timeout=10)


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        return o.hex()
    return str(o)


def _cmd_status(args) -> int:
    import json

    from .exceptions import VmafxError
    from .status_text import format_status

    try:
        info, status = _query(args, "status")
    except (VmafxError, TimeoutError) as e:
        print(f"vmafxctl: {e}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True, default=_json_default))
    else:
        sys.stdout.write(format_status(status, info))
    return EXIT_OK


def _cmd_sessions(args) -> int:
    import json

    from .exceptions import VmafxError
    from .status_text import format_sessions

    try:
        _info, sessions = _query(args, "sessions")
    except (VmafxError, TimeoutError) as e:
        print(f"vmafxctl: {e}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(sessions, indent=2, sort_keys=True, default=_json_default))
    else:
        sys.stdout.write(format_sessions(sessions))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on a usage error
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (ValueError, OSError) as e:
        print(f"vmafxctl: {e}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
