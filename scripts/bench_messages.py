#!/usr/bin/env python3
"""The protocol's per-frame message costs, µs, in this process (no socket, no daemon).

    python3 scripts/bench_messages.py [--repeats R] [--frames N]

What the daemon's trio thread and a producer pay per frame in the sans-I/O
layer: encoding a ``released`` and a ``result`` (three messages a frame leave
the daemon: a result, two releases), decoding them (the producer reads them),
and decoding a frame's submit -- one ``submit`` packet per frame against one
``submit_many`` of N frames, per frame.  Medians over R repeats (min and max
too: the machine is shared).

The daemon's side, per frame: a frame's result and two ``released`` packed as single
messages (``FramePackets``, what the ledger sends a client) against runs of ``--frames``
frames (``result_run``, ``released_many``: a client whose hello asked for outcome runs).

The client's receive path, per frame: a bundle of ``--frames`` frames' messages as the daemon
sends them (each frame's two ``released``, then the results), or the two runs that stand for
them (``--frames`` frames a run), read by
``ClientConnection.receive_packet`` (what a raw protocol client, the benchmarks' producer,
runs) and by ``ClientTracker.receive`` (the client library's, under ``vmafx.Client`` and
``BlockingClient``): decoding, the frame ledger's checks, and the tracker's own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

from vmafx.protocol import Released, Result, Submit, SubmitFrame, SubmitMany  # noqa: E402
from vmafxd.frame_packets import FramePackets  # noqa: E402
from vmafx.protocol.messages import BufferRegistered, SessionOpened  # noqa: E402
from vmafx.protocol.codec import bundle, decode, encode  # noqa: E402
from vmafx.protocol.state import State  # noqa: E402
from vmafx.tracking import ClientTracker  # noqa: E402

METRICS = {"psnr_y": 40.1, "psnr_cb": 41.2, "psnr_cr": 42.0}


def per_call_us(fn, number: int, repeats: int, per: int = 1) -> list[float]:
    return [t / number / per * 1e6 for t in timeit.repeat(fn, number=number, repeat=repeats)]


def frames_bundle(session: int, first: int, n: int) -> bytes:
    """What the daemon sends for frames first..first+n-1 in one packet: the releases, then the results."""
    msgs = [encode(Released(buffer=1 + role, session=session, index=i, role=("ref", "dist")[role]))[0]
            for i in range(first, first + n) for role in (0, 1)]
    msgs += [encode(Result(session=session, index=i, metrics=METRICS))[0] for i in range(first, first + n)]
    return bundle(msgs)


def frames_runs(session: int, first: int, n: int) -> bytes:
    """The same frames as two runs, in one bundle: their releases (released_many), then their results."""
    fp, indices = FramePackets(), list(range(first, first + n))
    return bundle(fp.released_many(session, indices, [1] * n, [2] * n)
                  + fp.result_run(session, [(i, METRICS) for i in indices], 65536))


def receive_path_us(n: int, rounds: int, repeats: int, library: bool, runs: bool = False) -> list[float]:
    """µs a frame for a bundle of ``n`` frames (``runs``: as runs) through ClientConnection.receive_packet,
    or (``library``) ClientTracker.receive; the frames are submitted (untimed) before each bundle."""
    out = []
    for _ in range(repeats):
        tracker = ClientTracker("bench")
        conn = tracker.conn
        conn.state, conn.bundles, conn.submit_many, conn.outcome_runs = State.OPEN, True, True, runs
        st = tracker.opened(SessionOpened(re=0, session=3, lane="emu", metrics=tuple(METRICS)),
                            width=64, height=64, pixel_format="yuv420p", bitdepth=8)
        ref, dist = (tracker.registered(BufferRegistered(re=0, buffer=b)) for b in (1, 2))
        spent = 0.0
        for r in range(rounds):
            indices = range(r * n, (r + 1) * n)
            data = (frames_runs if runs else frames_bundle)(3, r * n, n)
            if library:
                tracker.submit_packet(st, [(i, ref, dist) for i in indices])
                t0 = time.perf_counter()
                tracker.receive(data)
                spent += time.perf_counter() - t0
                st.outcomes.clear()
            else:
                conn.ledger.submitted_many(3, list(indices))
                t0 = time.perf_counter()
                conn.receive_packet(data)
                spent += time.perf_counter() - t0
        out.append(spent / (rounds * n) * 1e6)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--frames", type=int, default=32, help="frames of the submit_many packet")
    args = ap.parse_args()
    released = Released(buffer=7, session=3, index=100, role="ref")
    result = Result(session=3, index=100, metrics={"psnr_y": 40.1, "psnr_cb": 41.2, "psnr_cr": 42.0})
    released_wire, result_wire = encode(released)[0], encode(result)[0]
    submit_wire = encode(Submit(session=3, index=5, ref=1, dist=2))[0]
    many_wire = encode(SubmitMany(session=3, frames=tuple(SubmitFrame(i, 1, 2) for i in range(args.frames))))[0]
    rows = [
        ("encode released", per_call_us(lambda: encode(released), 20000, args.repeats)),
        ("encode result (3 metrics)", per_call_us(lambda: encode(result), 20000, args.repeats)),
        ("decode released", per_call_us(lambda: decode(released_wire), 20000, args.repeats)),
        ("decode result (3 metrics)", per_call_us(lambda: decode(result_wire), 20000, args.repeats)),
        ("decode submit, per frame", per_call_us(lambda: decode(submit_wire), 20000, args.repeats)),
        (f"decode submit_many of {args.frames}, per frame",
         per_call_us(lambda: decode(many_wire), 20000 // args.frames, args.repeats, args.frames)),
    ]
    rounds = max(1, 20000 // args.frames)
    fp, n = FramePackets(), args.frames
    run = [(i, METRICS) for i in range(n)]
    idx, ones, twos = list(range(n)), [1] * n, [2] * n

    def singles():
        for i, m in run:
            fp.result(3, i, m)
            fp.released_pair(3, i, 1, 2)

    def runs():
        fp.result_run(3, run, 65536)
        fp.released_many(3, idx, ones, twos)

    rows += [
        ("daemon: a frame's result and two released, single packets (FramePackets), per frame",
         per_call_us(singles, rounds, args.repeats, n)),
        (f"daemon: the same as runs of {n} (result_run, released_many), per frame",
         per_call_us(runs, rounds, args.repeats, n)),
    ]
    rows += [
        (f"receive a bundle of {args.frames} frames (ClientConnection.receive_packet), per frame",
         receive_path_us(args.frames, rounds, args.repeats, library=False)),
        (f"receive a bundle of {args.frames} frames (ClientTracker.receive, the library), per frame",
         receive_path_us(args.frames, rounds, args.repeats, library=True)),
        (f"receive runs of {args.frames} frames (ClientConnection.receive_packet), per frame",
         receive_path_us(args.frames, rounds, args.repeats, library=False, runs=True)),
        (f"receive runs of {args.frames} frames (ClientTracker.receive, the library), per frame",
         receive_path_us(args.frames, rounds, args.repeats, library=True, runs=True)),
    ]
    for name, us in rows:
        print(f"{name}: {statistics.median(us):.2f} us (min {min(us):.2f}, max {max(us):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
