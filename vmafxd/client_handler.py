"""One client connection: its protocol state, buffers, sessions and frames in flight.

The server runs one :class:`ClientHandler` per accepted connection, as one
task in its clients' nursery.  The handler owns everything of that client:

* the sans-I/O :class:`~vmafx.protocol.ServerConnection` (what may be sent
  when; decoding; typed errors);
* its :class:`~vmafxd.outgoing.OutgoingQueue` and the task that sends it, so a
  client that stops reading stalls only itself (and is dropped when its queue
  overflows);
* its :class:`~vmafxd.buffers.BufferTable` and its sessions, each session's
  task running in the handler's nursery;
* the counts its limits bound (buffers, sessions; frames in flight and
  unanswered frames are sums over its sessions' frame ledgers).

A decoded submit becomes a frame in its session's ledger (``_arrived``)
before anything is checked, so that even a refusal is answered in order; the
ledger (vmafxd/ledger.py) then decides its outcome and its releases.

Requests are handled synchronously, one packet at a time, in the receive
loop; nothing a request does waits (fence waits happen in session tasks,
scoring in lane workers, frees in the reaper).  Every fd that arrives in a
packet is owned by the packet until a handler takes it (a fence adopts its
fd, a lane ``dup``s or maps what it keeps); the rest is closed when the
packet has been handled, whatever happened.

A client that breaks the protocol gets an ``error`` and loses its
connection; one that dies just goes.  Either way the teardown (in ``run``'s
``finally``) aborts its sessions, unregisters its buffers and closes its fds;
frames a worker is still reading stay in the pending-release table and are
reaped normally, and their imports are freed by the reaper once the last of
them completes.  Nothing of it touches another client.
"""

from __future__ import annotations

import errno
import logging
import socket
import select
from typing import Any, Protocol

import trio

from vmafx.protocol import (
    PROTOCOL_VERSION, BufferRegistered, BufferUnregistered, CloseSession, Error, ErrorCode, Goodbye,
    Hello, HelloReply, Limits, ListSessions, LocalProtocolError, Message, OpenSession, RegisterBuffer,
    RemoteProtocolError, ScoreFiles, ServerConnection, SessionOpened, SessionsReply, State, Status, StatusReply,
    Submit, SubmitMany, UnregisterBuffer, peek,
)
from vmafx.protocol.messages import BadFrame, SubmitFrame
from vmafx.protocol.codec import decode, encode
from vmafx.protocol.state import SERVER_SENDS
from vmafx.transport import ConnectionReset, OwnedFd, Packet, TransportClosed, TrioPacketChannel

from .admission import Admission, Holdings, PeerCreds, RateLimitedLog, fd_headroom
from .buffers import BufferRecord, BufferTable, check_geometry, validate_layout
from .config import Config
from .fences import AcquireFence
from .file_jobs import FileJobs
from .lane_errors import lane_boundary
from .lanes.device import Lane, SessionSpec
from .model import BUILTIN_VERSIONS
from .outgoing import OutgoingQueue
from .ledger import FrameRecord, answer_without_session
from .reaper import PendingReleases, ReleaseReaper
from .session import Session, build_plan

__all__ = ["ClientHandler", "ClientHost"]

log = logging.getLogger("vmafxd.client")

#: At shutdown a client's socket is read once more, for what the client queued
#: before the drain began -- at most this many packets, for at most this long.
#: A socket's receive buffer holds a few hundred small packets; a client that
#: sends more is still sending after the shutdown began and is not waited for.
SHUTDOWN_READ_PACKETS = 1024
SHUTDOWN_READ_S = 1.0
#: After goodbye the socket is still read, until the client closes its end or for
#: at most this long: a submit that crossed the goodbye is answered E_SHUTDOWN.
SHUTDOWN_LINGER_S = 2.0
#: After a closing error (E_PROTO) what the client had queued is read and dropped
#: before the close, at most this many packets for at most this long.
ERROR_DRAIN_PACKETS = 4096
ERROR_DRAIN_S = 1.0


#: errnos that mean "this process has no fd to spare" (answered E_NOFD, not E_INTERNAL)
_FD_EXHAUSTION = (errno.EMFILE, errno.ENFILE)


class ClientHost(Protocol):
    """What a client connection needs from the daemon (:class:`vmafxd.server.Server` provides it).

    Written out here so that the server imports the handler and not the
    other way round.
    """

    config: Config
    limits: Limits
    lane: Lane
    pending: PendingReleases
    reaper: ReleaseReaper
    server_name: str
    #: per-uid accounts and byte budgets (vmafxd/admission.py)
    admission: Admission
    #: score_files jobs (vmafxd/file_jobs.py)
    file_jobs: FileJobs

    def next_session_id(self) -> int: ...

    def client_gone(self, handler: "ClientHandler") -> None: ...

    def session_opened(self, session: Session) -> None: ...

    def session_closed(self, session: Session) -> None: ...

    def outcomes_sent(self, scored: int, failed: int) -> None: ...

    def status(self, viewer: PeerCreds | None = None) -> dict[str, Any]: ...

    def session_rows(self, viewer: PeerCreds | None = None) -> list[dict[str, Any]]: ...


