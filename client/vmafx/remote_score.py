"""Scoring a pair of video files through a daemon: what ``vmafxctl score`` does by default.

The files are read into a pool of reusable memfd buffer pairs (up to 32),
each registered once.  Frame *i* goes into pair ``i % pool``, but only after
the daemon has ``released`` every earlier frame that used that pair -- the
producer's rule of the protocol, and what keeps the scores right while
several frames are in flight.  A y4m or raw file is read straight into the
buffer's shared mapping (``readinto``: the bytes land where the daemon maps
them, with no copy in between), a chunk of released pairs per hop to a worker
thread (reads and xz decoding release the GIL), so the receive task keeps
draining results and releases while the next frames are read.  A consumer
task collects the results in index order while the producer submits;
``session_closed`` brings the pooled summary.
"""

from __future__ import annotations

import math
import os
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

import trio

from .client import Client
from .exceptions import LayoutError, VmafxError, first_error
from .frames import FrameBuffer, memfd_buffer
from .io.input import PARALLEL_READ_BYTES, InputError, read_pair
from .io.inputs import Y4M_MAGIC
from .io.video import VideoInfo
from .protocol.errors import ErrorCode
from .tracking import FrameResult

__all__ = ["RemoteReport", "score_through_daemon", "pool_size_for", "DEFAULT_MODEL"]

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
    failed: list[FrameResult] = field(default_factory=list)
    lane: str = ""
    zero_copy: bool = True
    #: the daemon read the files itself (score_files), from fds this process sent
    daemon_read: bool = False
    frames_read: int = 0
    #: when the files' lengths differ: libvmaf's notice, '"X" ended before "Y".' (tools/vmaf.c scores
    #: the frames both have, prints this and exits 0); None when they ended together
    ended_early: str | None = None


def check_pair(ref: VideoInfo, dist: VideoInfo) -> None:
    """The reference and distorted files must have one geometry (a session has one)."""
    for attr in ("width", "height", "bitdepth", "pixel_format"):
        a, b = getattr(ref, attr), getattr(dist, attr)
        if a != b:
            show = (lambda v: getattr(v, "value", v))
            raise LayoutError(f"distorted.{attr}", f"{show(b)} differs from the reference's {show(a)}")


#: buffer pairs at most: a GPU lane batches up to 32 frames, and a pair comes back as soon as
#: its batch's upload is done, so 32 keep a batch gathering while the previous one runs
MAX_PAIRS = 32



