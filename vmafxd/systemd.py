"""systemd integration: socket activation, sd_notify, the watchdog, journald logging.

systemd-python is an optional extra (``pip install vmafxd[systemd]``): every
function here works without it, speaking the documented protocols itself.

* Socket activation (``sd_listen_fds(3)``): ``LISTEN_PID`` must be our pid;
  ``LISTEN_FDS`` fds start at 3; ``LISTEN_FDNAMES`` names them (``vmafxd``
  from ``FileDescriptorName=`` or ``systemd-socket-activate --fdname``).  The
  variables are removed from the environment once read, so a child process
  never believes they are meant for it.
* sd_notify (``sd_notify(3)``): datagrams such as ``READY=1``, ``STATUS=...``,
  ``WATCHDOG=1``, ``STOPPING=1`` to ``$NOTIFY_SOCKET`` (a path, or ``@name``
  for the abstract namespace).
* The watchdog: with ``WATCHDOG_USEC`` set (and ``WATCHDOG_PID`` unset or
  ours) ``WATCHDOG=1`` goes out every half period, from a trio task -- so a
  wedged event loop stops the pings and systemd restarts us.
* Logging: journald's native protocol through ``systemd.journal.JournalHandler``
  when ``JOURNAL_STREAM`` says stderr is the journal and systemd-python is
  importable; otherwise stderr, with ``<N>`` priority prefixes when stderr is
  the journal (journald reads them as the syslog level).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass

import trio

__all__ = [
    "ListenFd", "listen_fds", "Notifier", "setup_logging", "HAVE_SYSTEMD_PYTHON", "SD_LISTEN_FDS_START",
]

SD_LISTEN_FDS_START = 3

try:  # optional extra
    import systemd.daemon as _sd_daemon
except ImportError:  # pragma: no cover - depends on the environment
    _sd_daemon = None
try:
    import systemd.journal as _sd_journal
except ImportError:  # pragma: no cover
    _sd_journal = None

HAVE_SYSTEMD_PYTHON = _sd_daemon is not None

log = logging.getLogger("vmafxd.systemd")


@dataclass(frozen=True)
class ListenFd:
    fd: int
    name: str


def _unset_listen_env() -> None:
    for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(k, None)


def listen_fds(*, use_library: bool = True) -> list[ListenFd]:
    """The sockets systemd passed us (empty when not socket-activated)."""
    if use_library and _sd_daemon is not None and hasattr(_sd_daemon, "listen_fds_with_names"):
        try:
            named = _sd_daemon.listen_fds_with_names(unset_environment=True)
        except Exception:  # a malformed environment: treat as not activated, say so
            log.warning("systemd.daemon.listen_fds_with_names failed; ignoring LISTEN_FDS", exc_info=True)
            _unset_listen_env()
            return []
        # systemd-python returns {fd: name} (names default to "unknown").
        return [ListenFd(fd, name or "unknown") for fd, name in sorted(dict(named).items())]
    pid = os.environ.get("LISTEN_PID")
    count = os.environ.get("LISTEN_FDS")
    names = os.environ.get("LISTEN_FDNAMES")
    _unset_listen_env()
    if not pid or not count:
        return []
    try:
        if int(pid) != os.getpid():
            return []
        n = int(count)
    except ValueError:
        log.warning("ignoring malformed LISTEN_PID/LISTEN_FDS")
        return []
    name_list = names.split(":") if names else []
    out = []
    for i in range(max(0, n)):
        fd = SD_LISTEN_FDS_START + i
        os.set_inheritable(fd, False)  # sd_listen_fds sets FD_CLOEXEC as well
        out.append(ListenFd(fd, name_list[i] if i < len(name_list) else "unknown"))
    return out


class Notifier:
    """sd_notify, through systemd-python when present, else a datagram to ``$NOTIFY_SOCKET``."""

    def __init__(self, *, use_library: bool = True):
        self.address = os.environ.get("NOTIFY_SOCKET") or None
        self._use_library = use_library and _sd_daemon is not None
        self.watchdog_interval: float | None = None
        usec = os.environ.get("WATCHDOG_USEC")
        wpid = os.environ.get("WATCHDOG_PID")
        if usec:
            try:
                if not wpid or int(wpid) == os.getpid():
                    self.watchdog_interval = int(usec) / 1e6 / 2
            except ValueError:
                log.warning("ignoring malformed WATCHDOG_USEC/WATCHDOG_PID")
        # Children (a private daemon's own children, if any) must not notify for us.
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
            os.environ.pop(k, None)
        self._last_status: str | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, state: str) -> bool:
        if not self.address:
            return False
        if self._use_library:
            try:
                # systemd-python reads $NOTIFY_SOCKET itself; we removed it from the
                # environment, so hand it back for the call.
                os.environ["NOTIFY_SOCKET"] = self.address
                return bool(_sd_daemon.notify(state))
            finally:
                os.environ.pop("NOTIFY_SOCKET", None)
        return self._send(state)

    def _send(self, state: str) -> bool:
        addr = self.address
        assert addr is not None
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(state.encode(), addr)
            return True
        except OSError as e:
            log.debug("sd_notify %r failed: %s", state, e.strerror)
            return False

    def ready(self, status: str) -> None:
        self.notify(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")
        self._last_status = status

    def status(self, status: str) -> None:
        if status != self._last_status:
            self._last_status = status
            self.notify(f"STATUS={status}")

    def stopping(self, status: str = "stopping") -> None:
        self.notify(f"STOPPING=1\nSTATUS={status}")

    async def watchdog(self) -> None:
        """Ping every half watchdog period (returns at once when there is no watchdog)."""
        if self.watchdog_interval is None or not self.enabled:
            return
        while True:
            self.notify("WATCHDOG=1")
            await trio.sleep(self.watchdog_interval)


_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class _PrefixFormatter(logging.Formatter):
    """``<N>`` syslog-priority prefixes, which journald understands on a stream."""

    def format(self, record: logging.LogRecord) -> str:
        prio = _PRIORITY.get(record.levelno, 6)
        return "\n".join(f"<{prio}>{line}" for line in super().format(record).splitlines() or [""])


def _stderr_is_journal() -> bool:
    stream = os.environ.get("JOURNAL_STREAM")
    if not stream:
        return False
    try:
        dev, ino = (int(x) for x in stream.split(":"))
        st = os.fstat(sys.stderr.fileno())
    except (ValueError, OSError):
        return False
    return st.st_dev == dev and st.st_ino == ino


def setup_logging(level: str, *, use_library: bool = True) -> str:
    """Configure the root logger; returns where logs go ("journal", "stderr+priority", "stderr")."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    journal = _stderr_is_journal()
    if journal and use_library and _sd_journal is not None:
        root.addHandler(_sd_journal.JournalHandler(SYSLOG_IDENTIFIER="vmafxd"))
        return "journal"
    handler = logging.StreamHandler(sys.stderr)
    if journal:
        handler.setFormatter(_PrefixFormatter("%(name)s: %(message)s"))
        where = "stderr+priority"
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s vmafxd[%(process)d] %(levelname)s %(name)s: %(message)s"))
        where = "stderr"
    root.addHandler(handler)
    return where
