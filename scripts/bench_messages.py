#!/usr/bin/env python3
"""The protocol's per-frame message costs, µs, in this process (no socket, no daemon).

    python3 scripts/bench_messages.py [--repeats R] [--frames N]

What the daemon's trio thread and a producer pay per frame in the sans-I/O
layer: encoding a ``released`` and a ``result`` (three messages a frame leave
the daemon: a result, two releases), decoding them (the producer reads them),
and decoding a frame's submit -- one ``submit`` packet per frame against one
``submit_many`` of N frames, per frame.  Medians over R repeats (min and max
too: the machine is shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

from vmafx.protocol import Released, Result, Submit, SubmitFrame, SubmitMany  # noqa: E402
from vmafx.protocol.messages import decode, encode  # noqa: E402


def per_call_us(fn, number: int, repeats: int, per: int = 1) -> list[float]:
    return [t / number / per * 1e6 for t in timeit.repeat(fn, number=number, repeat=repeats)]


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
    for name, us in rows:
        print(f"{name}: {statistics.median(us):.2f} us (min {min(us):.2f}, max {max(us):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
