"""Who may connect, and how much each user may hold: peer credentials, per-uid accounts, budgets.

dbus-daemon is the model: it decides by the peer's credentials, caps
connections per user, and sizes its own fd limit from its connection
limits.  Here:

* :func:`peer_creds` reads ``SO_PEERCRED`` (pid, uid, gid) at accept and the
  peer's supplementary groups (``/proc/<pid>/status``'s ``Groups:``, else
  ``getgrouplist`` of the uid's name).
* :class:`Authorizer` decides from them (config ``allow_users``,
  ``allow_groups``; ``admin_groups`` see every user's sessions).  Root and
  the daemon's own uid are always allowed: a private daemon serves its user.
* :class:`Admission` holds one :class:`UidAccount` per connected uid and the
  daemon's totals; every cap of :class:`~vmafx.protocol.Limits` with
  ``_per_uid`` or ``_total`` in its name is checked here.  A client handler
  reports what it holds after each change (:meth:`Admission.sync`), so the
  accounts are exact sums without hooks in the ledger.
* :func:`fd_needs` / :func:`ensure_fd_limit` derive the fds the limits can
  make the daemon hold, and raise ``RLIMIT_NOFILE`` or refuse to start.
* :class:`FdReserve` keeps one spare fd so that a client can be told
  ``E_NOFD`` even when the process is out of fds.
* :class:`RateLimitedLog` bounds the log lines one client can cause.

Refusals are :class:`~vmafx.protocol.RemoteProtocolError` with the code the
protocol documents (docs/protocol.md): ``E_LIMIT`` and ``E_PERM`` at accept
(the connection then closes), ``E_NOMEM`` for sessions, buffers, frames and
bytes (the message names the limit), ``E_NOFD`` for fds.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import resource
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Iterable

from vmafx.protocol import ErrorCode, Limits, RemoteProtocolError

__all__ = [
    "PeerCreds", "peer_creds", "Authorizer", "UidAccount", "Admission", "Holdings", "fd_needs",
    "ensure_fd_limit", "FdLimitError", "FdReserve", "RateLimitedLog", "fd_headroom", "FDS_PER_BUFFER",
    "FDS_PER_FRAME", "FD_RESERVE", "human_bytes",
]

log = logging.getLogger("vmafxd.admission")


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


# ----------------------------------------------------------------------------- credentials


@dataclass(frozen=True)
class PeerCreds:
    pid: int
    uid: int
    gid: int
    #: the primary and supplementary groups
    groups: frozenset[int] = frozenset()

    def __str__(self) -> str:
        return f"pid {self.pid}, uid {self.uid}, gid {self.gid}"


def _proc_groups(pid: int) -> set[int] | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return {int(g) for g in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return None


def _user_groups(uid: int, gid: int) -> set[int]:
    try:
        return set(os.getgrouplist(pwd.getpwuid(uid).pw_name, gid))
    except (KeyError, OSError):
        return {gid}


def peer_creds(sock) -> PeerCreds | None:
    """The connected peer's credentials (None when the socket cannot tell)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid, uid, gid = struct.unpack("3i", raw)
    # /proc/<pid> names the process that connected: it cannot have exited and
    # been replaced yet while reading it right at accept is the normal case;
    # if it has gone, the uid's configured groups stand in.
    groups = _proc_groups(pid) if pid > 0 else None
    if groups is None:
        groups = _user_groups(uid, gid)
    return PeerCreds(pid, uid, gid, frozenset(groups | {gid}))


def _ids(names: Iterable[str | int], lookup, what: str) -> set[int]:
    out: set[int] = set()
    for n in names:
        if isinstance(n, int) or (isinstance(n, str) and n.isdigit()):
            out.add(int(n))
            continue
        try:
            out.add(lookup(n))
        except KeyError:
            # A configured name that does not exist (no "vmafx" group on a
            # developer's machine) allows nobody; it is not an error.
            log.info("%s %r does not exist on this system; it allows nobody", what, n)
    return out


