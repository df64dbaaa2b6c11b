#!/usr/bin/env python3
"""The GPU twins' host step: µs a frame that ``metrics()`` spends turning a batch's records into scores.

    python3 scripts/bench_gpu_host_step.py [--features float_adm,float_vif,psnr_hvs,float_motion]
                                           [--batch 32] [--repeats 30] [--lane emu]

One real batch of two frames (the bundled 576x324 sample, noise as the
distortion) runs through the lane (the CPU emulator by default) to get real
statistics records; they are tiled to ``--batch`` frames and each feature's
GPU twin's own ``metrics()`` is timed on them, medians (and minimum) over R
calls.  What this measures is host Python only, the same on any lane; the
kernels' time is not in it.  (CIEDE2000's host step, which depends on the
doubtful-pixel lists, has its own: scripts/bench_ciede_host.py.)
"""

from __future__ import annotations

import argparse
import statistics
import time

import _checkout  # noqa: F401  (this tree first on sys.path)

import numpy as np  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", default="float_adm,float_vif,psnr_hvs,float_motion")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--lane", default="emu", choices=("emu", "cuda"))
    a = ap.parse_args()

    from tests.reference import vendored_pairs
    from vmafx.formats import PixelFormat
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    if a.lane == "emu":
        from vmafxd.lanes import emulated as binding
    else:
        from vmafxd.lanes import cuda as binding
    pair = next(p for p in vendored_pairs() if p.width == 576 and p.pix_fmt == "yuv420p")
    refs, dists = pair.pictures()
    rt = binding.load()
    dev = rt.device(0)
    dev.make_current()
    print(f"GPU twins' metrics(), batch of {a.batch} ({pair.width}x{pair.height} records), lane {a.lane}, "
          f"µs a frame, median (min) of {a.repeats}")
    for name in a.features.split(","):
        ks = KernelSet(rt, dev)
        stream = dev.create_stream()
        plan = ScoringPlan.build([], [FeatureRequest(name)])
        sc = GpuScorer(dev, ks, stream, plan, pair.width, pair.height, pair.bitdepth, refs[0].subsampling,
                       max_batch=max(2, a.batch))
        up = HostUploads(dev, stream)
        fmt = PixelFormat(pair.pix_fmt)
        try:
            batch = sc.enqueue([GpuFrame(up.source(r.planes, fmt), up.source(d.planes, fmt))
                                for r, d in zip(refs[:2], dists[:2])])
            batch.done.synchronize()
            records = np.array(batch.stats, copy=True)
            sc.complete(batch)
            stats = np.tile(records[1:2], (a.batch, 1))  # frame 1's record (frame 0 has no motion)
            twin = sc.twins[0]
            times, seq = [], 2
            for _ in range(a.repeats):
                t = time.perf_counter()
                twin.metrics(stats, seq, a.batch)
                times.append(time.perf_counter() - t)
                seq += a.batch
            per = [x / a.batch * 1e6 for x in times]
            print(f"  {name:>14} {statistics.median(per):8.1f} ({min(per):.1f})")
        finally:
            up.close()
            sc.close()
            ks.close()


if __name__ == "__main__":
    main()
