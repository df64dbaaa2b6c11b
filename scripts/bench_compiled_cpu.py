#!/usr/bin/env python3
"""The CPU engines side by side: libvmaf's single-threaded C, the numpy twins, and the
compiled engine (the GPU kernels built for the host, vmafxd/lanes/compiled.py), per feature.

    python3 scripts/bench_compiled_cpu.py [--libvmaf /path/to/vmaf] [--frames N] [--frames-1080 M]
                                          [--repeats R] [--cycles K] [--only a,b] [--markdown]

Everything is CPU time (see scripts/bench_cpu.py for how libvmaf's cost per
frame is isolated: its run minus a no-feature run, each paired).  Our two
engines are timed on pictures already in memory, one thread, the compiled one
after a warm-up push (the kernels are compiled once a process, not timed).
Without ``--libvmaf`` the libvmaf column is left out.  ``auto`` is the CPU lane's
default engine (the native kernels of vmafxd/lanes/native, the features of
AUTO_FEATURES compiled, the rest on the twins): it differs from both columns for a
model and for a feature with a native kernel.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
import bench_cpu  # noqa: E402  (the pairs, the configs, libvmaf's timing)


def _time_engine(engine: str, plan, w: int, h: int, rr, dd) -> float:
    """CPU seconds of one run of an engine over the frames (the compiled one warmed up first)."""
    from vmafxd.core.scoring import CpuScorer
    from vmafxd.lanes.compiled import CompiledScorer, make_cpu_scorer

    def make():
        if engine == "numpy":
            return CpuScorer(plan, w, h, rr[0].bitdepth)
        if engine == "auto":  # the CPU lane's default: compiled where faster, the twins elsewhere
            return make_cpu_scorer(plan, w, h, rr[0].bitdepth, rr[0].subsampling, "auto")
        return CompiledScorer(plan, w, h, rr[0].bitdepth, rr[0].subsampling)

    if engine != "numpy":
        warm = make()
        warm.push(0, rr[0], dd[0])
        if hasattr(warm, "close"):  # a CpuScorer (auto with native kernels only) has none
            warm.close()
    sc = make()
    c = time.process_time()
    for i, (a, b) in enumerate(zip(rr, dd)):
        sc.push(i, a, b)
    sc.finish()
    spent = time.process_time() - c
    if hasattr(sc, "close"):
        sc.close()
    return spent


def _libvmaf_fps(args, ref, dist, n_lv, lv_args) -> tuple[float, str]:
    def baseline() -> float:
        return bench_cpu._time_libvmaf(args.libvmaf, ref, dist, ["--no_prediction"])[0]

    bases, diffs = [], []
    for _ in range(args.repeats):
        bases.append(baseline())
        diffs.append(bench_cpu._time_libvmaf(args.libvmaf, ref, dist, lv_args)[0] - bases[-1])
    cost = statistics.median(diffs)
    floor = max(max(bases) - min(bases), 1e-3)
    if cost < floor:  # within the baseline's noise: libvmaf is at least this fast
        return n_lv / floor, ">"
    return n_lv / cost, ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--libvmaf", metavar="PATH", help="libvmaf's vmaf tool (a libvmaf column when given)")
    ap.add_argument("--frames", type=int, default=6, help="frames a run at 576x324")
    ap.add_argument("--frames-1080", type=int, default=2, help="frames a run at 1080p")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=8, help="times libvmaf's y4m repeats the frames")
    ap.add_argument("--only", action="append", default=[], help="only these features/models (comma-separated)")
    ap.add_argument("--small", action="store_true", help="the 576x324 pair only")
    ap.add_argument("--no-keep-heap", action="store_true",
                    help="leave glibc's allocator defaults (the CPU lane keeps its heap: cpu_alloc.py)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    args = ap.parse_args()
    only = {x for o in args.only for x in o.split(",") if x}
    bench_cpu._pin_threads(1)
    sys.path[:0] = [str(ROOT.parent), str(ROOT.parent / "client")]
    from vmafxd.lanes.cpu_alloc import keep_heap

    # the allocator as the CPU lane runs it (vmafxd/lanes/cpu_alloc.py); --no-keep-heap for the A/B
    heap = keep_heap(not args.no_keep_heap)
    print(f"allocator: {'keeping the heap ' + str(heap) if heap else 'glibc defaults'}", flush=True)
    from vmafxd.core.scoring import ScoringPlan

    configs = bench_cpu._configs(["vmaf_v0.6.1"])
    if only:
        configs = [c for c in configs if c[0] in only]
    if args.libvmaf:
        v = subprocess.run([args.libvmaf, "--version"], capture_output=True, text=True)
        print(f"libvmaf {(v.stdout + v.stderr).strip()} --threads 1, minus its no-feature run; ", end="")
    print(f"numpy twins and compiled engine, 1 thread; CPU time; median of {args.repeats}", flush=True)
    head = (f"{'size':10} {'feature':14} {'libvmaf':>9} {'numpy':>8} {'compiled':>9} {'comp/numpy':>10} "
            f"{'numpy/lv':>9} {'comp/lv':>8} {'5x':>4} {'auto':>7} {'auto/lv':>8}")
    print("(fps)", flush=True)
    print(head, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_compiled_") as tmp:
        pairs = bench_cpu._pairs(args.frames, args.frames_1080)
        for label, w, h, rr, dd in pairs[:1 if args.small else None]:
            size = label.split()[0]
            n_lv = 0
            if args.libvmaf:
                ref, dist = Path(tmp) / "ref.y4m", Path(tmp) / "dist.y4m"
                bench_cpu._write_y4m(ref, rr, args.cycles)
                bench_cpu._write_y4m(dist, dd, args.cycles)
                n_lv = len(rr) * args.cycles
            for name, models, feats, lv_args in configs:
                plan = ScoringPlan.build(models, feats)
                lv, bound = (float("nan"), "")
                if args.libvmaf:
                    try:
                        lv, bound = _libvmaf_fps(args, ref, dist, n_lv, lv_args)
                    except RuntimeError as e:
                        print(f"  libvmaf cannot run {name}: {e}", flush=True)
                fps = {}
                from vmafxd.lanes.compiled import AUTO_FEATURES
                from vmafxd.lanes.native import NATIVE_FEATURES

                # auto differs from both for a model (some of its features compiled) and for a
                # feature with a native kernel
                timed_auto = bool(models) or name in NATIVE_FEATURES
                for engine in ("numpy", "compiled") + (("auto",) if timed_auto else ()):
                    fps[engine] = len(rr) / statistics.median(
                        _time_engine(engine, plan, w, h, rr, dd) for _ in range(args.repeats))
                if not timed_auto:
                    fps["auto"] = fps["compiled" if name in AUTO_FEATURES else "numpy"]
                cn = fps["compiled"] / fps["numpy"]
                nl, cl = fps["numpy"] / lv, fps["compiled"] / lv
                rb = "<" if bound else ""
                ok = "?" if cl != cl or (bound and cl >= 0.2) else ("yes" if cl >= 0.2 else "no")
                al = fps["auto"] / lv
                row = (size, name, f"{bound}{lv:.1f}", f"{fps['numpy']:.1f}", f"{fps['compiled']:.1f}", f"{cn:.1f}x",
                       f"{rb}{nl:.3f}", f"{rb}{cl:.3f}", ok, f"{fps['auto']:.1f}", f"{rb}{al:.3f}")
                rows.append(row)
                print(f"{row[0]:10} {row[1]:14} {row[2]:>9} {row[3]:>8} {row[4]:>9} {row[5]:>10} {row[6]:>9} "
                      f"{row[7]:>8} {row[8]:>4} {row[9]:>7} {row[10]:>8}", flush=True)
    if args.markdown:
        print("\n| size | feature | libvmaf fps | numpy fps | compiled fps | compiled/numpy | numpy/libvmaf "
              "| compiled/libvmaf | compiled within 5x | auto fps | auto/libvmaf |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
