#!/usr/bin/env python3
"""The summary lines of scripts/bench_vs_libvmaf.sh, from the logs it leaves.

    python3 scripts/bench_vs_libvmaf_summary.py files LOGDIR
    python3 scripts/bench_vs_libvmaf_summary.py bench LOGDIR

``files``: LOGDIR/runs.tsv has one row per timed run (written by the shell script; tab
separated, a header line first)::

    size  frames  tool  rep  rc  wall_s  user_s  sys_s  daemon_cpu_s  log  json

``tool`` is one of :data:`TOOLS`; ``log`` and ``json`` are file names in LOGDIR (``-``
for none); ``daemon_cpu_s`` is the CPU time of the already-running daemon during the run
(``vxs`` only; the others' children are in user/sys). Printed, per size:

* ``RESULT <size> <tool>: ...`` the median of the repetitions' wall-clock frames/s (process
  start to end: what a user waits for), each run's figure, how many runs scored every
  frame, CPU seconds per 1,000 frames, the pooled VMAF mean, and libvmaf's own ``fps``;
* ``RATIO <size> <a>/<b>: ...`` vmafxctl (private daemon ``vx``, running daemon ``vxs``)
  against libvmaf CUDA, libvmaf CPU and the two read ceilings;
* ``ACCURACY <size> <a> vs <b>: ...`` the largest per-frame VMAF difference between every
  two scorers (first repetition of each), how many frames differ, the pooled means'
  difference; and whether each scorer's repetitions gave identical scores.

``bench``: every figure line of scripts/bench_gpu.py in LOGDIR/bench_*.log becomes a
``RESULT bench ...`` line, and each size's daemon figure (most frames in flight) over the
engine-alone figure a ``RATIO bench <size> daemon/engine`` line.

Missing or failed runs are said as such (``no complete run``), never skipped silently; a libvmaf
CUDA run whose log says it fell back to the CPU (no driver or device) counts as failed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

#: tool key -> what it is, in the order lines are printed
TOOLS = {
    "cat": "read ceiling: cat ref dist > /dev/null",
    "pyread": "read ceiling: python frame-by-frame read of both files",
    "cpu": "libvmaf CPU (vmaf --threads N)",
    "cuda": "libvmaf CUDA (vmaf --gpumask 0)",
    "vx": "vmafxctl score --private (daemon started by the client)",
    "vxs": "vmafxctl score --socket (a daemon already running)",
    "vxi": "vmafxctl score --in-process (no daemon: the GPU in this process)",
}
SCORERS = ("cpu", "cuda", "vx", "vxs", "vxi")
#: (numerator, denominator) of the RATIO lines
RATIOS = (("vx", "cuda"), ("vxs", "cuda"), ("vxi", "cuda"), ("vx", "cpu"), ("vxs", "cpu"), ("vxi", "cpu"),
          ("cuda", "cpu"), ("vx", "cat"), ("vx", "pyread"), ("vxs", "cat"), ("vxs", "pyread"), ("vxi", "cat"),
          ("vxi", "pyread"))
COLUMNS = ("size", "frames", "tool", "rep", "rc", "wall_s", "user_s", "sys_s", "daemon_cpu_s", "log", "json")


class SummaryError(ValueError):
    """A malformed runs.tsv row; the message names the line and the field."""


@dataclass(frozen=True)
class Run:
    size: str
    frames: int
    tool: str
    rep: int
    rc: int
    wall_s: float
    user_s: float
    sys_s: float
    daemon_cpu_s: float
    log: str | None
    json: str | None


def read_runs(path: Path) -> list[Run]:
    lines = path.read_text().splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise SummaryError(f"{path}: the first line must be the header {' '.join(COLUMNS)}")
    runs = []
    for no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise SummaryError(f"{path}:{no}: {len(cells)} fields, expected {len(COLUMNS)}")
        row = dict(zip(COLUMNS, cells))
        if row["tool"] not in TOOLS:
            raise SummaryError(f"{path}:{no}: tool {row['tool']!r} is not one of {', '.join(TOOLS)}")
        try:
            runs.append(Run(
                size=row["size"], frames=int(row["frames"]), tool=row["tool"], rep=int(row["rep"]),
                rc=int(row["rc"]), wall_s=_num(row["wall_s"]), user_s=_num(row["user_s"]), sys_s=_num(row["sys_s"]),
                daemon_cpu_s=_num(row["daemon_cpu_s"]),
                log=None if row["log"] in ("", "-") else row["log"],
                json=None if row["json"] in ("", "-") else row["json"]))
        except ValueError as e:
            raise SummaryError(f"{path}:{no}: {e}") from None
    return runs


def _num(cell: str) -> float:
    return float("nan") if cell in ("", "-") else float(cell)


@dataclass
class Scores:
    per_frame: list[float]
    pooled_mean: float
    own_fps: float | None


def load_scores(path: Path) -> Scores | None:
    """Per-frame VMAF of a libvmaf-layout JSON log (libvmaf's or vmafxctl's), None if unusable.

    A log holding only ``{"same_as": NAME}`` stands for the log NAME beside it.
    """
    try:
        d = json.loads(path.read_text())
        if isinstance(d, dict) and set(d) == {"same_as"}:
            # a repetition whose frames equal the first's (the shell script keeps one copy)
            d = json.loads((path.parent / d["same_as"]).read_text())
        per_frame = [float(f["metrics"]["vmaf"]) for f in d["frames"]]
        pooled = float(d["pooled_metrics"]["vmaf"]["mean"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    fps = d.get("fps")
    return Scores(per_frame, pooled, float(fps) if isinstance(fps, (int, float)) else None)


_PYREAD = re.compile(r"^pyread (\d+) frames in ([0-9.]+) s: ([0-9.]+) frames/s", re.M)


def run_fps(run: Run, logdir: Path) -> float | None:
    """Frames/s of one run, or None when it failed. pyread's own timing (no interpreter start) wins."""
    if run.rc != 0 or not run.wall_s > 0:
        return None
    if run.tool == "pyread" and run.log:
        try:
            m = _PYREAD.search((logdir / run.log).read_text())
        except OSError:
            m = None
        if m:
            return float(m.group(3))
    return run.frames / run.wall_s


