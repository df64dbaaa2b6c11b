"""Scoring a pair of video files through a daemon: what ``vmafxctl score`` does by default.

The files are read frame by frame into a small pool of reusable memfd buffer
pairs, each registered once.  Frame *i* goes into pair ``i % pool``, but only
after the daemon has ``released`` every earlier frame that used that pair --
the producer's rule of the protocol, and what keeps the scores right while
several frames are in flight.  A consumer task collects the results in index
order while the producer submits; ``session_closed`` brings the pooled
summary.  Reading (and xz decoding) runs in a worker thread, so the receive
task keeps draining results while the next frame is read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import trio

from .client import Client
from .exceptions import LayoutError, VmafxError, first_error
from .frames import FrameBuffer, memfd_buffer
from .io.video import VideoInfo
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


def pool_size_for(frame_bytes: int, in_flight_limit: int, budget: int = 256 << 20) -> int:
    """Buffer pairs to keep: enough to have a few frames in flight, within a memory budget."""
    by_memory = max(2, budget // max(1, 2 * frame_bytes))
    return max(2, min(8, in_flight_limit, by_memory))


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
    read_dist = distorted_frames or dr.read_frame
    check_pair(rr.info, dr.info if distorted_frames is None else rr.info)
    info = rr.info
    async with await Client.connect(socket_path, name="vmafxctl") as client:
        session = await client.open_session(
            width=info.width, height=info.height, pixel_format=info.pixel_format.value,
            bitdepth=info.bitdepth, models=models, features=features, lane=lane, device=device,
            model_texts=model_texts)
        npairs = pool or pool_size_for(info.frame_size, client.limits.max_frames_in_flight)
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

            def read_pair():
                a = rr.read_frame()
                if a is None:  # does the distorted go on? (then it ended later: say so, as libvmaf does)
                    b = read_dist()
                    if b is not None and hasattr(dr, "pushback"):
                        dr.pushback(b)
                    return None, b
                b = read_dist()
                if b is None:
                    rr.pushback(a)
                return a, b

            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(collect)
                n = 0
                while max_frames is None or n < max_frames:
                    # abandon_on_cancel: a Ctrl-C while a pipe/FIFO read blocks must not wait for it
                    a, b = await trio.to_thread.run_sync(read_pair, abandon_on_cancel=True)
                    if a is None or b is None:
                        if (a is None) != (b is None):
                            names = (getattr(rr, "name", "reference"), getattr(dr, "name", "distorted"))
                            first, other = names if a is None else names[::-1]
                            report.ended_early = f'"{first}" ended before "{other}".'
                        break
                    ref_h, dist_h = pairs[n % npairs]
                    # The producer's rule: rewrite a buffer only once the daemon released it.
                    await ref_h.wait_released()
                    await dist_h.wait_released()
                    ref_h.buffer.write_frame(a)
                    dist_h.buffer.write_frame(b)
                    await session.submit(n, ref_h, dist_h)
                    n += 1
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
                buf.close()
