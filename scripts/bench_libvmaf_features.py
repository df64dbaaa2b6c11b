#!/usr/bin/env python3
"""libvmaf's own cost per feature, on this machine: the column beside the GPU engine's figures.

    python3 scripts/bench_libvmaf_features.py [--libvmaf DIR] [--size 1920x1080] [--frames 16]
                                              [--frames-fast 64] [--repeats 3] [--only a,b]
                                              [--modes cpu1,cpuN,cuda] [--dir DIR]

``DIR`` holds libvmaf's ``vmaf`` tool twice, ``cpu/vmaf`` and ``cuda/vmaf``
(``scripts/build_libvmaf.sh``; default ``.libvmaf``).  On one synthetic pair made here
(``scripts/make_clips.py``, deterministic, 8-bit 4:2:0), for every feature this project
declares (the names are libvmaf's extractor names) and for vmaf_v0.6.1 and
vmaf_float_v0.6.1, it times libvmaf in up to three modes:

    cpu1   ``cpu/vmaf --threads 1``          (libvmaf's C, one core)
    cpuN   ``cpu/vmaf --threads N``          (every core of the machine)
    cuda   ``cuda/vmaf --gpumask 0``         (only what libvmaf has kernels for:
                                              vif_cuda, adm_cuda, motion_cuda and
                                              vmaf_v0.6.1, which picks them)

How a feature's cost is isolated: wall-clock time of the whole process, minus the
wall-clock time of the same tool in the same mode with no feature at all
(``--no_prediction`` and no ``--feature``: it starts, reads and decodes every frame,
and, for cuda, starts CUDA and uploads each picture), each feature run paired with
such a run just before it; the median of the differences over ``--repeats``, divided
by the frames: µs a frame.  A difference within the no-feature runs' own spread is
printed as an upper bound (``<``).  ``--frames`` frames for cpu1 (libvmaf's slowest
features take about a second a 1080p frame on one core), ``--frames-fast`` for the
others.  A cuda run whose log says libvmaf fell back to the CPU ("using CPU") is an
error, not a figure.

Output: one ``LIBVMAF <feature> <mode> <µs a frame>`` line each as it goes, then a
markdown table (feature rows, mode columns).  The engine's own figures for the same
features come from ``scripts/bench_gpu.py --engine-only --features F``
(``scripts/h200_run.sh engine``), on the same machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("vmaf_v0.6.1", "vmaf_float_v0.6.1")
#: what libvmaf's CUDA build has kernels for, and their extractors' names there: asked for
#: by its plain name (``--feature vif``) the CUDA tool runs the CPU extractor on one thread;
#: everything else it runs on the CPU only, so timing it there says nothing about a GPU
CUDA_NAMES = {"vif": "vif_cuda", "adm": "adm_cuda", "motion": "motion_cuda", "vmaf_v0.6.1": "vmaf_v0.6.1"}


def features() -> list[str]:
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]
    from vmafxd.features import all_declarations

    return sorted(d.name for d in all_declarations())


def run_tool(tool: Path, args: list[str]) -> float:
    """Wall seconds of one run; an error if it fails or libvmaf's CUDA build fell back to the CPU."""
    t = time.perf_counter()
    proc = subprocess.run([str(tool), "-q", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    if "using CPU" in proc.stderr:
        raise RuntimeError("libvmaf could not start CUDA and fell back to the CPU")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libvmaf", type=Path, default=ROOT / ".libvmaf")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=16, help="frames a cpu1 run")
    ap.add_argument("--frames-fast", type=int, default=64, help="frames a cpuN or cuda run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated features or models")
    ap.add_argument("--modes", default="cpu1,cpuN,cuda")
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = ap.parse_args()

    names = list(MODELS) + features()
    if args.only:
        wanted = set(args.only.split(","))
        names = [n for n in names if n in wanted]
    ncpu = os.cpu_count() or 1
    modes = {
        "cpu1": (args.libvmaf / "cpu" / "vmaf", ["--threads", "1"], args.frames),
        "cpuN": (args.libvmaf / "cpu" / "vmaf", ["--threads", str(ncpu)], args.frames_fast),
        "cuda": (args.libvmaf / "cuda" / "vmaf", ["--gpumask", "0"], args.frames_fast),
    }
    chosen = [m for m in args.modes.split(",") if m]
    for m in chosen:
        if m not in modes:
            raise SystemExit(f"bench_libvmaf_features: unknown mode {m!r} (cpu1, cpuN, cuda)")
        if not modes[m][0].is_file():
            raise SystemExit(f"bench_libvmaf_features: no tool at {modes[m][0]}")
    version = subprocess.run([str(modes[chosen[0]][0]), "--version"], capture_output=True, text=True)
    w, h = args.size.split("x")
    frames = max(modes[m][2] for m in chosen)
    print(f"libvmaf {(version.stdout + version.stderr).strip()}, {args.size}, cpuN = {ncpu} threads; "
          f"µs a frame = (wall with the feature - wall without) / frames, median of {args.repeats}", flush=True)
    results: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory(prefix="lvfeat_", dir=args.dir) as tmp:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_clips.py"), tmp, f"{args.size}:{frames}"],
                       check=True, stdout=subprocess.DEVNULL)
        pair = ["-r", f"{tmp}/ref_{w}x{h}.y4m", "-d", f"{tmp}/dist_{w}x{h}.y4m"]
        for mode in chosen:
            tool, extra, n = modes[mode]
            base_args = [*pair, *extra, "--frame_cnt", str(n), "--no_prediction"]
            try:
                run_tool(tool, base_args)  # warm: page cache, the driver's first start
            except RuntimeError as e:
                print(f"LIBVMAF - {mode} cannot run: {e}", flush=True)
                continue
            for name in names:
                lv_name = name
                if mode == "cuda":
                    if name not in CUDA_NAMES:
                        continue
                    lv_name = CUDA_NAMES[name]
                feat = (["--model", f"version={name}"] if name in MODELS
                        else ["--no_prediction", "--feature", lv_name])
                try:
                    bases, diffs = [], []
                    for _ in range(args.repeats):
                        bases.append(run_tool(tool, base_args))
                        diffs.append(run_tool(tool, [*pair, *extra, "--frame_cnt", str(n), *feat]) - bases[-1])
                except RuntimeError as e:
                    print(f"LIBVMAF {name} {mode} cannot run: {e}", flush=True)
                    results[(name, mode)] = "—"
                    continue
                cost = statistics.median(diffs)
                floor = max(max(bases) - min(bases), 1e-3)
                text = f"<{floor / n * 1e6:,.0f}" if cost < floor else f"{cost / n * 1e6:,.0f}"
                results[(name, mode)] = text
                print(f"LIBVMAF {name} {mode} {text} µs/frame (runs {', '.join(f'{d:.3f}' for d in diffs)} s "
                      f"over {n} frames; no-feature {statistics.median(bases) / n * 1e6:,.0f} µs/frame)", flush=True)
    print(f"\n| feature | " + " | ".join(f"libvmaf {m} (µs/frame)" for m in chosen) + " |")
    print("|---|" + "---:|" * len(chosen))
    for name in names:
        print(f"| {name} | " + " | ".join(results.get((name, m), "—") for m in chosen) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
