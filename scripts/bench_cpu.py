#!/usr/bin/env python3
"""CPU-lane throughput: frames/s for vmaf_v0.6.1 and each feature alone, on one core;
with ``--libvmaf``, side by side with libvmaf's own single-threaded C.

    python3 scripts/bench_cpu.py [--frames N] [--repeats R] [--threads 1] [--small] [--only a,b]
    python3 scripts/bench_cpu.py --libvmaf /path/to/vmaf [--frames N] [--repeats R] [--cycles K]

Pairs: the bundled 576x324 sample (tests/data), and 1920x1080 — the reference
set's p14 when ../shared/reference exists, else a synthetic pair made by
upscaling the sample (same content statistics, same code paths).  Prints the
median of R runs; the machine's other load shows in the spread, so the min and
max are printed too.  Threads are pinned (BLAS, OpenMP) to --threads before
numpy loads.  The features are every feature of the registry that has a CPU
twin, as found at run time (so new ones are benchmarked without editing this).

With ``--libvmaf`` (the ``vmaf`` tool, e.g. from scripts/build_libvmaf.sh) the
same frames are written once to a y4m pair in a temporary folder and, per
feature, libvmaf runs ``--threads 1 --no_prediction --feature NAME`` (a model:
``--model version=NAME``) on them.  How its cost per frame is isolated:

* CPU time, not wall time, on both sides: the child's user+sys seconds from
  ``getrusage(RUSAGE_CHILDREN)`` around each run, and this process's
  ``time.process_time()`` around our twin.  The machine is shared, and wall
  time counts the time others hold the core; CPU time does not.
* libvmaf always reads and decodes the y4m, hands every picture to
  ``vmaf_read_pictures`` and starts and ends its process and its thread pool.
  That cost is measured alone by a run with no feature at all (``--no_prediction``
  and no ``--feature``: the tool reads every frame and registers no extractor)
  and subtracted: libvmaf's time for a feature = (run with it) - (run without),
  each run with the feature paired with a no-feature run just before it (the
  median of the R differences), so that the machine's changing load cancels.
  Our twin is timed on pictures already in memory, so neither side pays decoding.
* libvmaf's y4m holds our frames K times over (``--cycles``, default 8), so
  that its per-feature CPU time is well above the timer's resolution and the
  baseline's noise; frames/s divide by the frames each side actually scored.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: our feature name -> libvmaf's ``--feature`` name, where they differ.  Our
#: declarations are named by libvmaf's extractor names (vmafxd/features/declaration.py),
#: so this is empty unless a feature is renamed.
LIBVMAF_FEATURE_NAME: dict[str, str] = {}


def _pin_threads(n: int) -> None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        os.environ[var] = str(n)


def _pairs(frames: int, frames_1080: int):
    import numpy as np

    from tests.reference import full_pairs, vendored_pairs
    from vmafxd.core.picture import Picture

    sample = vendored_pairs()[0]
    refs, dists = sample.pictures()
    out = [("576x324", sample.width, sample.height, refs[:frames], dists[:frames])]
    p14 = [p for p in full_pairs() if p.width == 1920]
    if p14:
        r, d = p14[0].pictures()
        out.append(("1920x1080 (p14)", 1920, 1080, r[:frames_1080], d[:frames_1080]))
    else:
        def up(p: Picture) -> Picture:
            planes = []
            for k, pl in enumerate(p.planes):
                shape = (1080, 1920) if k == 0 else (540, 960)
                ys = (np.arange(shape[0]) * pl.shape[0] // shape[0])[:, None]
                xs = (np.arange(shape[1]) * pl.shape[1] // shape[1])[None, :]
                planes.append(np.ascontiguousarray(pl[ys, xs]))
            return Picture(tuple(planes), p.bitdepth, p.subsampling)

        out.append(("1920x1080 (synthetic)", 1920, 1080, [up(x) for x in refs[:frames_1080]],
                    [up(x) for x in dists[:frames_1080]]))
    return out


def _configs(models: list[str]):
    """(name, models, feature requests, libvmaf arguments) for each model and each registered feature."""
    from vmafxd.core.scoring import FeatureRequest
    from vmafxd.features import all_declarations
    from vmafxd.model import load_model

    out = [(m, [load_model(f"version={m}")], [], ["--model", f"version={m}"]) for m in models]
    for decl in sorted(all_declarations(), key=lambda d: d.name):
        if decl.cpu is None:
            continue
        lv = LIBVMAF_FEATURE_NAME.get(decl.name, decl.name)
        out.append((decl.name, [], [FeatureRequest(decl.name)], ["--no_prediction", "--feature", lv]))
    return out


def _time_ours(plan, w: int, h: int, rr, dd) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of our CPU lane over the frames."""
    from vmafxd.core.scoring import CpuScorer

    sc = CpuScorer(plan, w, h, rr[0].bitdepth)
    c, t = time.process_time(), time.perf_counter()
    for i, (a, b) in enumerate(zip(rr, dd)):
        sc.push(i, a, b)
    sc.finish()
    return time.process_time() - c, time.perf_counter() - t


