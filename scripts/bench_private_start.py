"""How long a private daemon takes to start (PrivateDaemon.start() until it listens), and to stop.

    python3 scripts/bench_private_start.py [--lane cpu] [--repeats 5]

Prints each run and the median.  The target (issue 14) is at most 0.5 s for the CPU lane.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _checkout import ROOT

from vmafx.private_daemon import PrivateDaemon  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lane", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    starts, stops = [], []
    for i in range(args.repeats):
        # the daemon of this tree (not whatever vmafxd the environment has installed)
        d = PrivateDaemon(lane=args.lane, environment={"PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"})
        t0 = time.perf_counter()
        d.start()
        t1 = time.perf_counter()
        rc = d.stop()
        t2 = time.perf_counter()
        starts.append(t1 - t0)
        stops.append(t2 - t1)
        print(f"run {i + 1}: start {starts[-1]:.3f} s, stop {stops[-1]:.3f} s (exit {rc})")
    print(f"median: start {statistics.median(starts):.3f} s, stop {statistics.median(stops):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
