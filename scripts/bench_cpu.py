#!/usr/bin/env python3
"""CPU-lane throughput: frames/s for vmaf_v0.6.1 (and each feature alone), on one core.

    python3 scripts/bench_cpu.py [--frames N] [--repeats R] [--threads 1] [--small] [--only a,b]

Pairs: the bundled 576x324 sample (tests/data), and 1920x1080 — the reference
set's p14 when ../shared/reference exists, else a synthetic pair made by
upscaling the sample (same content statistics, same code paths).  Prints the
median of R runs; the machine's other load shows in the spread, so the min and
max are printed too.  Threads are pinned (BLAS, OpenMP) to --threads before
numpy loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pin_threads(n: int) -> None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        os.environ[var] = str(n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--small", action="store_true", help="the 576x324 pair only")
    ap.add_argument("--only", default="", help="comma-separated configs to run (default: all)")
    args = ap.parse_args()
    _pin_threads(args.threads)
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]

    import numpy as np

    from tests.reference import full_pairs, vendored_pairs
    from vmafxd.model import load_model
    from vmafxd.core.picture import Picture
    from vmafxd.core.scoring import CpuScorer, FeatureRequest, ScoringPlan

    sample = vendored_pairs()[0]
    refs, dists = sample.pictures()
    pairs = [("576x324", sample.width, sample.height, refs[: args.frames], dists[: args.frames])]
    p14 = [p for p in full_pairs() if p.width == 1920]
    if args.small:
        pass
    elif p14:
        r, d = p14[0].pictures()
        pairs.append(("1920x1080 (p14)", 1920, 1080, r[: args.frames], d[: args.frames]))
    else:
        def up(p: Picture) -> Picture:
            planes = []
            for k, pl in enumerate(p.planes):
                shape = (1080, 1920) if k == 0 else (540, 960)
                ys = (np.arange(shape[0]) * pl.shape[0] // shape[0])[:, None]
                xs = (np.arange(shape[1]) * pl.shape[1] // shape[1])[None, :]
                planes.append(np.ascontiguousarray(pl[ys, xs]))
            return Picture(tuple(planes), p.bitdepth, p.subsampling)

        pairs.append(("1920x1080 (synthetic)", 1920, 1080, [up(x) for x in refs[: args.frames]],
                      [up(x) for x in dists[: args.frames]]))

    configs = [("vmaf_v0.6.1", [load_model("version=vmaf_v0.6.1")], []),
               ("vmaf_float_v0.6.1", [load_model("version=vmaf_float_v0.6.1")], [])]
    for f in ("vif", "adm", "motion", "psnr", "float_ssim", "float_ms_ssim", "float_vif", "float_adm",
              "float_motion", "cambi", "ciede", "psnr_hvs"):
        configs.append((f, [], [FeatureRequest(f)]))
    for f in ("float_ssim", "float_ms_ssim"):  # the float32 window formula instead of libvmaf's
        configs.append((f"{f}:fast", [], [FeatureRequest(f, {"exact_filter": "false"})]))
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c[0] in wanted]

    print(f"CPU lane, {args.threads} thread(s), {args.frames} frames a run, median of {args.repeats} runs")
    print(f"{'size':24} {'what':20} {'fps':>8} {'ms/frame':>9} {'min..max fps':>16}")
    for label, w, h, rr, dd in pairs:
        for name, models, feats in configs:
            plan = ScoringPlan.build(models, feats)
            fps = []
            for _ in range(args.repeats):
                sc = CpuScorer(plan, w, h, 8)
                t = time.perf_counter()
                for i, (a, b) in enumerate(zip(rr, dd)):
                    sc.push(i, a, b)
                sc.finish()
                fps.append(len(rr) / (time.perf_counter() - t))
            med = statistics.median(fps)
            print(f"{label:24} {name:20} {med:8.1f} {1000 / med:9.1f} {min(fps):7.1f}..{max(fps):<7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