class Authorizer:
    """Decides from a peer's credentials: may it connect, may it see every user's sessions."""

    def __init__(self, allow_users: Iterable[str | int] = ("root",), allow_groups: Iterable[str | int] = ("vmafx",),
                 admin_groups: Iterable[str | int] = (), own_uid: int | None = None):
        self.own_uid = os.geteuid() if own_uid is None else own_uid
        self.users = _ids(allow_users, lambda n: pwd.getpwnam(n).pw_uid, "user") | {0, self.own_uid}
        self.groups = _ids(allow_groups, lambda n: grp.getgrnam(n).gr_gid, "group")
        self.admin_groups = _ids(admin_groups, lambda n: grp.getgrnam(n).gr_gid, "group")

    def refusal(self, creds: PeerCreds | None) -> RemoteProtocolError | None:
        """None when ``creds`` may connect, else the ``E_PERM`` to send."""
        if creds is None:
            return RemoteProtocolError(ErrorCode.E_PERM, "credentials",
                                       "the daemon cannot read the peer's credentials (SO_PEERCRED)")
        if creds.uid in self.users or creds.groups & self.groups:
            return None
        return RemoteProtocolError(
            ErrorCode.E_PERM, "uid",
            f"uid {creds.uid} may not use this daemon: it allows the users {sorted(self.users)} and the "
            f"groups {sorted(self.groups)} (allow_users, allow_groups; add the user to a group allowed)")

    def is_admin(self, creds: PeerCreds | None) -> bool:
        """Root, the daemon's own user and members of ``admin_groups`` see every user's sessions."""
        if creds is None:
            return False
        return creds.uid in (0, self.own_uid) or bool(creds.groups & self.admin_groups)


# ----------------------------------------------------------------------------- accounts


@dataclass(slots=True)
class Holdings:
    """What one client holds now (it reports this after each change)."""

    sessions: int = 0
    buffers: int = 0
    frames: int = 0
    bytes: int = 0


@dataclass
class UidAccount:
    uid: int
    clients: int = 0
    held: Holdings = field(default_factory=Holdings)


def _nomem(field_name: str, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.E_NOMEM, field_name, message)


