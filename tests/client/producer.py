"""A producer that scores part of a video pair through a daemon: run as a separate process by the tests.

    python -m tests.client.producer --socket PATH --ref REF --dist DIST [--start K] [--count N]
        [--model SPEC ...] [--feature SPEC ...] [--api async|blocking] [--pool P] --out FILE

It reads frames ``K .. K+N-1`` of the two files, fills a pool of ``P`` reusable
memfd buffer pairs -- rewriting a pair only after the daemon released it --
submits them as indices ``0 .. N-1`` with several in flight, and writes JSON:
per-frame metrics, the pooled summary, and for each write how many references
of that buffer were still outstanding (must be 0: the producer's rule).
The same functions run as trio tasks inside the test process too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import trio

from vmafx.blocking import BlockingClient
from vmafx.client import Client
from vmafx.frames import memfd_buffer
from vmafx.io.video import open_video


def _frames(ref: str, dist: str, start: int, count: int | None):
    with open_video(ref) as rr, open_video(dist) as dr:
        info = rr.info
        pairs = zip(rr, dr)
        frames = list(itertools.islice(pairs, start, None if count is None else start + count))
    return info, [([p.copy() for p in a], [p.copy() for p in b]) for a, b in frames]


def _report(results, summary, writes) -> dict:
    return {
        "frames": [[r.index, r.metrics] for r in results if r.ok],
        "errors": [[r.index, r.error.code.value, r.error.field] for r in results if not r.ok],
        "pooled": summary.pooled,
        "summary": {"frames": summary.frames, "failed": summary.failed},
        "writes": writes,
    }


async def produce_async(socket: str, ref: str, dist: str, *, start: int = 0, count: int | None = None,
                        models=(), features=(), pool: int = 2) -> dict:
    info, frames = _frames(ref, dist, start, count)
    writes: list[int] = []
    results = []
    async with await Client.connect(socket, name="test-producer") as client:
        session = await client.open_session(width=info.width, height=info.height, pixel_format=info.pixel_format.value,
                                            bitdepth=info.bitdepth, models=list(models), features=list(features),
                                            lane="cpu")
        bufs = [memfd_buffer(info.width, info.height, info.pixel_format, info.bitdepth, pitch_align=32)
                for _ in range(2 * pool)]
        handles = [await client.register_buffer(b) for b in bufs]

        async def collect():
            async for r in session.results():
                results.append(r)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect)
            for i, (a, b) in enumerate(frames):
                rh, dh = handles[2 * (i % pool)], handles[2 * (i % pool) + 1]
                await rh.wait_released()
                await dh.wait_released()
                writes.append(rh.outstanding + dh.outstanding)
                rh.buffer.write_frame(a)
                dh.buffer.write_frame(b)
                await session.submit(i, rh, dh)
            summary = await session.close()
        for h in handles:
            await client.unregister_buffer(h)
        for b in bufs:
            b.close()
    return _report(results, summary, writes)


def produce_blocking(socket: str, ref: str, dist: str, *, start: int = 0, count: int | None = None,
                     models=(), features=(), pool: int = 2) -> dict:
    info, frames = _frames(ref, dist, start, count)
    writes: list[int] = []
    with BlockingClient.connect(socket, name="test-producer-blocking") as client:
        session = client.open_session(width=info.width, height=info.height, pixel_format=info.pixel_format.value,
                                      bitdepth=info.bitdepth, models=list(models), features=list(features),
                                      lane="cpu")
        bufs = [memfd_buffer(info.width, info.height, info.pixel_format, info.bitdepth) for _ in range(2 * pool)]
        handles = [client.register_buffer(b) for b in bufs]
        for i, (a, b) in enumerate(frames):
            rh, dh = handles[2 * (i % pool)], handles[2 * (i % pool) + 1]
            rh.wait_released(timeout=60)
            dh.wait_released(timeout=60)
            writes.append(rh.outstanding + dh.outstanding)
            rh.buffer.write_frame(a)
            dh.buffer.write_frame(b)
            session.submit(i, rh, dh, timeout=60)
        summary = session.close(timeout=120)
        results = list(session.results())
        for b in bufs:
            b.close()
    return _report(results, summary, writes)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--dist", required=True)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int)
    p.add_argument("--model", action="append", default=[])
    p.add_argument("--feature", action="append", default=[])
    p.add_argument("--api", choices=("async", "blocking"), default="async")
    p.add_argument("--pool", type=int, default=2)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    kw = dict(start=a.start, count=a.count, models=a.model, features=a.feature, pool=a.pool)
    if a.api == "async":
        report = trio.run(lambda: produce_async(a.socket, a.ref, a.dist, **kw))
    else:
        report = produce_blocking(a.socket, a.ref, a.dist, **kw)
    with open(a.out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
