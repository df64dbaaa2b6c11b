"""The server: the listening socket, the clients, the shared tables, and shutdown.

Task tree (every task in a nursery)::

    Server.serve
    ├── services nursery
    │   ├── ReleaseReaper.run          the pending-release table's reaper (R4, R5)
    │   └── Lane.run                   the lane's device workers (threads run from tasks)
    └── clients nursery
        ├── Server._accept_loop        accepts connections, one ClientHandler each
        └── ClientHandler.run × N      one per client
            ├── OutgoingQueue.run      the client's sender
            └── Session.run × M        per session: fence waits, hand-over, close

What the server owns and shares with every client: the lane, the
:class:`~vmafxd.reaper.PendingReleases` table and its reaper, the limits and
the counters ``status`` reports.

Shutdown (:meth:`Server.request_stop`, on SIGTERM/SIGINT): stop accepting
and close the listener; tell every client to stop serving requests (what it
had queued is still read and answered ``E_SHUTDOWN``) and to close its
sessions, so in-flight frames finish and every session sends its
``session_closed``; frames still unanswered at the deadline
(``shutdown_timeout_s``) get ``E_SHUTDOWN`` frame_errors; every client gets
``goodbye`` and is closed; the reaper drains what the workers release
(bounded); then the lane's workers stop (bounded by one job each).
"""

from __future__ import annotations

import errno
import logging
import time
from typing import Any

import trio

from vmafx.protocol import (
    Error, ErrorCode, Limits, PROTOCOL_VERSION, RemoteProtocolError,
)
from vmafx.protocol.codec import encode
from vmafx.transport import TrioPacketChannel

from . import __version__
from .admission import Admission, Authorizer, FdReserve, PeerCreds, RateLimitedLog, peer_creds
from .file_jobs import FileJobs
from .client_handler import ClientHandler
from .config import Config
from .lanes.device import Lane
from .reaper import PendingReleases, ReleaseReaper
from .session import Session

__all__ = ["Server"]

log = logging.getLogger("vmafxd.server")

#: accept() errors that mean "out of resources for now", not "the listener is broken"
_TRANSIENT_ACCEPT_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED,
                            errno.EPROTO, errno.EINTR}