#: what libvmaf's tool prints when its CUDA state cannot start and it scores on the CPU instead
CUDA_FALLBACK = "using CPU"


def fell_back(run: Run, logdir: Path) -> bool:
    """A libvmaf CUDA run that scored on the CPU (no driver, no device): not a CUDA figure."""
    if run.tool != "cuda" or not run.log:
        return False
    try:
        return CUDA_FALLBACK in (logdir / run.log).read_text(errors="replace")
    except OSError:
        return False


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def summarize_files(logdir: Path) -> list[str]:
    runs = read_runs(logdir / "runs.tsv")
    out: list[str] = []
    sizes = list(dict.fromkeys(r.size for r in runs))
    for size in sizes:
        mine = [r for r in runs if r.size == size]
        frames = mine[0].frames
        fps: dict[str, float] = {}
        first: dict[str, Scores] = {}
        identical: dict[str, bool] = {}
        ran = {r.tool for r in mine}
        cpu_instead: set[str] = set()
        for tool in TOOLS:
            reps = sorted((r for r in mine if r.tool == tool), key=lambda r: r.rep)
            if not reps:
                continue
            figures, complete, scores, fallbacks = [], 0, [], 0
            for r in reps:
                f = run_fps(r, logdir)
                s = load_scores(logdir / r.json) if r.json else None
                ok = f is not None and (tool not in SCORERS or (s is not None and len(s.per_frame) == r.frames))
                if fell_back(r, logdir):
                    fallbacks += 1
                    ok = False
                if ok:
                    complete += 1
                    figures.append(f)
                if s is not None:
                    scores.append(s)
            if fallbacks:
                cpu_instead.add(tool)
            if scores:  # compared below even when incomplete (then said to be not comparable)
                first[tool] = scores[0]
                identical[tool] = all(s.per_frame == scores[0].per_frame for s in scores)
            if not figures:
                out.append(f"RESULT {size} {tool}: no complete run of {len(reps)} ({TOOLS[tool]}; rc "
                           f"{', '.join(str(r.rc) for r in reps)}"
                           f"{f'; fell back to the CPU in {fallbacks}' if fallbacks else ''})")
                continue
            med = statistics.median(figures)
            fps[tool] = med
            line = (f"RESULT {size} {tool}: {_fmt(med)} frames/s median of {len(figures)} "
                    f"(runs {', '.join(_fmt(f) for f in figures)}; {complete}/{len(reps)} complete, {frames} frames)")
            cpu = [(r.user_s + r.sys_s + (0 if math.isnan(r.daemon_cpu_s) else r.daemon_cpu_s)) / r.frames * 1000
                   for r in reps if r.rc == 0 and not math.isnan(r.user_s)]
            if cpu and tool != "pyread":
                line += f"; CPU {_fmt(statistics.median(cpu), 2)} s per 1,000 frames"
            if scores:
                line += f"; pooled VMAF {scores[0].pooled_mean:.6f}"
                own = [s.own_fps for s in scores if s.own_fps is not None]
                if own and tool in ("cpu", "cuda"):
                    line += f"; libvmaf's own fps median {_fmt(statistics.median(own))}"
            if fallbacks:
                line += f"; FELL BACK TO THE CPU in {fallbacks} run(s), left out"
            out.append(f"{line} -- {TOOLS[tool]}")
        for a, b in RATIOS:
            if a in fps and b in fps:
                out.append(f"RATIO {size} {a}/{b}: {fps[a] / fps[b]:.3g}x ({a} {_fmt(fps[a])} / {b} "
                           f"{_fmt(fps[b])} frames/s)")
            else:
                why = [f"{t}: {'no complete run' if t in ran else 'not run'}" for t in (a, b) if t not in fps]
                out.append(f"RATIO {size} {a}/{b}: not available ({'; '.join(why)})")
        for a, b in combinations([t for t in SCORERS if t in first], 2):
            sa, sb = first[a], first[b]
            if len(sa.per_frame) != len(sb.per_frame):
                out.append(f"ACCURACY {size} {a} vs {b}: not comparable ({len(sa.per_frame)} vs "
                           f"{len(sb.per_frame)} frames)")
                continue
            diffs = [abs(x - y) for x, y in zip(sa.per_frame, sb.per_frame)]
            out.append(f"ACCURACY {size} {a} vs {b}: max |per-frame VMAF diff| {max(diffs):.6f} over "
                       f"{len(diffs)} frames ({sum(d > 0 for d in diffs)} differ); |pooled mean diff| "
                       f"{abs(sa.pooled_mean - sb.pooled_mean):.6f}"
                       + "".join(f" ({t} fell back to the CPU)" for t in (a, b) if t in cpu_instead))
        if identical:
            out.append(f"ACCURACY {size} repetitions identical: "
                       + ", ".join(f"{t} {'yes' if identical[t] else 'NO'}" for t in SCORERS if t in identical))
    return out