class Admission:
    """The per-uid accounts and the daemon's totals, and every check against them."""

    def __init__(self, limits: Limits, lane_budget: int | None = None):
        self.limits = limits
        #: the daemon's byte budget for frames in flight: the configured total, lowered to
        #: what the lane says its memory holds (a GPU's free device memory)
        self.bytes_total_limit = limits.max_bytes_in_flight_total
        self.limit_name = "limits.max_bytes_in_flight_total"
        if lane_budget is not None and lane_budget < self.bytes_total_limit:
            self.bytes_total_limit = max(0, lane_budget)
            self.limit_name = "the lane's memory budget"
        self.accounts: dict[int, UidAccount] = {}
        self.clients = 0
        self.total = Holdings()

    def account(self, uid: int) -> UidAccount:
        acc = self.accounts.get(uid)
        if acc is None:
            acc = self.accounts[uid] = UidAccount(uid)
        return acc

    # -- connections ------------------------------------------------------------------

    def admit(self, uid: int) -> RemoteProtocolError | None:
        """None when a connection of ``uid`` may be served, else the ``E_LIMIT`` to send."""
        lim = self.limits
        if self.clients >= lim.max_clients:
            return RemoteProtocolError(ErrorCode.E_LIMIT, "limits.max_clients",
                                       f"the daemon serves {lim.max_clients} clients (max_clients); try again later")
        acc = self.accounts.get(uid)
        if acc is not None and acc.clients >= lim.max_clients_per_uid:
            return RemoteProtocolError(
                ErrorCode.E_LIMIT, "limits.max_clients_per_uid",
                f"uid {uid} already has {acc.clients} connections (max_clients_per_uid = "
                f"{lim.max_clients_per_uid}); close one or try again later")
        return None

    def connected(self, uid: int) -> None:
        self.account(uid).clients += 1
        self.clients += 1

    def disconnected(self, uid: int, held: Holdings) -> None:
        """The client is gone: what it held goes with it."""
        self.sync(uid, held, Holdings())
        acc = self.account(uid)
        acc.clients -= 1
        self.clients -= 1
        if acc.clients <= 0 and acc.held == Holdings():
            del self.accounts[uid]

    # -- holdings -----------------------------------------------------------------------

    def sync(self, uid: int, was: Holdings, now: Holdings) -> None:
        """A client of ``uid`` went from holding ``was`` to ``now``."""
        acc = self.account(uid)
        sessions, buffers = now.sessions - was.sessions, now.buffers - was.buffers
        frames, nbytes = now.frames - was.frames, now.bytes - was.bytes
        for held in (acc.held, self.total):
            held.sessions += sessions
            held.buffers += buffers
            held.frames += frames
            held.bytes += nbytes

    def count_frames(self, uid: int, frames: int, nbytes: int) -> None:
        """A client of ``uid`` holds ``frames`` more frames in flight, of ``nbytes`` (negative: fewer).

        :meth:`sync`'s change of frames alone, without two Holdings: it runs twice a frame."""
        acc = self.account(uid)
        held, total = acc.held, self.total
        held.frames += frames
        held.bytes += nbytes
        total.frames += frames
        total.bytes += nbytes

    def check_session(self, uid: int) -> None:
        acc = self.account(uid)
        if acc.held.sessions >= self.limits.max_sessions_per_uid:
            raise _nomem("session", f"uid {uid} already has {acc.held.sessions} sessions "
                                    f"(limits.max_sessions_per_uid = {self.limits.max_sessions_per_uid})")

    def check_buffer(self, uid: int) -> None:
        acc = self.account(uid)
        if acc.held.buffers >= self.limits.max_buffers_per_uid:
            raise _nomem("buffer", f"uid {uid} already has {acc.held.buffers} buffers "
                                   f"(limits.max_buffers_per_uid = {self.limits.max_buffers_per_uid})")
        if self.total.buffers >= self.limits.max_buffers_total:
            raise _nomem("buffer", f"the daemon holds {self.total.buffers} buffers "
                                   f"(limits.max_buffers_total = {self.limits.max_buffers_total}); try again later")

    def check_frame_cost(self, cost: int, geometry_text: str) -> None:
        """At open_session: one frame of this geometry and plan must fit every byte budget."""
        lim = self.limits
        for limit, name in ((lim.max_frame_bytes, "limits.max_frame_bytes"),
                            (lim.max_bytes_in_flight_per_client, "limits.max_bytes_in_flight_per_client"),
                            (self.bytes_total_limit, self.limit_name)):
            if cost > limit:
                raise _nomem("width", f"a {geometry_text} frame with this session's features needs "
                                      f"{human_bytes(cost)} to score, over {name} ({human_bytes(limit)})")

    def frames_that_fit(self, cost: int) -> int:
        """Frames of ``cost`` bytes one client may have in flight at once by its budgets (the
        frame count, and the bytes per client and in all); at least one (check_frame_cost let
        one in).  What ``session_opened`` tells a client that asked for session budgets."""
        lim = self.limits
        fit = min(lim.max_bytes_in_flight_per_client, self.bytes_total_limit) // max(1, cost)
        return max(1, min(lim.max_frames_in_flight, fit))

    def frames_fit(self, uid: int, client_bytes: int, cost: int, count: int) -> bool:
        """:meth:`check_frame` would let each of ``count`` frames of ``cost`` bytes in, one after the
        other, each counted once in (a submit_many's frames checked in one step)."""
        lim = self.limits
        acc = self.accounts.get(uid)
        held = acc.held.frames if acc is not None else 0
        total = self.total
        return (held + count <= lim.max_frames_in_flight_per_uid
                and total.frames + count <= lim.max_frames_in_flight_total
                and client_bytes + count * cost <= lim.max_bytes_in_flight_per_client
                and total.bytes + count * cost <= self.bytes_total_limit)

    def check_frame(self, uid: int, client_bytes: int, cost: int) -> None:
        """At submit: one more frame of ``cost`` bytes for a client holding ``client_bytes``."""
        lim = self.limits
        acc = self.account(uid)
        if acc.held.frames >= lim.max_frames_in_flight_per_uid:
            raise _nomem("index", f"uid {uid} has {acc.held.frames} frames in flight "
                                  f"(limits.max_frames_in_flight_per_uid); wait for outcomes")
        if self.total.frames >= lim.max_frames_in_flight_total:
            raise _nomem("index", f"the daemon has {self.total.frames} frames in flight "
                                  f"(limits.max_frames_in_flight_total); wait for outcomes")
        if client_bytes + cost > lim.max_bytes_in_flight_per_client:
            raise _nomem("index", f"this client's frames in flight hold {human_bytes(client_bytes)}; one more "
                                  f"({human_bytes(cost)}) exceeds limits.max_bytes_in_flight_per_client "
                                  f"({human_bytes(lim.max_bytes_in_flight_per_client)}); wait for outcomes")
        if self.total.bytes + cost > self.bytes_total_limit:
            raise _nomem("index", f"the daemon's frames in flight hold {human_bytes(self.total.bytes)}; one more "
                                  f"({human_bytes(cost)}) exceeds {self.limit_name} "
                                  f"({human_bytes(self.bytes_total_limit)}); wait for outcomes")


# ----------------------------------------------------------------------------- fds

#: fds a registered buffer may keep: the daemon's dup of each plane's dma-buf (a memfd keeps none)
FDS_PER_BUFFER = 3
#: fds a frame in flight may keep: its two acquire fences while waited on
FDS_PER_FRAME = 2
#: score_files jobs taken and not answered (running or waiting), the daemon's and a client's most;
#: each holds its two files' fds
MAX_FILE_JOBS, MAX_FILE_JOBS_PER_CLIENT, FDS_PER_FILE_JOB = 64, 4, 2
#: what the daemon keeps for itself: the listener, the log, the lane's files, the spare fd,
#: the GPU runtime's own (driver nodes, its threads' eventfds), and the clients being refused
FD_RESERVE = 256


