"""Two uncompressed files scored by a daemon that reads them itself (``score_files``).

What ``vmafxctl score`` does first when a daemon answers: when both inputs are regular
y4m or raw files read from their first frame, it opens them again and sends the open
fds (SCM_RIGHTS, never a path), and the daemon reads and scores them (vmafxd/file_jobs.py).
This path is blocking (:class:`~vmafx.blocking.BlockingClient`): one request and its
replies need no event loop, so the command does not import trio for it.  Any other input
is submitted frame by frame (vmafx/remote_score.py).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from .blocking import BlockingClient
from .exceptions import LayoutError, VmafxError
from .formats import Y4M_MAGIC
from .protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .io.video import VideoInfo
    from .tracking import FrameResult

__all__ = ["DEFAULT_MODEL", "RemoteReport", "check_pair", "ended_notice", "score_files_through_daemon"]

DEFAULT_MODEL = "version=vmaf_v0.6.1"


@dataclass
class RemoteReport:
    """The same shape as vmafxd.offline.Report, plus the frames that failed."""

    frames: list[tuple[int, dict[str, float | None]]]
    pooled: dict[str, dict[str, float | None]]
    aggregate: dict = field(default_factory=dict)
    width: int = 0
    height: int = 0
    fps: float | None = None
    models: list[str] = field(default_factory=list)
    failed: list["FrameResult"] = field(default_factory=list)
    lane: str = ""
    zero_copy: bool = True
    #: the daemon read the files itself (score_files), from fds this process sent
    daemon_read: bool = False
    frames_read: int = 0
    #: when the files' lengths differ: libvmaf's notice, '"X" ended before "Y".' (tools/vmaf.c scores
    #: the frames both have, prints this and exits 0); None when they ended together
    ended_early: str | None = None


def check_pair(ref: "VideoInfo", dist: "VideoInfo") -> None:
    """The reference and distorted files must have one geometry (a session has one)."""
    for attr in ("width", "height", "bitdepth", "pixel_format"):
        a, b = getattr(ref, attr), getattr(dist, attr)
        if a != b:
            show = (lambda v: getattr(v, "value", v))
            raise LayoutError(f"distorted.{attr}", f"{show(b)} differs from the reference's {show(a)}")


def ended_notice(rr, dr, ref_first: bool) -> str:
    """libvmaf's words when one input ended before the other."""
    names = (getattr(rr, "name", "reference"), getattr(dr, "name", "distorted"))
    first, other = names if ref_first else names[::-1]
    return f'"{first}" ended before "{other}".'


