"""vmafxctl: score video pairs, and talk to a running vmafxd.

    vmafxctl score --reference REF --distorted DIST [--model version=NAME | --model path=FILE ...]
                   [--feature NAME[=opt=val:...] ...] [--output FILE] [--json|--xml|--csv|--sub]
                   [--lane auto|cpu|cuda|hip] [--width W --height H --pixel-format FMT --bitdepth 8|10]

Prints the pooled (mean) score of each model; ``--output`` writes the
per-frame log in libvmaf's layout.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

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
    p.set_defaults(func=_cmd_score)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vmafxctl", description="VMAF scoring through vmafxd")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_score(sub)
    return parser


class _Progress:
    """A one-line progress bar on stderr, shown only on a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()

    def __call__(self, n: int) -> None:
        if self.enabled and n % 8 == 0:
            sys.stderr.write(f"\rscored {n} frames")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


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


def _cmd_score(args) -> int:
    from vmafxd.offline import score_files, resolve_models
    from vmafxd.scoring import parse_feature_spec

    if args.lane not in ("auto", "cpu"):
        print(f"vmafxctl: lane {args.lane} is not available in this build", file=sys.stderr)
        return EXIT_FAILURE
    models = resolve_models(args.model)
    features = [parse_feature_spec(f) for f in args.feature]
    progress = _Progress(not args.quiet)
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
    for ms in models:
        pooled = report.pooled.get(ms.name)
        if pooled:
            line = f"{ms.name}: {pooled['mean']:.6f}"
            bag = report.pooled.get(f"{ms.name}_bagging")
            if bag:
                lo = report.pooled[f"{ms.name}_ci_p95_lo"]["mean"]
                hi = report.pooled[f"{ms.name}_ci_p95_hi"]["mean"]
                line += f" (bagging {bag['mean']:.6f}, 95% CI {lo:.6f} .. {hi:.6f})"
            print(line)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (ValueError, OSError) as e:
        print(f"vmafxctl: {e}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