# bench_gpu.py's figure lines: "daemon <lane> <what> WxH: N fps ...", "engine <what> WxH: N fps ...",
# "producers N <lane> ... WxH: ..."
_FIGURE = re.compile(r"^(daemon|engine|producers)\b.*$", re.M)
_DAEMON = re.compile(r"^daemon \S+ (?:\S+ )?(\d+x\d+): (\d+) fps.*?(\d+) in flight\)")
_ENGINE = re.compile(r"^engine (?:\S+ )?(\d+x\d+): (\d+) fps")


def summarize_bench(logdir: Path) -> list[str]:
    out = []
    daemon: dict[str, tuple[int, int]] = {}  # size -> (in flight, fps) with the most in flight
    engine: dict[str, int] = {}
    for log in sorted(logdir.glob("bench_*.log")):
        for m in _FIGURE.finditer(log.read_text()):
            line = m.group(0)
            out.append(f"RESULT bench {log.stem[len('bench_'):]}: {line}")
            d = _DAEMON.match(line)
            if d:
                size, fps, inflight = d.group(1), int(d.group(2)), int(d.group(3))
                if size not in daemon or inflight > daemon[size][0]:
                    daemon[size] = (inflight, fps)
            e = _ENGINE.match(line)
            if e:
                engine.setdefault(e.group(1), int(e.group(2)))
    for size, (inflight, fps) in daemon.items():
        if size in engine:
            out.append(f"RATIO bench {size} daemon/engine: {fps / engine[size]:.3f} (daemon {fps} fps at "
                       f"{inflight} in flight / engine alone {engine[size]} fps)")
    if not out:
        out.append("RESULT bench: no figure lines found (see the bench_*.log files)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phase", choices=("files", "bench"))
    ap.add_argument("logdir", type=Path)
    args = ap.parse_args(argv)
    try:
        lines = summarize_files(args.logdir) if args.phase == "files" else summarize_bench(args.logdir)
    except (SummaryError, OSError) as e:
        print(f"bench_vs_libvmaf_summary: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