class Server:
    def __init__(self, config: Config, lane: Lane, listener: trio.socket.SocketType,
                 pending: PendingReleases, reaper: ReleaseReaper):
        self.config = config
        self.limits: Limits = config.limits
        self.lane = lane
        self.listener = listener
        self.pending = pending
        self.reaper = reaper
        self.server_name = f"vmafxd {__version__} ({lane.name} lane)"
        self.clients: dict[int, ClientHandler] = {}
        #: who may connect (SO_PEERCRED) and what each uid holds (vmafxd/admission.py)
        self.authorizer = Authorizer(config.allow_users, config.allow_groups, config.admin_groups)
        self.admission = Admission(self.limits, lane.memory_budget())
        #: files a client opened and sent, scored here (score_files: vmafxd/file_jobs.py)
        self.file_jobs = FileJobs(lane, config.cpu_engine, config.files_keep_s)
        #: a spare fd, so a client can be told E_NOFD when the process has no other
        self.fd_reserve = FdReserve()
        self._refusing = 0
        self._refusal_log = RateLimitedLog(log, "refused connections")
        self._next_client = 1
        self._next_session = 1
        self.frames_scored = 0
        self.frames_failed = 0
        self.started = time.monotonic()
        self._stop = trio.Event()
        #: set when clients or sessions come or go (the sd_notify STATUS loop waits on it)
        self.changed = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._clients_nursery: trio.Nursery | None = None
        self.stopping = False

    # ------------------------------------------------------------------ tasks

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as services:
            await services.start(self.reaper.run)
            await services.start(self.lane.run)
            services.start_soon(self.file_jobs.free_unused)
            async with trio.open_nursery() as clients:
                self._clients_nursery = clients
                clients.start_soon(self._accept_loop)
                clients.start_soon(self._keep_fd_reserve)
                task_status.started()
                await self._stop.wait()
                await self._shut_down(clients)
            # Clients are gone; let the reaper complete what the workers still
            # release and free the imports (bounded; woken by its passes), then stop.
            await self.reaper.drain(2.0)
            await self.file_jobs.drain(5.0)
            services.cancel_scope.cancel()
        log.info("stopped: %d frames scored, %d failed", self.frames_scored, self.frames_failed)

    def request_stop(self) -> None:
        """Begin a graceful shutdown (idempotent)."""
        self._stop.set()

    async def _shut_down(self, clients: trio.Nursery) -> None:
        self.stopping = True
        self._accept_scope.cancel()
        deadline = trio.current_time() + self.config.shutdown_timeout_s
        log.info("shutting down: %d clients, %d sessions; in-flight frames have %.1f s",
                 len(self.clients), len(self.all_sessions()), self.config.shutdown_timeout_s)
        for handler in list(self.clients.values()):
            handler.begin_shutdown(deadline)
        # Backstop: each handler honours the deadline and flushes for at most
        # a second; nothing in the clients' nursery outlives this.
        clients.cancel_scope.deadline = deadline + 3.0

    async def _keep_fd_reserve(self) -> None:
        """Take the spare fd back as soon as one is free again: after an EMFILE the accept
        loop retakes it at once, but fds may come back only later (frames finishing, clients
        leaving), and a daemon left without its spare could not answer the next EMFILE."""
        while not self._stop.is_set():
            with trio.move_on_after(0.25):
                await self._stop.wait()
            self.fd_reserve.take()

    async def _accept_loop(self) -> None:
        with self._accept_scope:
            while True:
                try:
                    sock, _ = await self.listener.accept()
                except OSError as e:
                    if e.errno in (errno.EMFILE, errno.ENFILE) and self.fd_reserve.release():
                        # Out of fds: the spare one takes the client, which is told so.
                        await self._refuse_without_fds(e)
                        continue
                    if e.errno in _TRANSIENT_ACCEPT_ERRNOS:
                        self._refusal_log.log(logging.WARNING, "accept failed (%s); retrying", e.strerror)
                        await trio.sleep(0.1)
                        self.fd_reserve.take()
                        continue
                    raise
                creds = peer_creds(sock)
                refusal = self.authorizer.refusal(creds)
                if refusal is None:
                    assert creds is not None
                    refusal = self.admission.admit(creds.uid)
                if refusal is not None:
                    self._refusal_log.log(logging.WARNING, "refusing a connection (%s): %s",
                                          creds or "no credentials", refusal)
                    self._start_refusal(sock, refusal)
                    continue
                assert creds is not None
                channel = TrioPacketChannel(sock, max_bytes=self.limits.max_message_bytes,
                                            max_fds=self.limits.max_fds_per_message)
                handler = ClientHandler(self, channel, self._next_client, creds=creds)
                self._next_client += 1
                self.clients[handler.id] = handler
                self.admission.connected(creds.uid)
                self.changed.set()
                assert self._clients_nursery is not None
                self._clients_nursery.start_soon(handler.run)
        self.listener.close()

    #: refusals being delivered at once; beyond this a refused client gets a tenth of the
    #: time to read its error (a flood of connections must not hold fds for long)
    MAX_REFUSING = 64

    def _start_refusal(self, sock, err) -> None:
        assert self._clients_nursery is not None
        wait = 1.0 if self._refusing < self.MAX_REFUSING else 0.1
        self._refusing += 1
        self._clients_nursery.start_soon(self._refuse, sock, err, wait)

    async def _refuse(self, sock, err, wait: float = 1.0) -> None:
        """Deliver ``err`` on a connection the daemon will not serve, then close it.

        The error goes out first; then the daemon half-closes and reads what
        the client sent meanwhile (its hello) until the client closes or
        ``wait`` passes.  Closing with those packets unread would make the
        kernel report ECONNRESET to the client before our error.
        """
        try:
            with sock:
                data, _ = encode(Error(code=err.code.value, field=err.field[:256], message=err.message[:1024]))
                with trio.move_on_after(wait):
                    try:
                        await sock.send(data)
                        sock.shutdown(trio.socket.SHUT_WR)
                        while await sock.recv(self.limits.max_message_bytes):
                            pass
                    except OSError:
                        pass
        finally:
            self._refusing -= 1

    async def _refuse_without_fds(self, error: OSError) -> None:
        """EMFILE/ENFILE on accept, with the spare fd given up: take the client and tell it E_NOFD."""
        try:
            try:
                sock, _ = await self.listener.accept()
            except OSError:
                await trio.sleep(0.1)  # still nothing: let frames finish and fds come back
                return
            self._refusal_log.log(logging.WARNING, "out of file descriptors (%s): refusing a connection "
                                  "with E_NOFD", error.strerror)
            err = RemoteProtocolError(ErrorCode.E_NOFD, "connection",
                                      f"the daemon is out of file descriptors ({error.strerror}); try again later")
            self._refusing += 1
            await self._refuse(sock, err, 0.2)
        finally:
            if not self.fd_reserve.take():
                await trio.sleep(0.1)

    # ------------------------------------------------------------------ from clients

    def next_session_id(self) -> int:
        sid = self._next_session
        self._next_session = (self._next_session + 1) & 0xFFFFFFFF or 1
        return sid

    def client_gone(self, handler: ClientHandler) -> None:
        if self.clients.pop(handler.id, None) is not None and handler.creds is not None:
            self.admission.disconnected(handler.creds.uid, handler.held)
        self.changed.set()

    def session_opened(self, session: Session) -> None:
        log.debug("session %d opened (%s)", session.id, session.client_name)
        self.changed.set()

    def session_closed(self, session: Session) -> None:
        log.debug("session %d closed: %d scored, %d failed", session.id, session.scored, session.failed)
        self.changed.set()

    def outcomes_sent(self, scored: int, failed: int) -> None:
        """Frames' outcomes left: ``scored`` results and ``failed`` frame_errors."""
        self.frames_scored += scored
        self.frames_failed += failed

    # ------------------------------------------------------------------ status

    def all_sessions(self) -> list[Session]:
        return [s for h in self.clients.values() for s in h.sessions.values()]

    def _visible(self, viewer: PeerCreds | None) -> list[ClientHandler]:
        """The clients ``viewer`` may see: all for root, the daemon's user and admin_groups; else its uid's."""
        if viewer is None or self.authorizer.is_admin(viewer):
            return list(self.clients.values())
        return [h for h in self.clients.values() if h.creds is not None and h.creds.uid == viewer.uid]

    def status(self, viewer: PeerCreds | None = None) -> dict[str, Any]:
        """The daemon's status; a viewer that is not an admin sees its own uid's clients, sessions and frames."""
        admin = viewer is None or self.authorizer.is_admin(viewer)
        handlers = self._visible(viewer)
        sessions = [s for h in handlers for s in h.sessions.values()]
        out = {
            "version": __version__,
            "protocol": PROTOCOL_VERSION,
            "server": self.server_name,
            "lanes": [self.lane.describe()],
            "scope": "all users" if admin else f"uid {viewer.uid}",  # type: ignore[union-attr]
            "clients": len(handlers),
            "sessions": len(sessions),
            "buffers": sum(len(h.buffers) for h in handlers),
            "frames_scored": self.frames_scored,
            "frames_failed": self.frames_failed,
            "frames_in_flight": sum(h.in_flight for h in handlers),
            "bytes_in_flight": sum(h.held.bytes for h in handlers),
            "pending_releases": len(self.pending),
            "host_copies": self.lane.host_copies,
            "uptime_s": round(time.monotonic() - self.started, 3),
            "stopping": self.stopping,
            **self.file_jobs.status(),
        }
        memory = self.lane.device_memory()  # GPU lanes: per device, bytes (and allocations) in use
        if memory is not None:
            out["device_memory"] = memory
        return out

    def status_line(self) -> str:
        """For sd_notify STATUS=."""
        return (f"serving {len(self.clients)} clients, {len(self.all_sessions())} sessions, "
                f"{self.frames_scored} frames scored")

    def session_rows(self, viewer: PeerCreds | None = None) -> list[dict[str, Any]]:
        """Every session ``viewer`` may see (see :meth:`_visible`), with its client's uid."""
        return [{**s.row(), "uid": h.creds.uid if h.creds is not None else None}
                for h in self._visible(viewer) for s in h.sessions.values()]
