#!/usr/bin/env python3
"""Files in, scores out: how fast a y4m pair can be read, and how fast ``vmafxctl score`` scores it.

    python3 scripts/bench_files.py [-r REF.y4m -d DIST.y4m | --make WxH:FRAMES] [--lane cuda]
                                   [--reps 3] [--threads 1,2,4,8] [--dir DIR] [--no-score]

On the same two files (``--make`` writes a synthetic pair with scripts/make_clips.py into
``--dir``, default /dev/shm when it exists: the page cache, as a file scored right after it
was written is), after one untimed ``cat`` so every figure reads from memory, prints one line
each, as medians of ``--reps`` runs, in frame pairs a second:

    cat              ``cat REF DIST > /dev/null``: the shell's read ceiling
    pyread           one Python thread, ``readinto`` frame by frame (scripts/y4m_read_rate.py)
    preadv N         N threads reading frames by position (vmafx.io.parallel_read, what the
                     in-process GPU path runs) into four 64 MiB buffers, as into its page-locked
                     slots, the next buffer's reads started while this one's finish
    mmap N           the same, the frames copied out of a mapping of each file with numpy
                     (``np.copyto`` drops the GIL for the copy; $VMAFX_READ_MMAP=1): the
                     alternative to preadv
    score T          ``vmafxctl score --in-process --lane LANE`` as a whole process (start-up
                     included), $VMAFX_READ_THREADS=T: 1 (one reader, as before) and the
                     default; ``score mmap``: the default with $VMAFX_READ_MMAP=1

(the steps run in rounds, each round every step once), then the ratios the aim is stated
in: score / pyread, score / cat, and the best preadv against one thread and against mmap.  ``--lane emu`` (the kernels' CPU emulator) is a smoke test on a machine
without a GPU: its score rate is the emulator's, not a figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import numpy as np  # noqa: E402

from vmafx.io.inputs import open_input  # noqa: E402
from vmafx.io.parallel_read import ParallelPairReads  # noqa: E402
# the in-process path's batch size and slots, as it sizes them
from vmafxd.lanes.gpu.in_process import BATCH, SLOTS, batch_for  # noqa: E402

SCORE = ("import sys; from vmafx.cli import main; "
         "sys.exit(main(['score', '-r', sys.argv[1], '-d', sys.argv[2], '-q', '--in-process', '--lane', sys.argv[3]]))")
#: --lane emu: the command's --lane cuda with the kernels' CPU emulator standing in for CUDA
EMU = ("import sys; from vmafxd.lanes.gpu import in_process as g; g.RUNTIMES['cuda'] = g.RUNTIMES['emu']; "
       "sys.argv[3] = 'cuda'; " + SCORE)


def _batch(fs: int) -> int:
    return batch_for(2 * fs, BATCH)


_hosts: dict[tuple[int, int], np.ndarray] = {}


def _host(fs: int, k: int = 0) -> np.ndarray:
    """Batch buffer ``k``, made once and touched, as page-locked slots are (no page faults timed)."""
    if (fs, k) not in _hosts:
        _hosts[fs, k] = np.ones(2 * _batch(fs) * fs, np.uint8)
    return _hosts[fs, k]


def read_cat(ref: str, dist: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["cat", ref, dist], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def read_python(ref: str, dist: str) -> float:
    sys.path.insert(0, str(ROOT / "scripts"))
    from y4m_read_rate import read_pair

    return read_pair(ref, dist)[2]


def read_at(ref: str, dist: str, threads: int, mapped: bool = False) -> float:
    """As the in-process reader does it: ``SLOTS`` batch buffers, each batch's reads started as
    soon as a buffer is free (vmafxd/lanes/gpu/batch_filler.py), results taken in order;
    ``mapped``: the frames copied out of a mapping of each file ($VMAFX_READ_MMAP=1)."""
    t0 = time.perf_counter()
    pool = ParallelPairReads(threads)
    try:
        with open_input(ref) as r, open_input(dist) as d:
            fs = r.info.frame_size
            batch = _batch(fs)
            ra, da = r.frames_at(mapped=mapped), d.frames_at(mapped=mapped)
            inflight: deque = deque()
            planned, done = 0, False
            free = [memoryview(_host(fs, k)) for k in range(SLOTS)]
            while not done or inflight:
                if free and not done:
                    host = free.pop()
                    inflight.append((host, pool.start(ra, da, host, fs, batch, planned)))
                    planned += batch
                    continue
                host, reads = inflight.popleft()
                if reads.result() < batch:  # the end: what was started after it is past it
                    done = True
                    for _h, later in inflight:
                        later.wait()
                    inflight.clear()
                free.append(host)
            ra.close()
            da.close()
    finally:
        pool.close()
    return time.perf_counter() - t0


def score(ref: str, dist: str, lane: str, threads: int | None, pycache: str, mapped: bool = False) -> float:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache  # as an installed command starts: from compiled bytecode
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "client"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("VMAFX_READ_THREADS", None)
    env["VMAFX_READ_MMAP"] = "1" if mapped else "0"
    if threads is not None:
        env["VMAFX_READ_THREADS"] = str(threads)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", EMU if lane == "emu" else SCORE, ref, dist, lane], env=env,
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench_files: vmafxctl score --lane {lane} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", dest="ref")
    ap.add_argument("-d", dest="dist")
    ap.add_argument("--make", metavar="WxH:FRAMES", default="1920x1080:300")
    ap.add_argument("--dir", help="where --make writes (default /dev/shm, else a temporary folder)")
    ap.add_argument("--lane", default="cuda", choices=("cuda", "hip", "emu", "cpu"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2,4,8", help="thread counts for preadv and mmap")
    ap.add_argument("--no-score", action="store_true", help="the read ceilings only")
    a = ap.parse_args()
    counts = [int(t) for t in a.threads.split(",")]
    with tempfile.TemporaryDirectory(dir=a.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)) as tmp:
        ref, dist = a.ref, a.dist
        if not (ref and dist):
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_clips.py"), tmp, a.make],
                           check=True, stdout=subprocess.DEVNULL)
            size = a.make.split(":")[0]
            ref, dist = os.path.join(tmp, f"ref_{size}.y4m"), os.path.join(tmp, f"dist_{size}.y4m")
        with open_input(ref) as r:
            frames, info = r.total, r.info
        read_cat(ref, dist)  # into the page cache
        for k in range(SLOTS):
            _host(info.frame_size, k)  # the buffers touched before anything is timed
        gb = 2 * frames * info.frame_size / 1e9
        print(f"{os.path.basename(ref)} + {os.path.basename(dist)}: {info.width}x{info.height} "
              f"{info.pixel_format.value} {info.bitdepth}-bit, {frames} frames, {gb:.2f} GB; "
              f"{os.cpu_count()} CPUs; medians of {a.reps}", flush=True)
        steps = [("cat", lambda: read_cat(ref, dist)), ("pyread", lambda: read_python(ref, dist))]
        steps += [(f"preadv {t}", lambda t=t: read_at(ref, dist, t)) for t in counts]
        steps += [(f"mmap {t}", lambda t=t: read_at(ref, dist, t, True)) for t in counts]
        if not a.no_score:
            pycache = os.path.join(tmp, "pycache")
            score(ref, dist, a.lane, 1, pycache)  # once untimed: bytecode and the kernel cache written
            steps += [("score 1", lambda: score(ref, dist, a.lane, 1, pycache)),
                      ("score default", lambda: score(ref, dist, a.lane, None, pycache)),
                      ("score mmap", lambda: score(ref, dist, a.lane, None, pycache, True))]
        # rounds of every step in turn: on a shared machine the load drifts between rounds, and
        # each figure is compared with the others of its own rounds
        secs: dict[str, list[float]] = {name: [] for name, _ in steps}
        for _ in range(a.reps):
            for name, fn in steps:
                secs[name].append(fn())
        rates = {name: frames / statistics.median(t) for name, t in secs.items()}
        for name, rate in rates.items():
            print(f"{name:<14} {rate:10.1f} frames/s  {2 * frames * info.frame_size * rate / frames / 1e9:6.2f} GB/s  "
                  f"(runs: {', '.join(f'{frames / t:.0f}' for t in secs[name])})", flush=True)
    best = max((k for k in rates if k.startswith("preadv")), key=rates.get)
    best_mmap = max((k for k in rates if k.startswith("mmap")), key=rates.get)
    print(f"RATIO {best} / preadv {counts[0]}: {rates[best] / rates[f'preadv {counts[0]}']:.2f}; "
          f"{best} / {best_mmap}: {rates[best] / rates[best_mmap]:.2f}; {best} / cat: {rates[best] / rates['cat']:.2f}")
    if "score default" in rates:
        s = rates["score default"]
        print(f"RATIO score default / pyread: {s / rates['pyread']:.2f}; / cat: {s / rates['cat']:.2f}; "
              f"/ score 1: {s / rates['score 1']:.2f}; score mmap / score default: {rates['score mmap'] / s:.2f}  "
              f"(lane {a.lane})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
