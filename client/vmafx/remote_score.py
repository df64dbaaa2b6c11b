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
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import trio

from .client import Client
from .exceptions import VmafxError, first_error
from .frames import FrameBuffer, memfd_buffer
from .io.input import PARALLEL_READ_BYTES, read_pair
from .remote_files import (
    DEFAULT_MODEL, RemoteReport, check_pair, ended_notice, request_models, score_files_through_daemon,
)

__all__ = ["RemoteReport", "score_through_daemon", "pool_size_for", "DEFAULT_MODEL"]


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
        self.ended_early = ended_notice(self.rr, self.dr, ref_first)


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
    files: bool = True,
) -> RemoteReport:
    """Score two opened inputs (``read_frame()``, ``info``, ``pushback()``) through the daemon.

    ``model_texts[i]``, when given, is the content of ``models[i]``'s ``path=`` file, read
    and checked here: the daemon never opens a client's path.  ``distorted_frames``, when
    given, replaces ``dr.read_frame`` (the --scale path).  ``files``: plain files are first
    offered to the daemon to read itself (vmafx/remote_files.py; the caller may have done that).
    """
    models = request_models(models, features, no_prediction)
    check_pair(rr.info, dr.info if distorted_frames is None else rr.info)
    if files and distorted_frames is None:
        report = await trio.to_thread.run_sync(lambda: score_files_through_daemon(
            socket_path, rr, dr, models=models, features=features, model_texts=model_texts, lane=lane,
            device=device, max_frames=max_frames, progress=progress, no_prediction=no_prediction),
            abandon_on_cancel=True)
        if report is not None:
            return report
    info = rr.info
    async with await Client.connect(socket_path, name="vmafxctl") as client:
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
