"""vmafxctl: score video pairs the way libvmaf's ``vmaf`` does, and talk to a running vmafxd.

    vmafxctl score -r REF -d DIST [libvmaf's vmaf options ...] [--scale FLAGS] [--summary]
                   [--socket PATH | --private | --in-process] [--lane auto|cpu|cuda|hip]
    vmafxctl plot LOG... -o out.png|out.svg [--metric NAME]
    vmafxctl status [--socket PATH] [--json]
    vmafxctl sessions [--socket PATH] [--json]
    vmafx-vmaf ...      (= vmafxctl score ...: libvmaf's command lines with the program renamed)

``score`` takes every option of libvmaf 3.2's ``vmaf`` with the same spelling and meaning
(see score_args.py and docs/cli.md) and writes the same logs.  Subcommands are a table
(:data:`SUBCOMMANDS`): one entry (name, module, what it does) each; the module has
``add_arguments(parser)`` and ``run(args) -> int``.

Exit status: 0 success, 1 failure, 2 usage, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from .defaults import DEFAULT_SOCKET

__all__ = ["main", "vmaf_main", "build_parser", "SUBCOMMANDS"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _Score:
    help = "score a distorted video against a reference (libvmaf's vmaf options)"
    parser_kw = dict(add_help=False)

    @staticmethod
    def add_arguments(p):
        from .score_args import add_score_arguments

        add_score_arguments(p)

    @staticmethod
    def run(args):
        from .score_cmd import run_score

        return run_score(args)


class _Status:
    help = "what a running daemon is doing"

    @staticmethod
    def add_arguments(p):
        p.add_argument("--socket", "-s", metavar="PATH",
                       help=f"the daemon's socket (default $VMAFX_SOCKET or {DEFAULT_SOCKET})")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    run = staticmethod(lambda args: _cmd_query(args, "status"))


class _Sessions(_Status):
    help = "the open sessions of all clients of a running daemon"
    run = staticmethod(lambda args: _cmd_query(args, "sessions"))


#: subcommand name -> an object or "module:attribute" with help, add_arguments(parser), run(args);
#: a new subcommand is one line here
SUBCOMMANDS: dict = {
    "score": _Score,
    "plot": "vmafx.plot:COMMAND",
    "batch": "vmafx.batch.command:COMMAND",
    "status": _Status,
    "sessions": _Sessions,
}


def _resolve(entry):
    if isinstance(entry, str):
        mod, _, attr = entry.partition(":")
        return getattr(importlib.import_module(mod), attr)
    return entry


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vmafxctl", description="VMAF scoring through vmafxd", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, entry in SUBCOMMANDS.items():
        cmd = _resolve(entry)
        p = sub.add_parser(name, help=cmd.help, allow_abbrev=False, **getattr(cmd, "parser_kw", {}))
        cmd.add_arguments(p)
        p.set_defaults(func=cmd.run)
    return parser


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


def _cmd_query(args, what: str) -> int:
    """``vmafxctl status`` / ``sessions``: ask the daemon, print JSON or the text table."""
    import json

    from .exceptions import VmafxError
    from .status_text import format_sessions, format_status

    try:
        info, reply = _query(args, what)
    except (VmafxError, TimeoutError) as e:
        print(f"vmafxctl: {e}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(reply, indent=2, sort_keys=True, default=_json_default))
    else:
        sys.stdout.write(format_status(reply, info) if what == "status" else format_sessions(reply))
    return EXIT_OK


#: numpy's OpenBLAS starts a thread per core when numpy is imported, and each spins for about
#: 0.1 s before it sleeps (2.3 s of CPU a command on the H200's 16 cores); no command does BLAS
#: work, so unless the user says otherwise it gets one thread (so does a private daemon, which
#: inherits the environment)
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def _run(args) -> int:
    for key, value in BLAS_THREADS.items():  # before anything imports numpy
        os.environ.setdefault(key, value)
    from .score_cmd import CliError

    debug = getattr(args, "debug", False)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        sys.stderr.write("vmafxctl: interrupted\n")
        return EXIT_INTERRUPTED
    except CliError as e:
        sys.stderr.write(f"vmafxctl: {e}\n")
        return e.code
    except BaseExceptionGroup as eg:  # trio wraps what its tasks raised
        if eg.subgroup(KeyboardInterrupt) is not None:
            sys.stderr.write("vmafxctl: interrupted\n")
            return EXIT_INTERRUPTED
        if debug:
            raise
        first = eg
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        sys.stderr.write(f"vmafxctl: {_one_line(first)}\n")
        return EXIT_FAILURE
    except Exception as e:
        if debug:
            raise
        sys.stderr.write(f"vmafxctl: {_one_line(e)}\n")
        return EXIT_FAILURE


def _one_line(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    if isinstance(e, OSError) and e.filename:
        text = f"{e.filename}: {e.strerror}"
    if isinstance(e, MemoryError):
        text = "out of memory"
    return text.splitlines()[0] if text.strip() else type(e).__name__


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)  # exits 2 on a usage error
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return _run(args)


def vmaf_main(argv: Sequence[str] | None = None) -> int:
    """``vmafx-vmaf``: libvmaf's ``vmaf`` command line, unchanged (``vmafxctl score ...``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _Parser(prog="vmafx-vmaf", add_help=False, allow_abbrev=False,
                     description="libvmaf's vmaf command line, scored by vmafx")
    _Score.add_arguments(parser)
    parser.set_defaults(func=_Score.run)
    try:
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return _run(args)


def _vmaf_entry() -> None:
    sys.exit(vmaf_main())


if __name__ == "__main__":
    sys.exit(main())
