#!/usr/bin/env python3
"""The GPU twins' host step: µs a frame that ``metrics()`` spends turning a batch's records into scores.

    python3 scripts/bench_gpu_host_step.py [--features float_adm,float_vif,psnr_hvs,float_motion]
                                           [--batch 32] [--repeats 30] [--lane emu]
                                           [--size 576x324|1920x1080] [--frames 2]

One real batch of ``--frames`` frames (the bundled 576x324 sample, noise as
the distortion; or at 1920x1080 the reference set's p14 pair, else that
sample scaled up, as scripts/bench_cpu.py picks them) runs through the lane
(the CPU emulator by default) to get real statistics records; the records of
frames 1 and on are tiled to ``--batch`` frames and each feature's GPU twin's
own ``metrics()`` is timed on them, medians (and minimum) over R calls.
What this measures is host Python only, the same on any lane; the kernels'
time is not in it.  (CIEDE2000's host step, which depends on the
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
    ap.add_argument("--size", default="576x324", choices=("576x324", "1920x1080"))
    ap.add_argument("--frames", type=int, default=2,
                    help="frames run through the lane (frame 0 has no motion: 1 and on are tiled)")
    a = ap.parse_args()
    if a.frames < 2:
        ap.error("--frames: at least 2")

    from tests.reference import vendored_pairs
    from vmafx.formats import PixelFormat
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    if a.lane == "emu":
        from vmafxd.lanes import emulated as binding
    else:
        from vmafxd.lanes import cuda as binding
    pair = next(p for p in vendored_pairs() if p.width == 576 and p.pix_fmt == "yuv420p")
    width, height, pix_fmt = pair.width, pair.height, pair.pix_fmt
    if a.size == "576x324":
        refs, dists = pair.pictures()
    else:
        import bench_cpu  # its 1080p pair (p14 where the reference set is here)

        label, width, height, refs, dists = bench_cpu._pairs(0, a.frames)[-1]
        pix_fmt = "yuv420p" if refs[0].bitdepth == 8 else "yuv420p10le"
        print(label)
    refs, dists = refs[:a.frames], dists[:a.frames]
    rt = binding.load()
    dev = rt.device(0)
    dev.make_current()
    print(f"GPU twins' metrics(), batch of {a.batch} ({width}x{height} records), lane {a.lane}, "
          f"µs a frame, median (min) of {a.repeats}")
    for name in a.features.split(","):
        ks = KernelSet(rt, dev)
        stream = dev.create_stream()
        plan = ScoringPlan.build([], [FeatureRequest(name)])
        sc = GpuScorer(dev, ks, stream, plan, width, height, refs[0].bitdepth, refs[0].subsampling,
                       max_batch=max(len(refs), a.batch))
        up = HostUploads(dev, stream)
        fmt = PixelFormat(pix_fmt)
        try:
            batch = sc.enqueue([GpuFrame(up.source(r.planes, fmt), up.source(d.planes, fmt))
                                for r, d in zip(refs, dists)])
            batch.done.synchronize()
            records = np.array(batch.stats, copy=True)
            sc.complete(batch)
            # frames 1.. (frame 0 has no motion), repeated to the batch's size
            stats = np.ascontiguousarray(np.resize(records[1:len(refs)], (a.batch, records.shape[1])))
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
