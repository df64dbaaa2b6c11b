#!/usr/bin/env python3
"""The GPU engine's host time per batch: ``GpuScorer.enqueue`` and ``complete`` with no kernel in them.

    python3 scripts/bench_engine_host.py [--plans vmaf,psnr+ssim] [--sizes 576x324,1920x1080]
                                         [--batches 32,1] [--frames 640] [--profile FILE]
                                         [--dump FILE]

How the kernels are kept out, honestly:

1. Real statistics first: for each plan and size, a few frames (the bundled
   sample scaled, noise as the distortion, as scripts/bench_gpu.py feeds) run
   once through the engine on the CPU emulator (the kernels' own source), and
   the batch's statistics records are kept.
2. Then a scorer of the same plan runs on a *null device*: the emulator's
   device with its kernel launches, host-to-device and device-to-device
   copies and memsets turned into no-ops, and its device-to-host copy of the
   records filling the batch's pinned slot with the kept records (frames 1..
   tiled to the batch, so every frame has a real motion SAD).  Allocation,
   events, the stream pool, the job table, the argument packing of every
   launch (``Launcher``) and all of ``complete()`` (each feature's host
   arithmetic, the names, the assembler, the models) run as in the lane.

What is timed is ``enqueue()`` and ``complete()`` of a stream of batches of
the frame sources a daemon would hand in (a ring of three slots of distinct
device pointers, one layout), one batch in flight (the null device's events
complete at once), then ``finish()``: µs a frame, median (and minimum) over
the batches.  What it leaves out: the driver's own time in each call (on
CUDA a launch or an async copy is a few µs of driver time on top of the
Python packing measured here), the reaper/trio side of the daemon.

``--profile FILE``: cProfile of every timed run into FILE (pstats), the top
entries printed.  ``--dump FILE``: every frame's outputs (``repr`` of each
float, names sorted), ``finish()``'s, the pooled values and the aggregate of
each run, as text; two dumps of the same arguments from two trees must be equal byte for
byte when the host step's arithmetic did not change.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import _checkout  # noqa: F401  (this tree first on sys.path)

import numpy as np  # noqa: E402

from bench_gpu import make_frames  # noqa: E402

#: --plans: (models, features)
PLANS = {
    "vmaf": (["version=vmaf_v0.6.1"], []),
    "vmaf+debug": (["version=vmaf_v0.6.1:vif.debug=true:adm.debug=true:motion.debug=true"], []),
    "psnr+ssim": ([], ["psnr", "float_ssim"]),
    "motion": ([], ["motion"]),
    "vmaf_neg+psnr": (["version=vmaf_v0.6.1", "version=vmaf_v0.6.1neg:name=neg"], ["psnr"]),
}


class NullDevice:
    """The emulator's device with no device work: launches, uploads, device copies and memsets do
    nothing; the records' copy to the host fills the slot with ``records`` (tiled)."""

    def __init__(self, dev, records: np.ndarray, batch: int):
        self._dev = dev
        # the records tiled to a whole batch once: the copy is then a plain memcpy, as a DMA is
        self._tiled = np.resize(records, (batch, records.shape[1])).reshape(-1)

    def __getattr__(self, name):
        return getattr(self._dev, name)

    def launch_packed(self, *args) -> None:
        pass

    def copy_htod_async(self, *args) -> None:
        pass

    def copy_dtod_async(self, *args) -> None:
        pass

    def memset_async(self, *args) -> None:
        pass

    def copy_dtoh_async(self, dst: np.ndarray, src: int, nbytes: int, stream) -> None:
        dst[:nbytes] = self._tiled[:nbytes]


def real_records(rt, plan, w: int, h: int, count: int = 3) -> np.ndarray:
    """Statistics records of frames 1..count-1 of ``make_frames(w, h)`` run on the emulator."""
    from vmafx.formats import PixelFormat, Subsampling
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    dev = rt.device(0)
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=count)
    try:
        with HostUploads(dev, stream) as up:
            frames = [GpuFrame(up.source(r, PixelFormat.YUV420P), up.source(d, PixelFormat.YUV420P))
                      for r, d in make_frames(w, h, count)]
            b = sc.enqueue(frames)
            b.done.synchronize()
            records = np.array(b.stats[1:], copy=True)
            sc.complete(b)
    finally:
        sc.close()
        ks.close()
    return records


