"""``vmafxd``: the daemon's command line.

    vmafxd [--socket PATH] [--lane auto|cpu|cuda|hip] [--lane-process] [--config FILE] [--cpu-workers N]
           [--cpu-engine E]
           [--log-level LEVEL] [--fence-timeout-ms MS] [--limit NAME=VALUE ...]
           [--shutdown-timeout S] [--files-keep S] [--ready-fd N]

Listens on ``--socket`` (default /run/vmafx/vmafxd.sock; the parent directory
is created, a stale socket left by a dead daemon is removed, the socket gets
mode 0660) unless systemd hands over a listening socket (socket activation),
which is then used instead.  ``--ready-fd N`` writes ``READY\\n`` to fd N and
closes it once the daemon listens (how ``vmafxctl`` starts a private daemon);
under systemd, ``READY=1`` goes to ``$NOTIFY_SOCKET``.

SIGTERM or SIGINT: graceful shutdown (see :mod:`vmafxd.server`), exit 0.  A
second signal stops at once (exit 1).  Exit status 1: a runtime failure (the
socket cannot be made, the server failed); 2: a usage or configuration error
(including a lane that is not available).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import stat
import sys
from typing import Sequence

import trio

from . import __version__, memory_debug
from .admission import FdLimitError, ensure_fd_limit
from .config import LOG_LEVELS, Config, ConfigError, load_config
from .lanes import LaneUnavailable, create_lane
from .lanes.device import LaneServices
from .reaper import PendingReleases, ReleaseReaper
from .server import Server
from .session import early_release_planted
from .systemd import Notifier, listen_fds, setup_logging

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("vmafxd")


class StartupError(Exception):
    """The daemon cannot start; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE):
        super().__init__(message)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vmafxd", description="VMAF as a system service: the scoring daemon.")
    p.add_argument("--socket", help="listening socket path (default /run/vmafx/vmafxd.sock); ignored when "
                                    "systemd passes a socket")
    p.add_argument("--lane", choices=("auto", "cpu", "cuda", "hip", "emu"),
                   help="where to score (default auto: cuda, then hip, then cpu; emu is the GPU lane on the "
                        "CPU emulator of its kernels, for tests)")
    p.add_argument("--config", help="TOML configuration (default /etc/vmafx/vmafxd.toml if it exists)")
    p.add_argument("--cpu-workers", type=int, help="CPU lane worker threads (default min(cpus, 8))")
    p.add_argument("--cpu-engine", choices=("auto", "compiled", "numpy"),
                   help="the CPU lane's scorer (default auto: the compiled kernels where they are faster, "
                        "when a host C++ compiler is found; numpy: the twins only)")
    p.add_argument("--gpu-batch", type=_batch_arg, metavar="N|auto",
                   help="most frames a GPU lane scores in one batch (default auto: 32 at 1080p and above, "
                        "up to 128 for smaller pictures)")
    p.add_argument("--gpu-devices", help="GPU ordinals to use, e.g. 0,1 (default all)")
    p.add_argument("--lane-process", action=argparse.BooleanOptionalAction, default=None,
                   help="run a GPU lane's device work in one worker process per device (default off; "
                        "config key lane_process)")
    p.add_argument("--log-level", choices=LOG_LEVELS, help="default info")
    p.add_argument("--fence-timeout-ms", type=int, help="bounded wait on an acquire fence (default 5000)")
    p.add_argument("--limit", action="append", metavar="NAME=VALUE",
                   help="override a protocol limit (max_clients, max_frames_in_flight, ...); repeatable")
    p.add_argument("--shutdown-timeout", type=float, metavar="S",
                   help="seconds in-flight frames may take after SIGTERM (default 10)")
    p.add_argument("--files-keep", type=float, metavar="S",
                   help="seconds a GPU keeps score_files' kernels and pinned memory ready unused (default 60; "
                        "0: freed after each job)")
    p.add_argument("--ready-fd", type=int, metavar="N", help="write READY to fd N and close it once listening")
    p.add_argument("--version", action="version", version=f"vmafxd {__version__}")
    return p