def _write_y4m(path: Path, pictures, cycles: int) -> None:
    p0 = pictures[0]
    if p0.bitdepth != 8 or len(p0.planes) != 3 or p0.planes[1].shape[1] * 2 != p0.width:
        raise SystemExit("bench_cpu: the libvmaf comparison writes 8-bit 4:2:0 only")
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{p0.width} H{p0.height} F25:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(cycles):
            for p in pictures:
                f.write(b"FRAME\n")
                for plane in p.planes:
                    f.write(plane.tobytes())


def _time_libvmaf(vmaf: str, ref: Path, dist: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one libvmaf run."""
    cmd = [vmaf, "-r", str(ref), "-d", str(dist), "--threads", "1", "-q", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _lane_table(args) -> int:
    from vmafxd.core.scoring import ScoringPlan

    configs = _configs(["vmaf_v0.6.1", "vmaf_float_v0.6.1"])
    if args.only:
        configs = [c for c in configs if c[0] in args.only]
    print(f"CPU lane, {args.threads} thread(s), {args.frames} frames a run, median of {args.repeats} runs")
    print(f"{'size':24} {'what':14} {'fps':>8} {'ms/frame':>9} {'min..max fps':>16}")
    for label, w, h, rr, dd in _pairs(args.frames, args.frames)[:1 if args.small else None]:
        for name, models, feats, _ in configs:
            plan = ScoringPlan.build(models, feats)
            fps = []
            for _ in range(args.repeats):
                _, wall = _time_ours(plan, w, h, rr, dd)
                fps.append(len(rr) / wall)
            med = statistics.median(fps)
            print(f"{label:24} {name:14} {med:8.1f} {1000 / med:9.1f} {min(fps):7.1f}..{max(fps):<7.1f}", flush=True)
    return 0


def _versus_libvmaf(args) -> int:
    from vmafxd.core.scoring import ScoringPlan

    vmaf = args.libvmaf
    v = subprocess.run([vmaf, "--version"], capture_output=True, text=True)
    version = (v.stdout + v.stderr).strip()
    configs = _configs(args.model)
    only = set(args.only)
    if only:
        configs = [c for c in configs if c[0] in only]
    print(f"libvmaf {version} ({vmaf}) --threads 1 vs our CPU twin, 1 thread; CPU seconds; "
          f"median of {args.repeats}; libvmaf minus its no-feature run; libvmaf scores each frame {args.cycles}x",
          flush=True)
    head = f"{'size':22} {'feature':14} {'libvmaf fps':>11} {'ours fps':>9} {'ours/libvmaf':>12} {'within 5x':>9}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cpu_") as tmp:
        for label, w, h, rr, dd in _pairs(args.frames, args.frames_1080):
            ref, dist = Path(tmp) / "ref.y4m", Path(tmp) / "dist.y4m"
            _write_y4m(ref, rr, args.cycles)
            _write_y4m(dist, dd, args.cycles)
            n_lv = len(rr) * args.cycles
            def baseline() -> float:
                return _time_libvmaf(vmaf, ref, dist, ["--no_prediction"])[0]

            base = statistics.median(baseline() for _ in range(args.repeats))
            print(f"{label}: libvmaf's no-feature run (read, decode, start): {base / n_lv * 1e3:.2f} ms/frame "
                  f"CPU over {n_lv} frames", flush=True)
            print(head, flush=True)
            for name, models, feats, lv_args in configs:
                bound = ""
                try:
                    # each run paired with a no-feature run just before it, so that a
                    # change in the machine's load between features cancels out
                    bases, diffs = [], []
                    for _ in range(args.repeats):
                        bases.append(baseline())
                        diffs.append(_time_libvmaf(vmaf, ref, dist, lv_args)[0] - bases[-1])
                    cost = statistics.median(diffs)
                    # a cost within the no-feature runs' own spread cannot be told from it:
                    # libvmaf is at least this fast, our ratio at most this
                    floor = max(max(bases) - min(bases), 1e-3)
                    if cost < floor:
                        bound, cost = ">", floor
                    lv_fps = n_lv / cost
                except RuntimeError as e:
                    print(f"  libvmaf cannot run {name}: {e}", flush=True)
                    lv_fps = float("nan")
                plan = ScoringPlan.build(models, feats)
                ours = statistics.median(_time_ours(plan, w, h, rr, dd)[0] for _ in range(args.repeats))
                our_fps = len(rr) / ours
                ratio = our_fps / lv_fps
                if ratio != ratio:
                    ok = "?"
                else:
                    ok = "yes" if ratio >= 0.2 and not bound else ("no" if ratio < 0.2 else "?")
                rbound = "<" if bound else ""
                rows.append((label.split()[0], name, f"{bound}{lv_fps:.1f}", f"{our_fps:.1f}", f"{rbound}{ratio:.3f}", ok))
                print(f"{label:22} {name:14} {bound + format(lv_fps, '.1f'):>11} {our_fps:9.1f} "
                      f"{rbound + format(ratio, '.3f'):>12} {ok:>9}", flush=True)
    if args.markdown:
        print("\n| size | feature | libvmaf fps | ours fps | ours/libvmaf | within 5x |\n|---|---|---:|---:|---:|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=12, help="frames a run (576x324; 1080p too without --libvmaf)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--libvmaf", metavar="PATH", help="libvmaf's vmaf tool: compare each feature with it")
    ap.add_argument("--frames-1080", type=int, default=4, help="with --libvmaf: frames a run at 1080p")
    ap.add_argument("--cycles", type=int, default=8, help="with --libvmaf: times libvmaf's y4m repeats the frames")
    ap.add_argument("--model", action="append", default=None,
                    help="with --libvmaf: model versions to compare too (default vmaf_v0.6.1; 'none' for none)")
    ap.add_argument("--only", action="append", default=[],
                    help="only these features/models (comma-separated, or repeat the flag)")
    ap.add_argument("--small", action="store_true", help="the 576x324 pair only (without --libvmaf)")
    ap.add_argument("--no-keep-heap", action="store_true",
                    help="leave glibc's allocator defaults (the CPU lane keeps its heap: cpu_alloc.py)")
    ap.add_argument("--markdown", action="store_true", help="with --libvmaf: also print the table as markdown")
    args = ap.parse_args()
    args.only = [x for o in args.only for x in o.split(",") if x]
    _pin_threads(args.threads)
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]
    from vmafxd.lanes.cpu_alloc import keep_heap

    # the allocator as the CPU lane runs it (vmafxd/lanes/cpu_alloc.py); --no-keep-heap for the A/B
    heap = keep_heap(not args.no_keep_heap)
    print(f"allocator: {'keeping the heap ' + str(heap) if heap else 'glibc defaults'}", flush=True)
    if args.libvmaf:
        if args.threads != 1:
            ap.error("--libvmaf compares single-threaded runs: leave --threads at 1")
        args.model = [m for m in (args.model or ["vmaf_v0.6.1"]) if m != "none"]
        return _versus_libvmaf(args)
    return _lane_table(args)


if __name__ == "__main__":
    sys.exit(main())