class FdLimitError(Exception):
    """The daemon's limits need more fds than RLIMIT_NOFILE's hard limit allows."""


def fd_needs(limits: Limits) -> int:
    """The most fds the limits let clients make the daemon hold, plus the reserve."""
    buffers = min(limits.max_buffers_total, limits.max_clients * limits.max_buffers_per_client)
    frames = min(limits.max_frames_in_flight_total, limits.max_clients * limits.max_frames_in_flight)
    # Each client's socket, and a packet's fds while it is being handled.
    per_client = 1 + limits.max_fds_per_message
    return (limits.max_clients * per_client + buffers * FDS_PER_BUFFER + frames * FDS_PER_FRAME
            + MAX_FILE_JOBS * FDS_PER_FILE_JOB + FD_RESERVE)


def ensure_fd_limit(limits: Limits) -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to what the limits need (up to the hard limit).

    Returns ``(need, soft)``.  Raises :class:`FdLimitError` with one line
    naming the limits when even the hard limit is too low.
    """
    need = fd_needs(limits)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return need, soft
    if hard != resource.RLIM_INFINITY and hard < need:
        raise FdLimitError(
            f"the limits need {need} file descriptors (max_clients={limits.max_clients} x (1 + "
            f"max_fds_per_message={limits.max_fds_per_message}) + min(max_buffers_total={limits.max_buffers_total}, "
            f"max_clients x max_buffers_per_client) x {FDS_PER_BUFFER} + min(max_frames_in_flight_total="
            f"{limits.max_frames_in_flight_total}, max_clients x max_frames_in_flight) x {FDS_PER_FRAME} + "
            f"{MAX_FILE_JOBS} file jobs x {FDS_PER_FILE_JOB} + {FD_RESERVE} reserved) but RLIMIT_NOFILE's hard "
            f"limit is {hard}: lower those limits or raise LimitNOFILE=")
    # Raise to the hard limit (as servers do: fds beyond the need cost nothing).
    target = hard if hard != resource.RLIM_INFINITY else max(need, 1 << 20)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return need, target


def fd_headroom() -> int:
    """Fds this process may still open (the soft limit minus those open)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0  # no fd even to list them
    return soft - used


class FdReserve:
    """One spare fd, given up to accept (and answer) a client when the process has no other.

    The classic answer to EMFILE on accept (libev, nginx): close the spare,
    accept, tell the client ``E_NOFD``, close it, take the spare again.
    """

    def __init__(self) -> None:
        self.fd: int | None = None
        self.take()

    def take(self) -> bool:
        if self.fd is None:
            try:
                self.fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return False
        return True

    def release(self) -> bool:
        if self.fd is None:
            return False
        os.close(self.fd)
        self.fd = None
        return True

    def close(self) -> None:
        self.release()


# ----------------------------------------------------------------------------- logs


class RateLimitedLog:
    """At most ``burst`` lines per ``window_s`` for one client; the rest are counted.

    The first line after a window in which lines were suppressed says how
    many, so the log keeps the count without one line per fuzzed packet.
    """

    def __init__(self, logger: logging.Logger, label: str, burst: int = 10, window_s: float = 10.0,
                 clock=time.monotonic):
        self.logger = logger
        self.label = label
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._start = clock()
        self._lines = 0
        #: lines suppressed in the current window, and in all
        self.suppressed = 0
        self.suppressed_total = 0

    def log(self, level: int, fmt: str, *args, exc_info=None) -> bool:
        if not self.logger.isEnabledFor(level):
            # A line the logger would drop is not counted either: otherwise a daemon at
            # --log-level warning would log "N similar lines suppressed" for every
            # client whose refusals are only logged at info or debug.
            return False
        now = self._clock()
        if now - self._start >= self.window_s:
            self.flush()
            self._start, self._lines = now, 0
        if self._lines >= self.burst:
            self.suppressed += 1
            self.suppressed_total += 1
            return False
        self._lines += 1
        self.logger.log(level, fmt, *args, exc_info=exc_info)
        return True

    def flush(self) -> None:
        """Report the lines suppressed so far (at the end of a window, or when the client goes)."""
        if self.suppressed:
            self.logger.warning("client %s: %d similar log lines suppressed in %.0f s", self.label,
                                self.suppressed, self._clock() - self._start)
            self.suppressed = 0
