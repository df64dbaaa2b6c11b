#!/usr/bin/env python3
"""Where a profiled daemon's threads spend their time: py-spy's raw (collapsed) stacks summed.

    py-spy record --subprocesses --threads [--gil | --idle] -f raw -o RAW -- python3 scripts/bench_gpu.py ...
    python3 scripts/spy_summary.py RAW [--process 'vmafxd --socket'] [--thread vmafxd-cuda0] [--top 25]

A raw line is ``process;...;thread;frame;frame ... COUNT`` (``--subprocesses`` nests a child's
process frame under its parent's).  For every thread of the processes whose command line holds
``--process`` this prints its samples and the share of them spent waiting (the innermost frame
one of ``WAITS``: epoll, a condition, a queue, the driver's synchronize, sleep), then for the
threads named by ``--thread`` (every thread without it) the functions by inclusive share and
the lines by exclusive share.  With ``--gil`` in the recording only the thread holding the
interpreter lock is sampled, so the threads' shares are who holds it; with ``--idle`` every
thread is sampled, waiting included (wall clock).  Import-time stacks are left out.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

#: innermost frames that mean the thread is waiting, not working (function names as py-spy prints them)
WAITS = ("EpollIOManager.get_events", "Condition.wait", "Event.wait", "DeviceWorker.run_forever",
         "event_synchronize", "stream_synchronize", "sleep", "select", "_recv_into", "WorkerThread._work")
#: the runtime's wrappers around a driver call: the frame above says what the call is
DRIVER_CALLS = ("StatusDriver.call", "StatusDriver._ready")
#: the project's own frames (the inclusive list shows these): a path through one of its folders
PROJECT = re.compile(r"[(/](vmafxd|vmafx|scripts|tests)/")

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::(?P<line>\d+))?\)$")


def _frame(text: str) -> tuple[str, str]:
    """py-spy's ``func (path/file.py:line)`` -> (``func (file.py)``, ``func (file.py:line)``)."""
    m = _FRAME.match(text)
    if m is None:
        return text, text
    name = f"{m['func']} ({m['file'].rsplit('/', 1)[-1]}"
    return name + ")", name + (f":{m['line']})" if m["line"] else ")")


def waiting(stack: tuple[str, ...]) -> bool:
    """Whether a stack's innermost frame (or the call a driver wrapper makes) is a wait."""
    k = len(stack) - 1
    while k > 0 and stack[k].startswith(DRIVER_CALLS):
        k -= 1
    return k >= 0 and any(w in stack[k].split(" (", 1)[0] for w in WAITS)


def read(path: str, process: str):
    """{thread: Counter of stacks (tuples of frames, outermost first)} for the matching processes."""
    threads: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit() or "importlib._bootstrap" in stack:
                continue
            parts = stack.split(";")
            if not parts[0].startswith("process "):  # recorded with -p PID: one process, no frame of its own
                rest = parts if process == "" else []
            else:
                at = next((i for i, p in enumerate(parts) if p.startswith("process ") and process in p), None)
                rest = parts[at + 1:] if at is not None else []
            if not rest:
                continue
            if rest[0].startswith("process "):  # a child of the matched process: its own line
                continue
            threads[rest[0]][tuple(rest[1:])] += int(count)
    return threads


def summarize(threads, thread_filter: str | None, top: int, out=sys.stdout) -> None:
    total = sum(sum(c.values()) for c in threads.values()) or 1
    print(f"{'samples':>8} {'of all':>7} {'waiting':>8}  thread", file=out)
    for name, stacks in sorted(threads.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(stacks.values())
        waits = sum(c for s, c in stacks.items() if s and waiting(s))
        print(f"{n:8d} {100 * n / total:6.1f}% {100 * waits / max(n, 1):7.1f}%  {name}", file=out)
    for name, stacks in threads.items():
        if thread_filter is not None and thread_filter not in name:
            continue
        n = sum(stacks.values())
        if not n:
            continue
        incl: collections.Counter = collections.Counter()
        excl: collections.Counter = collections.Counter()
        for stack, count in stacks.items():
            if not stack:
                continue
            for fn in {_frame(f)[0] for f in stack if PROJECT.search(f)}:
                incl[fn] += count
            excl[_frame(stack[-1])[1]] += count
        print(f"\n{name}: {n} samples\n  inclusive (the project's functions)", file=out)
        for fn, c in incl.most_common(top):
            print(f"  {100 * c / n:6.1f}%  {fn}", file=out)
        print("  exclusive (the innermost line)", file=out)
        for fn, c in excl.most_common(top):
            print(f"  {100 * c / n:6.1f}%  {fn}", file=out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", help="py-spy record -f raw's output")
    ap.add_argument("--process", default="vmafxd --socket",
                    help="a substring of the process's command line ('' for a file recorded with -p PID)")
    ap.add_argument("--thread", default=None, help="detail only the threads whose name holds this")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    threads = read(args.raw, args.process)
    if not threads:
        print(f"no samples of a process matching {args.process!r} in {args.raw}", file=sys.stderr)
        return 1
    summarize(threads, args.thread, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
