"""The file path of ``vmafxctl score`` through a daemon: frames/s, the client's CPU per frame,
and how fast the same files can merely be read.

    python3 scripts/bench_y4m_client.py REF.y4m DIST.y4m [--lane cpu] [--repeats 3]
        [--feature psnr ...] [--model version=vmaf_v0.6.1] [--pool N] [--socket PATH]

One private daemon (or ``--socket``'s) scores the pair ``--repeats`` times through
:func:`vmafx.remote_score.score_through_daemon`, the function ``vmafxctl score`` calls.
Printed per run: frames/s (first submit to ``session_closed``) and the client process's CPU
time per frame (user + system, all its threads: what reading, copying and the protocol
cost it, whatever the daemon's speed); then the medians.  ``read-only`` is the rate at
which the client's reader fills one buffer pair from both files and nothing else (the
ceiling of the path; on a tree before it, frames read as planes and copied in).
With no ``--model``/``--feature``, ``--feature psnr`` without a model: the cheapest scoring,
so the client's share shows.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

#: the tree whose client and daemon run (VMAFX_BENCH_ROOT: another checkout, for before/after)
ROOT = Path(os.environ.get("VMAFX_BENCH_ROOT") or Path(__file__).resolve().parents[1]).resolve()
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import trio  # noqa: E402

from vmafx.frames import memfd_buffer  # noqa: E402
from vmafx.io.inputs import open_input  # noqa: E402
from vmafx.private_daemon import PrivateDaemon  # noqa: E402
from vmafx.remote_score import score_through_daemon  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Handle:
    def __init__(self, buf):
        self.buffer = buf


def read_only_rate(ref: str, dist: str) -> float:
    """Frames/s at which both files are read into one buffer pair by the client's own reader
    (two threads from 1 MiB a frame, as when scoring), and nothing else."""
    with open_input(ref) as a, open_input(dist) as b:
        info = a.info
        bufs = [memfd_buffer(info.width, info.height, info.pixel_format, info.bitdepth) for _ in range(2)]
        n = 0
        t0 = time.perf_counter()
        try:
            try:
                from vmafx.remote_score import _PairFiller
                try:
                    from vmafx.io.input import PARALLEL_READ_BYTES
                except ImportError:  # a tree where it lived beside the filler
                    from vmafx.remote_score import PARALLEL_READ_BYTES
            except ImportError:  # a tree before the direct reader
                _PairFiller = None
            if _PairFiller is not None:
                from concurrent.futures import ThreadPoolExecutor

                fill = _PairFiller(a, b)
                helper = ThreadPoolExecutor(1) if info.frame_size >= PARALLEL_READ_BYTES else None
                pair = (_Handle(bufs[0]), _Handle(bufs[1]))
                while fill(pair, helper):
                    n += 1
                if helper is not None:
                    helper.shutdown()
            else:  # a tree before readinto: frames as planes, copied in
                while True:
                    fa, fb = a.read_frame(), b.read_frame()
                    if fa is None or fb is None:
                        break
                    bufs[0].write_frame(fa)
                    bufs[1].write_frame(fb)
                    n += 1
        finally:
            for buf in bufs:
                buf.close()
        return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("distorted")
    ap.add_argument("--lane", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--feature", action="append", default=[])
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--pool", type=int, default=None, help="buffer pairs (default: the client's choice)")
    ap.add_argument("--socket", help="an already running daemon instead of a private one")
    args = ap.parse_args()
    features = args.feature or ([] if args.model else ["psnr"])
    no_prediction = not args.model
    rates, cpus = [], []
    daemon = None
    sock = args.socket
    if sock is None:
        # the daemon of this tree, with whatever else the environment's path holds (trio on the device)
        path = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "client"), os.environ.get("PYTHONPATH")) if p)
        daemon = PrivateDaemon(lane=args.lane, environment={"PYTHONPATH": path})
        sock = daemon.start()
    try:
        for i in range(args.repeats):
            c0 = _cpu()
            r = trio.run(lambda: score_through_daemon(sock, args.reference, args.distorted, models=args.model,
                                                      features=features, no_prediction=no_prediction,
                                                      lane=args.lane, pool=args.pool))
            c1 = _cpu()
            if r.failed:
                print(f"run {i + 1}: {len(r.failed)} frames failed, first: {r.failed[0].error}")
                return 1
            rates.append(r.fps or 0.0)
            cpus.append((c1 - c0) / max(1, r.frames_read) * 1e6)
            print(f"run {i + 1}: {r.frames_read} frames, {rates[-1]:.0f} frames/s, "
                  f"client CPU {cpus[-1]:.0f} us/frame")
    finally:
        if daemon is not None:
            daemon.stop()
    ro = read_only_rate(args.reference, args.distorted)
    med = statistics.median(rates)
    print(f"median: {med:.0f} frames/s, client CPU {statistics.median(cpus):.0f} us/frame; "
          f"read-only {ro:.0f} frames/s; scored/read-only {med / ro:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