def fake_sources(w: int, h: int, batch: int, ring: int = 3):
    """``ring`` batches of frames: distinct (never read) device pointers, one 4:2:0 layout."""
    from vmafx.formats import PixelFormat
    from vmafxd.lanes.gpu.engine import FrameSource, GpuFrame

    cw, ch = (w + 1) // 2, (h + 1) // 2
    layout = ((0, w), (w * h, cw), (w * h + cw * ch, cw))
    size = (w * h + 2 * cw * ch + 255) // 256 * 256
    base = 1 << 40
    out = []
    for r in range(ring):
        frames = []
        for i in range(batch):
            ptr = base + (r * batch + i) * 2 * size
            frames.append(GpuFrame(FrameSource(ptr, PixelFormat.YUV420P, layout),
                                   FrameSource(ptr + size, PixelFormat.YUV420P, layout)))
        out.append(frames)
    return out


def run(rt, plan, w: int, h: int, batch: int, frames: int, records: np.ndarray, profiler, dump):
    """Median (min) µs a frame of enqueue, complete and both, over the batches."""
    from vmafx.formats import Subsampling
    from vmafxd.lanes.gpu.engine import GpuScorer, KernelSet

    dev = NullDevice(rt.device(0), records, batch)
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=batch)
    ring = fake_sources(w, h, batch)
    enq, comp, out = [], [], []
    try:
        for k in range(max(2, frames // batch)):
            frames_k = ring[k % len(ring)]
            if profiler is not None:
                profiler.enable()
            t0 = time.perf_counter()
            b = sc.enqueue(frames_k)
            t1 = time.perf_counter()
            finals = sc.complete(b)
            t2 = time.perf_counter()
            if profiler is not None:
                profiler.disable()
            enq.append((t1 - t0) / batch * 1e6)
            comp.append((t2 - t1) / batch * 1e6)
            out += finals
        last = sc.finish()
        if dump is not None:
            # names sorted: the values are what must not change (the order of a frame's names
            # is not part of the output's meaning, and differs between lanes)
            for seq, m in out + last:
                dump.write(f"{seq} " + " ".join(f"{k}={m[k]!r}" for k in sorted(m)) + "\n")
            for name, stats in sorted(sc.assembler.pooled().items()):
                dump.write(f"pooled {name} {sorted(stats.items())!r}\n")
            dump.write(f"aggregate {sorted(sc.aggregate.items())!r}\n")
    finally:
        sc.close()
        ks.close()
    both = [a + b for a, b in zip(enq, comp)]
    return [(statistics.median(x), min(x)) for x in (enq, comp, both)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", default="vmaf,psnr+ssim", help=f"comma-separated, of {', '.join(PLANS)}")
    ap.add_argument("--sizes", default="576x324,1920x1080")
    ap.add_argument("--batches", default="32,1")
    ap.add_argument("--frames", type=int, default=640, help="frames per run (at least two batches)")
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--dump", metavar="FILE")
    a = ap.parse_args()

    from vmafxd.core.scoring import ScoringPlan, parse_feature_spec
    from vmafxd.lanes import emulated
    from vmafxd.model import load_model

    rt = emulated.load()
    profiler = cProfile.Profile() if a.profile else None
    dump = open(a.dump, "w") if a.dump else None
    print("GPU engine host time (null device: no kernels, no copies), µs a frame, median (min)")
    print(f"{'plan':>14} {'size':>10} {'batch':>5} {'enqueue':>16} {'complete':>16} {'both':>16}")
    try:
        for name in a.plans.split(","):
            models, feats = PLANS[name]
            plan = ScoringPlan.build([load_model(m) for m in models], [parse_feature_spec(f) for f in feats])
            for size in a.sizes.split(","):
                w, h = (int(x) for x in size.split("x"))
                records = real_records(rt, plan, w, h)
                for batch in (int(x) for x in a.batches.split(",")):
                    if dump is not None:
                        dump.write(f"# {name} {size} batch {batch}\n")
                    res = run(rt, plan, w, h, batch, a.frames, records, profiler, dump)
                    cells = " ".join(f"{m:9.1f} ({lo:5.1f})" for m, lo in res)
                    print(f"{name:>14} {size:>10} {batch:>5} {cells}", flush=True)
    finally:
        if dump is not None:
            dump.close()
    if profiler is not None:
        profiler.dump_stats(a.profile)
        s = io.StringIO()
        pstats.Stats(profiler, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue())


if __name__ == "__main__":
    main()