# ---------------------------------------------------------------------------- the socket


def _activated_socket() -> socket.socket | None:
    fds = listen_fds()
    if not fds:
        return None
    chosen = next((f for f in fds if f.name == "vmafxd"), fds[0])
    for f in fds:
        if f is not chosen:
            log.warning("closing unexpected activation fd %d (%s)", f.fd, f.name)
            os.close(f.fd)
    try:
        sock = socket.socket(fileno=chosen.fd)
    except OSError as e:
        raise StartupError(f"socket activation: fd {chosen.fd} is not a socket ({e.strerror})", EXIT_USAGE) from None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_SEQPACKET:
        sock.close()
        raise StartupError(f"socket activation: fd {chosen.fd} ({chosen.name}) is not a SOCK_SEQPACKET unix "
                           f"socket (use ListenSequentialPacket=)", EXIT_USAGE)
    sock.setblocking(False)
    log.info("using the socket systemd passed (fd %d, %s)", chosen.fd, chosen.name)
    return sock


def _remove_stale(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise StartupError(f"{path} exists and is not a socket; not touching it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        # Nobody listens: a dead daemon's socket file.
        log.info("removing the stale socket %s", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    except OSError as e:
        raise StartupError(f"cannot probe the existing socket {path}: {e.strerror}") from None
    finally:
        probe.close()
    raise StartupError(f"another daemon is listening on {path}")


def _bound_socket(path: str, mode: int) -> tuple[socket.socket, tuple[int, int]]:
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, mode=0o755, exist_ok=True)
    except OSError as e:
        raise StartupError(f"cannot create {parent}: {e.strerror}") from None
    _remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    # The socket file is created with the umask's mode: make it ``mode`` from
    # the start, so no other user can connect before the chmod.
    old = os.umask(0o777 & ~mode)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise StartupError(f"cannot bind {path}: {e.strerror}") from None
    finally:
        os.umask(old)
    try:
        os.chmod(path, mode)
        st = os.stat(path)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise StartupError(f"cannot listen on {path}: {e.strerror}") from None
    sock.setblocking(False)
    return sock, (st.st_dev, st.st_ino)


def _unlink_if_ours(path: str, ident: tuple[int, int]) -> None:
    try:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) == ident:
            os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------------------- running


async def _serve_then_cancel(server: Server, scope: trio.CancelScope, *, task_status=trio.TASK_STATUS_IGNORED):
    try:
        await server.serve(task_status=task_status)
    finally:
        scope.cancel()


async def _status_loop(server: Server, notifier: Notifier) -> None:
    """STATUS= on every change of clients or sessions (at most 5 a second), and every 2 s for the counts."""
    while True:
        notifier.status(server.status_line())
        await trio.sleep(0.2)
        with trio.move_on_after(1.8):
            await server.changed.wait()
        server.changed = trio.Event()


async def _run(config: Config, lane, sock: socket.socket, notifier: Notifier, ready_fd: int | None,
               pending: PendingReleases, reaper: ReleaseReaper) -> int:
    forced = False
    listener = trio.socket.from_stdlib_socket(sock)
    server = Server(config, lane, listener, pending, reaper)
    # Opened before READY, so a SIGTERM right after READY is a graceful stop.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(_serve_then_cancel, server, nursery.cancel_scope)
            log.info("listening (%s lane, %d workers); limits %s", lane.name,
                     len(lane.describe().get("devices", [])), config.limits)
            if ready_fd is not None:
                try:
                    os.write(ready_fd, b"READY\n")
                except OSError as e:
                    log.warning("--ready-fd %d: %s", ready_fd, e.strerror)
                finally:
                    os.close(ready_fd)
            notifier.ready(server.status_line())
            nursery.start_soon(notifier.watchdog)
            nursery.start_soon(_status_loop, server, notifier)
            async for signum in signals:
                if not server.stopping:
                    log.info("%s: shutting down", signal.Signals(signum).name)
                    notifier.stopping("stopping: finishing in-flight frames")
                    server.request_stop()
                else:
                    log.warning("%s again: stopping at once", signal.Signals(signum).name)
                    forced = True
                    nursery.cancel_scope.cancel()
                    break
    return EXIT_FAILURE if forced else EXIT_OK


def _batch_arg(text: str) -> int | str:
    """``--gpu-batch``: a number of frames, or ``auto``; the range is the config's to check."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of frames or auto, got {text!r}") from None


def gil_switch_interval() -> None:
    """``$VMAFXD_GIL_SWITCH_MS``: CPython's switch interval (default 5 ms), how long a thread that
    wants the GIL waits before the running one is asked to let go; a benchmark knob (operations.md).
    A value that is not a positive number is ignored with a warning."""
    text = os.environ.get("VMAFXD_GIL_SWITCH_MS")
    if not text:
        return
    try:
        ms = float(text)
        if not 0 < ms <= 1000:
            raise ValueError
    except ValueError:
        log.warning("VMAFXD_GIL_SWITCH_MS=%r is not a number of milliseconds in (0, 1000]: ignored", text)
        return
    sys.setswitchinterval(ms / 1000)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = {
        "socket": args.socket, "lane": args.lane, "cpu_workers": args.cpu_workers,
        "cpu_engine": args.cpu_engine,
        "gpu_batch": args.gpu_batch, "gpu_devices": args.gpu_devices, "lane_process": args.lane_process,
        "log_level": args.log_level, "fence_timeout_ms": args.fence_timeout_ms, "limit": args.limit,
        "shutdown_timeout_s": args.shutdown_timeout, "files_keep_s": args.files_keep,
    }
    try:
        config = load_config(args.config, flags)
    except ConfigError as e:
        print(f"vmafxd: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.ready_fd is not None:
        try:
            os.fstat(args.ready_fd)
        except OSError:
            print(f"vmafxd: --ready-fd {args.ready_fd} is not an open fd", file=sys.stderr)
            return EXIT_USAGE
        os.set_inheritable(args.ready_fd, False)
    try:
        # Every registered dma-buf plane keeps an fd, every fence one while waited on: the limits
        # say how many the clients can make the daemon hold (vmafxd/admission.py).  Checked
        # before anything is logged, so a refusal is the one line below.
        need, soft = ensure_fd_limit(config.limits)
    except FdLimitError as e:
        print(f"vmafxd: {e}", file=sys.stderr)
        return EXIT_USAGE
    where = setup_logging(config.log_level)
    gil_switch_interval()
    log.info("vmafxd %s starting (config: %s; logging to %s)", __version__, config.source, where)
    if early_release_planted():
        log.warning("VMAFXD_TEST_EARLY_RELEASE=1: releasing frames BEFORE they are read (a test plant, R15)")

    log.info("file descriptors: the limits need %d, RLIMIT_NOFILE allows %d", need, soft)
    memory_debug.install()  # SIGUSR2: gc, malloc_trim and RSS in the log (VMAFXD_TRACEMALLOC: snapshots)
    notifier = Notifier()
    pending = PendingReleases()
    reaper = ReleaseReaper(pending)
    try:
        lane = create_lane(config.lane, config, LaneServices(wake_reaper=reaper.wake_threadsafe))
    except LaneUnavailable as e:
        print(f"vmafxd: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:
        print(f"vmafxd: lane {config.lane}: {e}", file=sys.stderr)
        return EXIT_USAGE

    created: tuple[str, tuple[int, int]] | None = None
    try:
        sock = _activated_socket()
        if sock is None:
            sock, ident = _bound_socket(config.socket, config.socket_mode)
            created = (config.socket, ident)
            log.info("listening on %s", config.socket)
    except StartupError as e:
        print(f"vmafxd: {e}", file=sys.stderr)
        return e.status
    try:
        return trio.run(_run, config, lane, sock, notifier, args.ready_fd, pending, reaper)
    except Exception:
        log.exception("the daemon failed")
        return EXIT_FAILURE
    finally:
        if created is not None:
            _unlink_if_ours(*created)
        notifier.stopping("stopped")


if __name__ == "__main__":
    sys.exit(main())