def _file_fd(inp) -> int | None:
    """A new fd of ``inp``'s file when the daemon can read it itself: a regular uncompressed
    file (one that can be read by position) at its first frame; else None."""
    at = inp.frames_at() if inp.frames_read == 0 else None
    if at is None:
        return None
    at.close()
    try:
        return os.open(inp.name, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def request_models(models: Sequence[str], features: Sequence[str], no_prediction: bool) -> list[str]:
    """The models a daemon is asked for: vmafxctl's default model, also when only extra features
    are asked for (the protocol's own default, "no models and no features means vmaf_v0.6.1",
    would drop it then), none with ``no_prediction`` and features."""
    return list(models) or ([] if features and no_prediction else [DEFAULT_MODEL])


class FilesJob:
    """One ``score_files`` on a thread of its own, from the moment the command knows the two
    files and the daemon: the daemon reads and scores while this process goes on (imports,
    checks, opening the inputs), and :meth:`report` waits for it.

    It owns ``fds`` (closed once the request is sent, or on any failure).  ``geometry``: a raw
    pair's width/height/pixel_format/bitdepth (none for y4m)."""

    def __init__(self, socket_path: str, fds: tuple[int, int], *, geometry: dict | None = None,
                 models: Sequence[str] = (), features: Sequence[str] = (),
                 model_texts: Sequence[str | None] = (), lane: str = "auto", device: int | None = None,
                 max_frames: int | None = None):
        self.socket_path = socket_path
        self.max_frames = max_frames
        self._fds = fds
        self._request = dict(models=tuple(models), features=tuple(features), model_texts=tuple(model_texts),
                             lane=lane, device=device, max_frames=max_frames, **(geometry or {}))
        #: the reply and the frames; None when the daemon does not take score_files; or the error
        self.reply = self.frames = self.error = None
        self.elapsed = 0.0
        self._thread = threading.Thread(target=self._run, name="vmafx-score-files", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            with BlockingClient.connect(self.socket_path, name="vmafxctl") as client:
                if client.scores_files:
                    self.reply, self.frames = client.score_files(*self._fds, **self._request)
        except BaseException as e:  # raised where the report is asked for
            self.error = e
        finally:
            self.elapsed = time.perf_counter() - t0
            for fd in self._fds:
                os.close(fd)

    def report(self, rr, dr, progress: Callable[[int], None] | None = None) -> RemoteReport | None:
        """Wait for the daemon (Ctrl-C still reaches this thread); the report of the inputs ``rr``
        and ``dr`` (opened here too: advanced past the frames scored, as if this process had read
        them), or None when the daemon does not take score_files.  Raises the connection's and
        the daemon's errors, and an InputError naming the file when the daemon found it bad."""
        while self._thread.is_alive():
            self._thread.join(0.25)
        e = self.error
        if e is not None:
            from .io.input import InputError

            # The daemon names the files by role ("distorted: frame 4 is truncated ..."): said here as
            # reading them in this process would have said it, naming the file
            if isinstance(e, VmafxError) and e.code is ErrorCode.E_INVAL and e.field in ("reference", "distorted") \
                    and e.message.startswith(e.field + ": "):
                inp = rr if e.field == "reference" else dr
                raise InputError(f"{inp.name}: {e.message[len(e.field) + 2:]}") from None
            raise e
        reply = self.reply
        if reply is None:
            return None
        n = reply.frames
        for inp in (rr, dr):
            at = inp.frames_at()
            if at is not None:
                at.advance(n)
                at.close()
        if progress:
            progress(n)
        report = RemoteReport(list(enumerate(self.frames)), dict(reply.pooled), aggregate=dict(reply.aggregate),
                              width=reply.width, height=reply.height, models=list(reply.models), lane=reply.lane,
                              fps=n / self.elapsed if self.elapsed > 0 and n else None, frames_read=n,
                              daemon_read=True)
        if reply.reference_ended != reply.distorted_ended and (self.max_frames is None or n < self.max_frames):
            report.ended_early = ended_notice(rr, dr, ref_first=reply.reference_ended)
        return report


def start_files_job(socket_path: str, rr, dr, **request) -> FilesJob | None:
    """A :class:`FilesJob` of the opened inputs ``rr`` and ``dr`` (y4m or raw: a raw pair's
    geometry is sent), or None when either is not a regular uncompressed file at its first frame."""
    check_pair(rr.info, dr.info)
    fds = [_file_fd(inp) for inp in (rr, dr)]
    if None in fds:
        for fd in fds:
            if fd is not None:
                os.close(fd)
        return None
    try:
        geometry = None
        if os.pread(fds[0], len(Y4M_MAGIC), 0) != Y4M_MAGIC:  # raw video: the daemon needs its geometry
            info = rr.info
            geometry = dict(width=info.width, height=info.height, pixel_format=info.pixel_format.value,
                            bitdepth=info.bitdepth)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return FilesJob(socket_path, (fds[0], fds[1]), geometry=geometry, **request)


def start_files_job_early(socket_path: str, reference: str, distorted: str, **request) -> FilesJob | None:
    """A :class:`FilesJob` of two y4m files by path, before the command opens them as inputs (so
    the daemon scores while the command imports and checks); None when either path is not a
    regular file beginning with y4m's magic (raw, compressed or a container go the usual way)."""
    fds: list[int] = []
    try:
        for path in (reference, distorted):
            if not stat.S_ISREG(os.stat(path).st_mode):  # (a FIFO's open would wait for its writer)
                raise OSError("not a regular file")
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            fds.append(fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.pread(fd, len(Y4M_MAGIC), 0) != Y4M_MAGIC:
                raise OSError("not a plain y4m file")
    except OSError:
        for fd in fds:
            os.close(fd)
        return None
    return FilesJob(socket_path, (fds[0], fds[1]), **request)


def score_files_through_daemon(socket_path: str, rr, dr, *, models: Sequence[str] = (),
                               features: Sequence[str] = (), model_texts: Sequence[str | None] = (),
                               lane: str = "auto", device: int | None = None, max_frames: int | None = None,
                               progress: Callable[[int], None] | None = None,
                               no_prediction: bool = False) -> RemoteReport | None:
    """Have the daemon at ``socket_path`` read and score the opened inputs ``rr`` and ``dr``;
    None when it cannot (a daemon without ``score_files``, or an input that is not a plain
    file at its first frame: the caller submits the frames then).  The readers are advanced
    past the frames scored, as if this process had read them.  Raises what connecting
    raises (DaemonUnavailable), the daemon's errors (VmafxError), and an InputError naming
    the file when the daemon found it bad."""
    job = start_files_job(socket_path, rr, dr, models=request_models(models, features, no_prediction),
                          features=features, model_texts=model_texts, lane=lane, device=device,
                          max_frames=max_frames)
    return None if job is None else job.report(rr, dr, progress)