def pool_size_for(frame_bytes: int, in_flight_limit: int, budget: int = 1 << 30) -> int:
    """Buffer pairs to keep: enough to have a batch in flight, within a memory budget."""
    by_memory = max(2, budget // max(1, 2 * frame_bytes))
    return max(2, min(MAX_PAIRS, in_flight_limit, by_memory))


class _PairFiller:
    """Reads frame pairs straight into registered buffers (in a worker thread: file reads and
    xz decoding release the GIL, so the trio thread keeps receiving meanwhile).

    A y4m/raw input reads the file into the buffer's shared mapping with ``readinto``: no
    bytes object, no numpy copy.  Anything else (PyAV, the --scale path, an unpacked
    buffer) goes through its planes and :meth:`~vmafx.frames.FrameBuffer.write_frame`."""

    def __init__(self, rr, dr, read_dist=None):
        self.rr, self.dr = rr, dr
        self.read_dist = read_dist  # the --scale path: planes from a function
        #: libvmaf's notice when one input ended before the other (see RemoteReport.ended_early)
        self.ended_early: str | None = None

    @staticmethod
    def _into(inp, buf, read=None) -> bool:
        if read is None and getattr(inp, "reads_into", False) and buf.packed:
            with buf.frame_view() as view:
                return inp.read_frame_into(view)
        frame = (read or inp.read_frame)()
        if frame is None:
            return False
        buf.write_frame(frame)
        return True

    def __call__(self, pair, helper: ThreadPoolExecutor | None = None) -> bool:
        """Fill a (ref, dist) handle pair; False when an input ended (``ended_early`` says how).

        With ``helper`` the distorted frame is read there while this thread reads the
        reference: two reads at once (a single thread's copy out of the page cache is what
        caps the file path at large sizes).  Either way both inputs are read, the
        reference's error first, and a frame read past the other input's end is given
        back (the frame-count warning reads on from there)."""
        rr, dr = self.rr, self.dr
        ref_h, dist_h = pair
        a, b = read_pair(lambda: self._into(rr, ref_h.buffer), lambda: self._into(dr, dist_h.buffer, self.read_dist),
                         helper)
        if a and b:
            return True
        if b:  # the reference ended first
            if hasattr(dr, "pushback"):
                dr.pushback(dist_h.buffer.read_planes())
            self._ended(ref_first=True)
        elif a:
            rr.pushback(ref_h.buffer.read_planes())
            self._ended(ref_first=False)
        return False

    def run(self, free: queue.SimpleQueue, token, filled) -> None:
        """The reader thread: fill each pair ``free`` hands over (None: stop), and pass it on
        to the trio thread with ``filled((pair, True | False | exception))``."""
        frame_bytes = getattr(getattr(self.rr, "info", None), "frame_size", 0)
        helper = ThreadPoolExecutor(1, "vmafx-read-dist") if frame_bytes >= PARALLEL_READ_BYTES else None
        try:
            while True:
                pair = free.get()
                if pair is None:
                    return
                try:
                    ok: bool | BaseException = self(pair, helper)
                except BaseException as e:  # reported in the trio thread, where the caller awaits
                    ok = e
                try:
                    token.run_sync_soon(filled, (pair, ok))
                except trio.RunFinishedError:
                    return
                if ok is not True:
                    return
        finally:
            if helper is not None:
                helper.shutdown(wait=False)

    def _ended(self, ref_first: bool) -> None:
        self.ended_early = self.notice(self.rr, self.dr, ref_first)

    @staticmethod
    def notice(rr, dr, ref_first: bool) -> str:
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


async def _score_files(client: Client, rr, dr, fds: list, *, models, features, model_texts, lane, device,
                       max_frames, progress) -> RemoteReport:
    """Have the daemon read and score the two files (``score_files``: their fds, never a path).
    The readers are then advanced past the frames scored, as if this process had read them."""
    info = rr.info
    geo: dict = {}
    if os.pread(fds[0], len(Y4M_MAGIC), 0) != Y4M_MAGIC:  # raw video: the daemon needs its geometry
        geo = dict(width=info.width, height=info.height, pixel_format=info.pixel_format.value,
                   bitdepth=info.bitdepth)
    t0 = time.perf_counter()
    try:
        reply, frames = await client.score_files(fds[0], fds[1], models=models, features=features,
                                                 model_texts=model_texts, lane=lane, device=device,
                                                 max_frames=max_frames, **geo)
    except VmafxError as e:
        # The daemon names the files by role ("distorted: frame 4 is truncated ..."): said here as
        # reading them in this process would have said it, naming the file
        if e.code is ErrorCode.E_INVAL and e.field in ("reference", "distorted") and \
                e.message.startswith(e.field + ": "):
            inp = rr if e.field == "reference" else dr
            raise InputError(f"{inp.name}: {e.message[len(e.field) + 2:]}") from None
        raise
    elapsed = time.perf_counter() - t0
    n = reply.frames
    for inp in (rr, dr):
        at = inp.frames_at()
        if at is not None:
            at.advance(n)
            at.close()
    if progress:
        progress(n)
    report = RemoteReport(list(enumerate(frames)), dict(reply.pooled), aggregate=dict(reply.aggregate),
                          width=reply.width, height=reply.height, models=list(reply.models), lane=reply.lane,
                          fps=n / elapsed if elapsed > 0 and n else None, frames_read=n, daemon_read=True)
    if reply.reference_ended != reply.distorted_ended and (max_frames is None or n < max_frames):
        report.ended_early = _PairFiller.notice(rr, dr, ref_first=reply.reference_ended)
    return report


async def _produce(session, pairs, fill: _PairFiller, max_frames: int | None) -> int:
    """Submit frames read by ``fill``'s thread until an input ends or ``max_frames``; how many.

    Three parties, so that the file is read continuously: the reader thread fills the pairs
    it is handed, in ring order; this task submits each filled pair (frame *i* in pair
    ``i % len(pairs)``) and passes it to the recycler, which hands it back to the reader once
    the daemon has released both buffers (the producer's rule).  Only pairs for frames
    below ``max_frames`` are handed over, so no input is read past what is scored (the
    frame-count warning reads on from there)."""
    npairs = len(pairs)
    limit = max_frames
    free: queue.SimpleQueue = queue.SimpleQueue()
    filled_send, filled = trio.open_memory_channel(math.inf)
    used_send, used = trio.open_memory_channel(math.inf)
    for pair in pairs[:npairs if limit is None else min(npairs, limit)]:
        free.put(pair)
    n = 0

    async def recycle() -> None:
        given = npairs
        async for pair in used:
            if limit is not None and given >= limit:
                return
            for h in pair:
                await h.wait_released()
            free.put(pair)
            given += 1

    def filled_one(item) -> None:  # runs in the trio thread; it must not raise (run_sync_soon)
        try:
            filled_send.send_nowait(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def read() -> None:
        # abandon_on_cancel: a Ctrl-C while a pipe/FIFO read blocks must not wait for it
        await trio.to_thread.run_sync(fill.run, free, trio.lowlevel.current_trio_token(),
                                      filled_one, abandon_on_cancel=True)

    failed: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(recycle)
            ended = False
            while not ended and (limit is None or n < limit):
                # Every pair the reader has filled by now goes in one submit_many (fewer
                # packets, and fewer wake-ups of the daemon, than a submit each).
                ready = [await filled.receive()]
                while limit is None or n + len(ready) < limit:
                    try:
                        ready.append(filled.receive_nowait())
                    except trio.WouldBlock:
                        break
                pairs_ok = []
                for pair, ok in ready:
                    if ok is not True:
                        failed = ok if ok is not False else None
                        ended = True
                        break
                    pairs_ok.append(pair)
                if pairs_ok:
                    await session.submit_many([(n + k, *pair) for k, pair in enumerate(pairs_ok)])
                    n += len(pairs_ok)
                    for pair in pairs_ok:
                        used_send.send_nowait(pair)
            nursery.cancel_scope.cancel()
    finally:
        free.put(None)  # the reader stops, wherever it is
    if failed is not None:
        raise failed  # the reader's error (an InputError naming the file) as it was raised, not in a group
    return n


async def score_through_daemon(socket_path: str, reference: str, distorted: str, **kw) -> RemoteReport:
    """Score ``reference`` against ``distorted`` through the daemon at ``socket_path``.

    Every failure of the daemon arrives as one typed exception (not a group of
    the tasks it ended): :class:`~vmafx.exceptions.DaemonStopped` when it said it
    is stopping (the frames it did not score got ``E_SHUTDOWN``),
    :class:`~vmafx.exceptions.DaemonLost` when it went away without a word,
    :class:`~vmafx.exceptions.DaemonUnavailable` when none answers;
    :func:`vmafx.exceptions.describe` turns each into one line and an exit status.
    """
    try:
        return await _score_through_daemon(socket_path, reference, distorted, **kw)
    except BaseExceptionGroup as group:
        err = first_error(group)
        if isinstance(err, (VmafxError, OSError, ValueError)):
            raise err from None
        raise


async def _score_through_daemon(
    socket_path: str,
    reference: str,
    distorted: str,
    *,
    width: int | None = None,
    height: int | None = None,
    pixel_format: str | None = None,
    bitdepth: int | None = None,
    **kw,
) -> RemoteReport:
    """Score two files (any kind ``vmafx.io.inputs.open_input`` opens) through the daemon."""
    from .io.inputs import open_input

    geo = dict(width=width, height=height, pixel_format=pixel_format, bitdepth=bitdepth)
    with open_input(reference, **geo) as rr, open_input(distorted, **geo) as dr:
        return await score_inputs_through_daemon(socket_path, rr, dr, **kw)


async def score_inputs_through_daemon(
    socket_path: str,
    rr,
    dr,
    *,
    models: Sequence[str] = (),
    features: Sequence[str] = (),
    model_texts: Sequence[str | None] = (),
    lane: str = "auto",
    device: int | None = None,
    max_frames: int | None = None,
    pool: int | None = None,
    progress: Callable[[int], None] | None = None,
    distorted_frames=None,
    no_prediction: bool = False,
) -> RemoteReport:
    """Score two opened inputs (``read_frame()``, ``info``, ``pushback()``) through the daemon.

    ``model_texts[i]``, when given, is the content of ``models[i]``'s ``path=`` file, read
    and checked here: the daemon never opens a client's path.  ``distorted_frames``, when
    given, replaces ``dr.read_frame`` (the --scale path).
    """
    # vmafxctl's default model, also when only extra features are asked for (the protocol's
    # own default, "no models and no features means vmaf_v0.6.1", would drop it then).
    models = list(models) or ([] if features and no_prediction else [DEFAULT_MODEL])
    check_pair(rr.info, dr.info if distorted_frames is None else rr.info)
    info = rr.info
    async with await Client.connect(socket_path, name="vmafxctl") as client:
        if distorted_frames is None and client.scores_files:
            fds = [_file_fd(inp) for inp in (rr, dr)]
            try:
                if None not in fds:
                    return await _score_files(client, rr, dr, fds, models=models, features=features,
                                              model_texts=model_texts, lane=lane, device=device,
                                              max_frames=max_frames, progress=progress)
            finally:
                for fd in fds:
                    if fd is not None:
                        os.close(fd)
        session = await client.open_session(
            width=info.width, height=info.height, pixel_format=info.pixel_format.value,
            bitdepth=info.bitdepth, models=models, features=features, lane=lane, device=device,
            model_texts=model_texts)
        # more pairs than the session may have in flight would only be mapped (and pinned) idle
        in_flight = min(client.limits.max_frames_in_flight, session.max_in_flight or client.limits.max_frames_in_flight)
        npairs = pool or pool_size_for(info.frame_size, in_flight)
        buffers: list[FrameBuffer] = []
        try:
            pairs = []
            for _ in range(npairs):
                pair = []
                for _role in ("ref", "dist"):
                    buf = memfd_buffer(info.width, info.height, info.pixel_format, info.bitdepth)
                    buffers.append(buf)
                    pair.append(await client.register_buffer(buf))
                pairs.append(tuple(pair))
            report = RemoteReport([], {}, width=info.width, height=info.height,
                                  models=list(session.models), lane=session.lane,
                                  zero_copy=all(h.zero_copy for p in pairs for h in p))

            async def collect() -> None:
                async for r in session.results():
                    if r.ok:
                        report.frames.append((r.index, r.metrics))
                    else:
                        report.failed.append(r)
                    if progress:
                        progress(len(report.frames) + len(report.failed))

            fill = _PairFiller(rr, dr, distorted_frames)
            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect)
                n = await _produce(session, pairs, fill, max_frames)
                report.ended_early = fill.ended_early
                summary = await session.close()
            elapsed = time.perf_counter() - t0
            report.pooled = summary.pooled
            report.aggregate = summary.aggregate
            report.fps = summary.frames / elapsed if elapsed > 0 and summary.frames else None
            report.frames_read = n
            for ref_h, dist_h in pairs:
                await client.unregister_buffer(ref_h)
                await client.unregister_buffer(dist_h)
            return report
        finally:
            for buf in buffers:
                try:
                    buf.close()
                except BufferError:  # an abandoned read (Ctrl-C on a blocked pipe) still writes it
                    pass