class ClientHandler:
    def __init__(self, server: ClientHost, channel: TrioPacketChannel, client_id: int,
                 creds: PeerCreds | None = None):
        self.server = server
        self.id = client_id
        self.channel = channel
        self.limits = server.limits
        self.lane = server.lane
        self.conn = ServerConnection(self.limits, server.server_name)
        # Every frame in flight can produce three packets (result + two
        # releases); replies come on top.  A client that lets this many pile
        # up is not reading.
        self.outgoing = OutgoingQueue(4 * self.limits.max_frames_in_flight + 64)
        self.buffers = BufferTable(self.limits)
        self.sessions: dict[int, Session] = {}
        #: the daemon's pending-release table, where the sessions' ledgers put their frames
        self.pending = server.pending
        #: the peer's credentials at accept (SO_PEERCRED); its uid's account holds what this client holds
        self.creds = creds
        self.pid = creds.pid if creds is not None else None
        self.uid = creds.uid if creds is not None else -1
        self.admission = server.admission
        #: what this client holds, as last reported to its uid's account (see _sync)
        self.held = Holdings()
        #: per session: what one of its frames costs in memory (vmafxd/core/working_set.py)
        self._frame_cost: dict[int, int] = {}
        #: the hello asked for session_opened's max_frames_in_flight (see _open_session)
        self.session_budgets = False
        #: the client reads runs of outcomes (result_many, released_many): its hello asked
        self.outcome_runs = False
        #: this client's log lines about its own errors, rate-limited (the rest are counted)
        self.log = RateLimitedLog(log, f"#{client_id}")
        self.closed = False
        self._nursery: trio.Nursery | None = None
        self._receive_scope = trio.CancelScope()
        self._shutdown_deadline: float | None = None
        #: reading what was queued at shutdown: requests are refused, not carried out
        self._draining = False
        #: this client's score_files not answered yet (vmafxd/file_jobs.py)
        self.file_jobs = 0
        #: seqs of requests refused during the shutdown drain (answered just before goodbye)
        self._refused_at_shutdown: list[int | None] = []

    @property
    def in_flight(self) -> int:
        """Accepted frames without an outcome (bounded by max_frames_in_flight)."""
        return sum(s.ledger.in_flight for s in self.sessions.values())

    @property
    def unanswered(self) -> int:
        """Frames holding a place in a session's order of outcomes (bounded, see _room)."""
        return sum(s.ledger.unanswered for s in self.sessions.values())

    def bytes_in_flight(self) -> int:
        """What this client's accepted, unanswered frames cost (bounded by the byte budgets)."""
        return sum(s.ledger.in_flight * self._frame_cost.get(sid, 0) for sid, s in self.sessions.items())

    def _sync(self) -> None:
        """Report what this client holds now to its uid's account (exact sums, no hooks elsewhere)."""
        if self.closed:
            return  # the server took everything back when the client went
        # Called for every outcome: plain sums and a field-by-field compare (no Holdings is
        # built unless something changed; the dataclass's __eq__ is a Python call).
        frames = nbytes = 0
        cost = self._frame_cost
        for sid, s in self.sessions.items():
            n = s.ledger.in_flight
            if n:
                frames += n
                nbytes += n * cost.get(sid, 0)
        held = self.held
        if (frames == held.frames and nbytes == held.bytes and len(self.sessions) == held.sessions
                and len(self.buffers) == held.buffers):
            return
        now = Holdings(len(self.sessions), len(self.buffers), frames, nbytes)
        self.admission.sync(self.uid, held, now)
        self.held = now

    @property
    def max_message_bytes(self) -> int:
        """The largest packet the client takes (the ledger cuts runs of outcomes to it)."""
        return self.limits.max_message_bytes

    @property
    def label(self) -> str:
        name = self.conn.client_name or "?"
        return f"{name}#{self.id}" + (f" (pid {self.pid})" if self.pid else "")

    # ------------------------------------------------------------------ lifetime

    async def run(self) -> None:
        log.info("client %s connected", self.label)
        reason = "closed"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.outgoing.run, self.channel)
                reason = await self._receive_loop()
                if reason == "shutdown":
                    reason = await self._drain_for_shutdown()
                elif reason == "fatal":
                    # The error message goes out before the connection closes.
                    with trio.move_on_after(1.0):
                        await self.outgoing.flushed()
                    await self._discard_after_error()
                nursery.cancel_scope.cancel()
        except Exception:
            reason = "internal error"
            log.exception("client %s: internal error; dropping its connection", self.label)
        finally:
            try:
                self._teardown()
            except Exception:  # one client's bug must not take the server down
                log.exception("client %s: teardown failed", self.label)
            self.log.flush()
            log.info("client %s gone (%s)", self.label, reason)

    async def _discard_after_error(self) -> None:
        """After a closing error: stop the client sending, drop what it sent, so our close is clean.

        Closing an AF_UNIX socket with packets still in its receive queue makes
        the kernel report ``ECONNRESET`` to the peer (af_unix.c,
        ``unix_release_sock``), and a client may see that before our error.  So:
        ``shutdown(SHUT_RD)`` -- the client's further sends fail with ``EPIPE``
        and our queue cannot grow -- then read and discard what is queued (their
        fds close with the packets), bounded by :data:`ERROR_DRAIN_S`; the close
        that follows leaves the client our error, then end-of-file.
        """
        try:
            self.channel.sock.shutdown(socket.SHUT_RD)
        except OSError:
            return  # already gone
        with trio.move_on_after(ERROR_DRAIN_S):
            for _ in range(ERROR_DRAIN_PACKETS):
                try:
                    pkt = await self.channel.receive()
                except TransportClosed:
                    return  # the queue is empty (or the client went)
                pkt.close_fds()

    def begin_shutdown(self, deadline: float) -> None:
        """Stop serving requests; finish in-flight frames by ``deadline`` (trio time), then goodbye.

        What the client had already queued is still read and answered (``E_SHUTDOWN``), see
        :meth:`_read_queued_at_shutdown`.
        """
        self._shutdown_deadline = deadline
        self._receive_scope.cancel()

    def abort(self, why: str) -> None:
        """Drop the connection now (no flush)."""
        if self._nursery is not None and not self.closed:
            log.warning("client %s: dropping the connection: %s", self.label, why)
            self._nursery.cancel_scope.cancel()

    def _teardown(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.conn.close()
            self.outgoing.close()
            for session in list(self.sessions.values()):
                # Their tasks were cancelled (and aborted their lane sessions); make sure.
                if session.state != Session.CLOSED:
                    session.lane_session.abort()
            self.sessions.clear()
            for rec in self.buffers.remove_all():
                rec.drop_registration()  # freed by the reaper once no pending frame reads it
        finally:
            self.channel.close()
            self.server.client_gone(self)

    async def _drain_for_shutdown(self) -> str:
        deadline = self._shutdown_deadline if self._shutdown_deadline is not None else trio.current_time()
        # Submits the client sent before it could know of the shutdown may still be
        # queued in the socket.  Read them before the sessions close, so each gets
        # its outcome in its session's order, before session_closed.
        if not await self._read_queued_at_shutdown(deadline):
            return "closed"  # the client went away; the caller cancels its tasks
        for session in list(self.sessions.values()):
            if session.state == Session.OPEN:
                session.close(None)
        with trio.move_on_at(deadline):
            for session in list(self.sessions.values()):
                await session.finished.wait()
        late = [s for s in self.sessions.values() if s.state != Session.CLOSED]
        for session in late:
            session.fail_unanswered(ErrorCode.E_SHUTDOWN, "the daemon is shutting down")
            session.cancel()
        # Frames that never reached a worker (stuck in a fence wait) are released
        # unread, through the reaper; frames a worker is still reading are not
        # released before goodbye -- closing the connection tells the producer.
        with trio.move_on_after(1.0):
            for session in late:
                await session.finished.wait()
            while any(s.ledger.completed_unreaped() for s in self.sessions.values()):
                await self.server.reaper.next_pass()  # the reaper has completed events to send
        # Requests read in the drain are refused last: a client takes E_SHUTDOWN as
        # "the connection is closing" and would stop waiting for the outcomes above.
        for seq in self._refused_at_shutdown:
            self.emit(Error(re=seq, code=ErrorCode.E_SHUTDOWN.value, field="",
                            message="the daemon is shutting down; the request was not carried out"))
        self.emit(Goodbye(reason="the daemon is shutting down"))
        with trio.move_on_after(1.0):
            await self.outgoing.flushed()
        await self._linger_after_goodbye(deadline)
        return "shutdown"

    async def _linger_after_goodbye(self, deadline: float) -> None:
        """Answer what crossed the goodbye, until the client closes or :data:`SHUTDOWN_LINGER_S`.

        A client may have sent submits before it read our ``session_closed`` or
        ``goodbye``; they are still owed an answer.  Each decodable ``submit`` gets
        ``frame_error E_SHUTDOWN`` and both ``released`` (its session is closed:
        nothing is placed in an order any more, and the client expects its frames
        in the order it sent them, which is the order we read them); another
        request gets ``error E_SHUTDOWN``; anything else is discarded.  Bounded by
        the server's backstop too (the shutdown deadline + 3 s).
        """
        end = min(trio.current_time() + SHUTDOWN_LINGER_S, deadline + 2.5)
        shut = RemoteProtocolError(ErrorCode.E_SHUTDOWN, "", "the daemon is shutting down; the frame was not read")
        with trio.move_on_at(end):
            while True:
                if self.outgoing.pending > self.outgoing.bound // 2:
                    await self.outgoing.flushed()
                try:
                    pkt = await self.channel.receive()
                except TransportClosed:
                    return  # the client closed its end: everything it sent has been read
                try:
                    try:
                        msg = decode(pkt.data, tuple(f.fileno() for f in pkt.fds))
                    except RemoteProtocolError:
                        continue  # not a request; nothing is owed
                    if isinstance(msg, Submit):
                        answer_without_session(self.emit, FrameRecord(msg.session, msg.index, msg.ref, msg.dist),
                                               shut)
                    elif isinstance(msg, SubmitMany):
                        for f in msg.frames:
                            answer_without_session(self.emit, FrameRecord(msg.session, f.index, f.ref, f.dist), shut)
                    elif getattr(msg, "seq", None) is not None:
                        self.emit(Error(re=msg.seq, code=ErrorCode.E_SHUTDOWN.value, field="",
                                        message="the daemon is shutting down; the request was not carried out"))
                finally:
                    pkt.close_fds()
        with trio.move_on_after(0.5):
            await self.outgoing.flushed()

    async def _read_queued_at_shutdown(self, deadline: float) -> bool:
        """Read and answer what the client had queued (bounded); False if it went away.

        Nothing new starts: :meth:`_refuse_at_shutdown` answers each request.
        Only what is queued now is read (a zero-timeout poll before each
        packet), at most :data:`SHUTDOWN_READ_PACKETS` of it and for at most
        :data:`SHUTDOWN_READ_S` (or until the shutdown deadline).
        """
        self._draining = True
        end = min(deadline, trio.current_time() + SHUTDOWN_READ_S)
        with trio.move_on_at(end):
            for _ in range(SHUTDOWN_READ_PACKETS):
                if self.conn.finished or not self._queued():
                    break
                if self.outgoing.pending > self.outgoing.bound // 2:
                    # Each refused submit is three packets; let the sender catch up
                    # rather than overflow the queue, which would drop the client.
                    await self.outgoing.flushed()
                try:
                    pkt = await self.channel.receive()
                except TransportClosed:
                    # Gone (a ConnectionReset too: whatever it still queued is for
                    # no one); closing the socket drops those packets and their fds.
                    return False
                if await self._handle_packet(pkt):
                    break  # E_PROTO: nothing more is read, the error goes out before goodbye
        return True

    def _queued(self) -> bool:
        """Something is waiting in the client's socket right now (a packet, or its end)."""
        poller = select.poll()
        poller.register(self.channel.sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))

    # ------------------------------------------------------------------ sending

    def emit_packet(self, cls: type[Message], packets: tuple[bytes, ...]) -> None:
        """Queue messages the ledger encoded itself (a frame's result, or its two released): what
        :meth:`emit` does for each, without the message objects and their encoding."""
        if self.closed:
            return
        conn = self.conn
        if cls not in SERVER_SENDS[conn.state]:
            if not conn.finished:  # cannot happen (frames exist only once open): loud, as conn.send is
                log.error("client %s: refusing to send a %s in state %s", self.label, cls.TYPE, conn.state.value)
            return  # closed: dropped, as emit drops it
        limit = self.limits.max_message_bytes
        if max(map(len, packets), default=0) > limit:  # cannot happen for what the ledger makes
            for data in packets:
                if len(data) > limit:
                    log.error("client %s: refusing to send an invalid %s: %d bytes exceed the limit of %d",
                              self.label, cls.TYPE, len(data), limit)
            packets = tuple(data for data in packets if len(data) <= limit)
        if not self.outgoing.put_many(packets):
            self.abort(f"it is not reading (more than {self.outgoing.bound} packets queued)")

    def emit(self, msg: Message) -> None:
        """Queue a message for this client (dropped once the connection is closing)."""
        if self.closed:
            return
        if type(msg) not in SERVER_SENDS[self.conn.state] and self.conn.finished:
            return  # closed: only an error, goodbye, and the answers to submits that crossed it
        try:
            data, _ = self.conn.send(msg)
        except LocalProtocolError:
            log.exception("client %s: refusing to send an invalid %s", self.label, msg.TYPE)
            return
        if not self.outgoing.put(data):
            self.abort(f"it is not reading (more than {self.outgoing.bound} packets queued)")

    def _error(self, re: int | None, err: RemoteProtocolError) -> None:
        self.emit(Error(re=re, code=err.code.value, field=err.field[:256], message=err.message[:1024]))

    # ------------------------------------------------------------------ receiving

    async def _receive_loop(self) -> str:
        with self._receive_scope:
            while True:
                try:
                    pkt = await self.channel.receive()
                except ConnectionReset:
                    # The client closed with packets of ours unread.  The kernel
                    # reports that before the packets it had still queued for us;
                    # they are not read: the client is gone, so nothing it asked
                    # for is wanted, and closing the socket drops them with their
                    # fds.  Its sessions, buffers and fences go in the teardown.
                    return "closed abruptly"
                except TransportClosed:
                    return "closed"
                if await self._handle_packet(pkt):
                    return "fatal"
        return "shutdown"

    async def _handle_packet(self, pkt: Packet) -> bool:
        """Handle one packet; True when the connection must close (E_PROTO)."""
        try:
            if pkt.ctrunc and fd_headroom() < self.limits.max_fds_per_message:
                # The kernel could not give us the packet's fds: not the client's fault.
                e = RemoteProtocolError(ErrorCode.E_NOFD, "fds",
                                        "the daemon is out of file descriptors (EMFILE) and could not receive "
                                        "the packet's fds; the request was not carried out, try again later")
                self.log.log(logging.WARNING, "client %s: %s", self.label, e)
                self._undecodable(pkt.data, e)
                return False
            try:
                msg = self.conn.receive(pkt.data, tuple(f.fileno() for f in pkt.fds),
                                        truncated=pkt.truncated, ctrunc=pkt.ctrunc)
            except RemoteProtocolError as e:
                self.log.log(logging.INFO, "client %s: %s", self.label, e)
                self._undecodable(pkt.data, e)
                return e.fatal
            try:
                await self._dispatch(msg, pkt)
            except RemoteProtocolError as e:
                self.log.log(logging.DEBUG, "client %s: %s refused: %s", self.label, msg.TYPE, e)
                self._error(getattr(msg, "seq", None), e)
                return e.fatal
            except OSError as e:
                if e.errno not in _FD_EXHAUSTION:
                    raise
                self.log.log(logging.WARNING, "client %s: %s: out of file descriptors", self.label, msg.TYPE)
                self._error(getattr(msg, "seq", None), RemoteProtocolError(
                    ErrorCode.E_NOFD, "fds", f"the daemon is out of file descriptors ({e.strerror}); "
                                             f"the {msg.TYPE} was not carried out, try again later"))
            except Exception as e:
                self.log.log(logging.ERROR, "client %s: handling %s failed", self.label, msg.TYPE, exc_info=True)
                self._error(getattr(msg, "seq", None), RemoteProtocolError(
                    ErrorCode.E_INTERNAL, "", f"the daemon failed handling {msg.TYPE}: {type(e).__name__}: {e}"))
            return False
        finally:
            pkt.close_fds()
            self._sync()

    def _undecodable(self, data: bytes, err: RemoteProtocolError) -> None:
        info = peek(data, ("ref", "dist")) if not (err.fatal and err.field in ("message", "fds")) else {}
        if (info.get("t") == "submit" and not err.fatal and self.conn.state is State.OPEN
                and "session" in info and "index" in info):
            # A submit we could not decode is still answered once, in its
            # session's order, and its buffers (when named) released.
            frame, session = self._arrived(info["session"], info["index"], info.get("ref"), info.get("dist"))
            self._refuse_frame(frame, session, err)
            return
        self._error(info.get("seq"), err)

    async def _dispatch(self, msg: Message, pkt: Packet) -> None:
        if self._draining and not isinstance(msg, CloseSession):
            self._refuse_at_shutdown(msg)
        elif isinstance(msg, SubmitMany):
            self._submit_many(msg, pkt)
        elif isinstance(msg, Submit):
            self._submit(msg.session, msg, pkt)
        elif isinstance(msg, Hello):
            self._hello(msg)
        elif isinstance(msg, RegisterBuffer):
            self._register_buffer(msg, pkt)
        elif isinstance(msg, UnregisterBuffer):
            self._unregister_buffer(msg)
        elif isinstance(msg, OpenSession):
            await self._open_session(msg)
        elif isinstance(msg, CloseSession):
            self._close_session(msg)
        elif isinstance(msg, Status):
            self.emit(StatusReply(re=msg.seq, status=self.server.status(self.creds)))
        elif isinstance(msg, ListSessions):
            self._list_sessions(msg)
        elif isinstance(msg, ScoreFiles):
            self._score_files(msg, pkt)
        else:  # the state table lets nothing else through
            raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"unexpected {msg.TYPE}")

    def _refuse_at_shutdown(self, msg: Message) -> None:
        """A request read in the shutdown drain: nothing new starts, everything is answered.

        A submit gets an ``E_SHUTDOWN`` frame_error in its session's order and
        both ``released`` at once (its buffers were never read; its fence fds
        close with the packet, unwaited).  Any other request gets an
        ``E_SHUTDOWN`` error, sent just before goodbye.  ``close_session`` is
        not refused: the drain closes every session anyway, and its
        ``session_closed`` answers the request.
        """
        if isinstance(msg, (Submit, SubmitMany)):
            for f in msg.frames if isinstance(msg, SubmitMany) else (msg,):
                frame, session = self._arrived(msg.session, f.index, f.ref, f.dist)
                self._refuse_frame(frame, session, RemoteProtocolError(
                    ErrorCode.E_SHUTDOWN, "", "the daemon is shutting down; the frame was not read"))
        else:
            self._refused_at_shutdown.append(getattr(msg, "seq", None))

    # ------------------------------------------------------------------ requests

    def _hello(self, msg: Hello) -> None:
        self.emit(HelloReply(
            re=msg.seq, version=PROTOCOL_VERSION, server=self.server.server_name,
            limits=self.limits.to_wire(), lanes=(self.lane.describe(),),
            features=tuple(self.lane.features()), models=tuple(BUILTIN_VERSIONS),
            bundles=True if msg.bundles else None, submit_many=True if msg.submit_many else None,
            score_files=True if msg.score_files else None, outcome_runs=True if msg.outcome_runs else None,
        ))
        if msg.bundles:
            self.outgoing.bundle_bytes = self.limits.max_message_bytes
        self.session_budgets = bool(msg.session_budgets)
        self.outcome_runs = bool(msg.outcome_runs)

    def _register_buffer(self, msg: RegisterBuffer, pkt: Packet) -> None:
        self.buffers.check_room()
        self.admission.check_buffer(self.uid)
        layout = validate_layout(msg, self.limits)
        fds = {i: pkt.fds[i] for i in layout.fd_indices()}
        with lane_boundary():
            imp = self.lane.import_buffer(layout, fds)  # keeps dups/mappings; the packet's fds close after us
        rec = self.buffers.add(layout, imp, self._free_buffer)
        self.emit(BufferRegistered(re=msg.seq, buffer=rec.id, zero_copy=bool(imp.zero_copy)))

    def _score_files(self, msg: ScoreFiles, pkt: Packet) -> None:
        """The two files' fds are the job's from here (the packet closes none of them); the
        job answers, files_scored or an error, while this client's other requests go on."""
        self.server.file_jobs.admit(self.file_jobs)  # the limits; refused, the packet closes the fds
        fds = (pkt.fds[msg.reference].detach(), pkt.fds[msg.distorted].detach())
        assert self._nursery is not None
        self.file_jobs += 1
        self._nursery.start_soon(self._run_file_job, msg, fds)

    async def _run_file_job(self, msg: ScoreFiles, fds: tuple[int, int]) -> None:
        try:
            await self.server.file_jobs.run(self, msg, fds)
        finally:
            self.file_jobs -= 1

    def send_error(self, re: int | None, err: RemoteProtocolError) -> None:
        """Answer request ``re`` with ``err`` (what a request's refusal sends)."""
        self._error(re, err)

    def _unregister_buffer(self, msg: UnregisterBuffer) -> None:
        rec = self.buffers.remove(msg.buffer)
        if rec is None:
            raise RemoteProtocolError(ErrorCode.E_NOENT, "buffer", f"no buffer {msg.buffer} is registered")
        rec.unregister_seq = msg.seq
        # Answered by _free_buffer once no frame references it and its import is freed.
        rec.drop_registration()

    def _free_buffer(self, rec: BufferRecord) -> None:
        """The buffer's last reference went: the reaper frees its import (R4), then we answer."""
        seq = rec.unregister_seq

        def then() -> None:
            if seq is not None:
                self.emit(BufferUnregistered(re=seq, buffer=rec.id))

        self.server.reaper.free_later(rec.imp, then)

    def _room(self, frames: int = 1) -> bool:
        """Room in the order of outcomes for ``frames`` more frames."""
        # Refused frames also wait for their turn in the order of outcomes;
        # a client that keeps submitting past its limit gets its refusals
        # unordered rather than growing this without bound.
        # (a loop, not the unanswered property's sum over a generator: this runs per submit)
        n = 0
        for s in self.sessions.values():
            n += s.ledger.unanswered
        return n + frames <= 2 * self.limits.max_frames_in_flight + 16

    async def _open_session(self, msg: OpenSession) -> None:
        if len(self.sessions) >= self.limits.max_sessions_per_client:
            raise RemoteProtocolError(ErrorCode.E_NOMEM, "session",
                                      f"this client already has {len(self.sessions)} sessions "
                                      f"(max_sessions_per_client)")
        self.admission.check_session(self.uid)
        if msg.lane not in ("auto", self.lane.name):
            raise RemoteProtocolError(ErrorCode.E_NOTSUP, "lane",
                                      f"lane {msg.lane} is not available: this daemon runs the "
                                      f"{self.lane.name} lane")
        geo = check_geometry(msg.width, msg.height, msg.pixel_format, msg.bitdepth, self.limits)
        plan = build_plan(msg.models, msg.features, self.limits, self.server.config.model_dirs, msg.model_texts)
        # What one frame costs while scored (pictures + the lane's working set): a geometry no budget
        # can hold is refused now, naming the limit, rather than frame by frame.  Frames in flight are
        # then counted at what each holds while it waits (the lane says; see core/working_set.py).
        self.admission.check_frame_cost(self.lane.scoring_bytes(plan, geo),
                                        f"{geo.width}x{geo.height} {geo.pixel_format.value} {geo.bitdepth}-bit")
        cost = self.lane.frame_bytes(plan, geo)
        sid = self.server.next_session_id()
        session = Session(sid, self, self.lane.name, None, geo, plan,  # type: ignore[arg-type]
                          name=msg.name, client_name=self.label)
        try:
            with lane_boundary():  # a PlanError the lane raises is E_INVAL naming its field
                session.lane_session = await self.lane.open_session(
                    SessionSpec(plan, geo, msg.device, msg.name), session)
        except ValueError as e:
            # A feature that cannot work at this size (vif needs 16x16 ...).
            raise RemoteProtocolError(ErrorCode.E_INVAL, "width", str(e)) from None
        self.sessions[sid] = session
        self._frame_cost[sid] = cost
        assert self._nursery is not None
        self._nursery.start_soon(session.run)
        self.server.session_opened(session)
        # How many of its frames the byte budgets hold at once, so that a client waits rather
        # than sends frames that would be refused with E_NOMEM (a 4K frame costs ~0.4 GB).
        self.emit(SessionOpened(re=msg.seq, session=sid, lane=self.lane.name, device=session.lane_session.device,
                                metrics=tuple(session.metrics), models=tuple(session.models),
                                max_frames_in_flight=self.admission.frames_that_fit(cost)
                                if self.session_budgets else None))

    def _close_session(self, msg: CloseSession) -> None:
        session = self.sessions.get(msg.session)
        if session is None:
            raise RemoteProtocolError(ErrorCode.E_NOENT, "session", f"no session {msg.session}")
        session.close(msg.seq)

    def _list_sessions(self, msg: ListSessions) -> None:
        rows = self.server.session_rows(self.creds)  # its own uid's, unless an admin asks
        # A reply must fit one packet: cut the list rather than fail.
        while True:
            reply = SessionsReply(re=msg.seq, sessions=tuple(rows))
            try:
                encode(reply, max_bytes=self.limits.max_message_bytes)
                break
            except LocalProtocolError:
                if not rows:
                    raise
                rows = rows[: len(rows) // 2]
        self.emit(reply)

    # ------------------------------------------------------------------ frames

    def _arrived(self, sid: int, index: int, ref, dist) -> tuple[FrameRecord, Session | None]:
        """A decoded submit: its frame, in its session's ledger (with a place in the order if there is room)."""
        frame = FrameRecord(sid, index, ref, dist)
        session = self.sessions.get(sid)
        if session is not None:
            session.receive(frame, room=self._room())
        return frame, session

    def _submit_many(self, msg: SubmitMany, pkt: Packet) -> None:
        """Each frame as if it came in a submit of its own, in the list's order.  A frame that did
        not decode is refused alone (its frame_error names the packet's field, ``frames[i].ref``);
        the daemon's own refusals name the field as for a submit (``ref``, ``ref_fence``): the
        frame_error's index says which frame."""
        sid = msg.session
        if self._accept_group(sid, msg.frames):
            return
        for f in msg.frames:
            if type(f) is BadFrame:
                frame, session = self._arrived(sid, f.index, f.ref, f.dist)
                self._refuse_frame(frame, session, RemoteProtocolError(f.code, f.field, f.message))
            else:
                self._submit(sid, f, pkt)

    def _accept_group(self, sid: int, frames: tuple) -> bool:
        """A submit_many's frames accepted in one step when every one of them would be accepted on
        its own: all decoded, no fences, an open session, indices increasing past its last, buffers
        it has matched before, room in the order, the in-flight limit and the byte budgets for all
        of them.  Then one validation pass, one ledger and admission step and one hand-over to the
        session's task; the outcome of every frame is the one the frame-by-frame path gives it.
        False (nothing done) otherwise: the frames go one by one, each refusal naming its field."""
        session = self.sessions.get(sid)
        if session is None or session.state != Session.OPEN or session.early_release:
            return False
        n = len(frames)
        cost = self._frame_cost.get(sid, 0)
        if (self.held.frames + n > self.limits.max_frames_in_flight
                or not self.admission.frames_fit(self.uid, self.held.bytes, cost, n)):
            return False
        if not self._room(n):  # room for each frame in turn
            return False
        get, geometry = self.buffers.get, session.geometry
        last = session.last_index
        records = []
        for f in frames:
            if type(f) is not SubmitFrame or f.ref_fence is not None or f.dist_fence is not None:
                return False
            index = f.index
            if last is not None and index <= last:
                return False
            last = index
            ref, dist = get(f.ref), get(f.dist)
            if ref is None or dist is None or ref.matched is not geometry or dist.matched is not geometry:
                return False  # unknown, or not seen with this session yet: the full check names it
            frame = FrameRecord(sid, index, f.ref, f.dist)
            frame.ref, frame.dist = ref, dist
            records.append(frame)
        accepted = session.receive_many(records)
        self._count_frame(accepted, accepted * cost)
        return True

    def _submit(self, sid: int, msg: Submit | SubmitFrame, pkt: Packet) -> None:
        """One frame: a submit, or a frame of a submit_many."""
        # The frame's place in its session's order first, so that every refusal
        # below -- a fence's too -- waits for the outcomes of the frames before it.
        frame, session = self._arrived(sid, msg.index, msg.ref, msg.dist)
        try:
            # Then the fences: their fds are consumed whatever becomes of the frame.
            if msg.ref_fence is not None:
                frame.ref_fence, frame.ref_gpu_fence = self._take_fence(msg.ref_fence, pkt, "ref_fence")
            if msg.dist_fence is not None:
                frame.dist_fence, frame.dist_gpu_fence = self._take_fence(msg.dist_fence, pkt, "dist_fence")
            if session is None:
                raise RemoteProtocolError(ErrorCode.E_NOENT, "session", f"no session {sid}")
            session.check(frame, self.buffers)
            # held.frames: the in_flight sum over the sessions, kept per frame (_count_frame)
            if self.held.frames >= self.limits.max_frames_in_flight:
                raise RemoteProtocolError(ErrorCode.E_NOMEM, "index",
                                          f"{self.held.frames} frames are in flight (max_frames_in_flight); "
                                          f"wait for outcomes")
            if not frame.placed:
                raise RemoteProtocolError(ErrorCode.E_NOMEM, "index", "too many unanswered frames")
            cost = self._frame_cost.get(sid, 0)
            self.admission.check_frame(self.uid, self.held.bytes, cost)
            session.accept(frame)
            if frame.accepted:
                # In the uid's account at once (the next frame of the packet is checked against it):
                # what _sync would find, without its sums over the sessions per frame.
                self._count_frame(1, cost)
        except RemoteProtocolError as e:
            self._refuse_frame(frame, session, e)

    def _take_fence(self, fence, pkt: Packet, field: str) -> tuple[AcquireFence | None, Any]:
        if fence is None:
            return None, None
        if fence.fd is None:
            with lane_boundary():
                self.lane.check_fence(fence.kind, field)  # GPU interprocess events: the lane's, if it can
            return None, fence
        owned = OwnedFd(pkt.fds[fence.fd].detach())  # the fence owns it from here on
        return AcquireFence.take(fence, owned, field), None

    def _refuse_frame(self, frame: FrameRecord, session: Session | None, err: RemoteProtocolError) -> None:
        """A decoded submit that will not be scored: released at once, one frame_error."""
        if session is not None:
            session.refuse(frame, err)
        else:
            answer_without_session(self.emit, frame, err)

    # ------------------------------------------------------------------ SessionHost

    def outcomes_sent(self, session: int, scored: int, failed: int, accepted: int) -> None:
        self.server.outcomes_sent(scored, failed)
        if accepted:
            self._count_frame(-accepted, -accepted * self._frame_cost.get(session, 0))

    def _count_frame(self, frames: int, nbytes: int) -> None:
        """A frame came into flight (+1) or left it (-1): this client's holdings and its uid's account
        follow at once, as :meth:`_sync` would set them (it still runs per packet and per batch of
        outcomes, and finds nothing to change)."""
        if self.closed:
            return  # the server took everything back when the client went
        self.held.frames += frames
        self.held.bytes += nbytes
        self.admission.count_frames(self.uid, frames, nbytes)

    def outcomes_settled(self) -> None:
        self._sync()

    def session_finished(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self._sync()
        self._frame_cost.pop(session.id, None)
        self.server.session_closed(session)
