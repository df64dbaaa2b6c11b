#!/usr/bin/env python3
"""The GPU ciede twin's host step: µs a frame to finish a batch (the listed doubtful pixels).

    python3 scripts/bench_ciede_host.py [--size 1920x1080] [--frames 4] [--repeats 5]
                                        [--windows 1e-5,default] [--lane emu] [--pair ID]

The kernel (``ciede.cu``) lists, for the batch, the pixels whose rounding it could
not trust; the host redoes them with the C library and adds them to the exact
sum (``GpuCiede.metrics``).  This runs one batch of ``--frames`` frames (the
bundled sample scaled to the size, with noise as the distortion, as
bench_gpu.py's frames; ``--pair p14_retina1080_x264crf35``: a reference pair's
first frames, 8-bit 4:2:0 ones) on a lane (the CPU emulator by default: its libm is
glibc, so it lists what a device lists, give or take a pixel) for each device
doubt window (``default``: the kernel's own; a number: a
``-DCIEDE_DEVICE_DOUBT`` build), keeps the batch's records and lists, and
times on them, medians over R replays:

* ``scalar``: the former host step, each listed pixel through the scalar
  C-library transcription in a Python loop;
* ``batched``: today's ``_redo_listed`` (one call for the whole batch) and
  ``_exact_total``;

and checks both give the same totals (medians, and the minimum: the machine
may be shared).  ``metrics()`` is the live call's own time, once (after the C library's
lookup and numpy's first calls; the emulator's frees included).  Host figures only:
the kernel's time on the emulator means nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import numpy as np  # noqa: E402

from bench_gpu import make_frames  # noqa: E402  (the bundled sample scaled + noise, as bench_gpu feeds)


def pair_frames(pair_id: str, count: int):
    """The first frames of a reference pair (8-bit 4:2:0), and its size."""
    from tests.reference import all_pairs

    pair = next(p for p in all_pairs() if p.id == pair_id)
    if pair.pix_fmt != "yuv420p":
        raise SystemExit(f"--pair: {pair_id} is {pair.pix_fmt}, this bench feeds yuv420p")
    refs, dists = pair.pictures()
    frames = [([np.ascontiguousarray(x) for x in r.planes], [np.ascontiguousarray(x) for x in d.planes])
              for r, d in zip(refs[:count], dists[:count])]
    return frames, pair.width, pair.height


def scalar_totals(twin, recs, batch_entries):
    """The former host step: per frame, per listed pixel, the scalar C transcription."""
    from vmafxd.features._ciede_color import ciede2000_scalar, lab_scalar

    bd = twin.scorer.staging.bitdepth
    out = []
    for i, rec in enumerate(recs):
        entries = batch_entries[batch_entries[:, 7] == i]
        doubtful = int(rec[2])
        if rec[1] or doubtful != len(entries):
            out.append(None)
            continue
        total = int(rec[0])
        lows = np.nonzero(rec[3:16])[0]
        low = int(lows[0]) - 32 if lows.size else 64
        bad = False
        for e in entries[:doubtful]:
            de = ciede2000_scalar(lab_scalar(float(e[1]), float(e[2]), float(e[3]), bd),
                                  lab_scalar(float(e[4]), float(e[5]), float(e[6]), bd))
            if de == 0.0:
                continue
            units = de * 2.0**32
            if units != int(units) or units >= 2.0**40:
                bad = True
                break
            v = int(units)
            total += v
            low = min(low, (v & -v).bit_length() - 1 - 32)
        if bad:
            out.append(None)
        elif total == 0:
            out.append(0.0)
        else:
            top = total.bit_length() - 1 - 32
            out.append(None if low < top - 52 else total / 2**32)
    return out


def batched_totals(twin, recs, entries):
    redone, _ = twin._redo_listed(recs, entries)
    return [None if r is None else twin._exact_total(rec, r) for rec, r in zip(recs, redone)]


def run_window(lane: str, window: str, w: int, h: int, frames, repeats: int) -> dict:
    from vmafx.formats import PixelFormat, Subsampling
    from vmafxd.core.scoring import FeatureRequest, ScoringPlan
    from vmafxd.lanes.gpu import ciede as gpu_ciede
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    if lane == "emu":
        from vmafxd.lanes import emulated as binding
    else:
        from vmafxd.lanes import cuda as binding
    rt = binding.load()
    dev = rt.device(0)
    dev.make_current()
    options = list(rt.compile_options)
    if window != "default":
        options.append(f"-DCIEDE_DEVICE_DOUBT={float(window)!r}")
    ks = KernelSet(rt, dev, options)
    stream = dev.create_stream()
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    n = len(frames)
    sc = GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=n)
    twin = next(t for t in sc.twins if isinstance(t, gpu_ciede.GpuCiede))
    kept, live = [], []
    redo_listed, metrics = twin._redo_listed, twin.metrics

    def keeping(recs, entries):
        kept.append((recs.copy(), entries.copy()))
        return redo_listed(recs, entries)

    def timed(*args):
        t = time.perf_counter()
        got = metrics(*args)
        live.append(time.perf_counter() - t)
        return got

    twin._redo_listed, twin.metrics = keeping, timed
    up = HostUploads(dev, stream)

    try:
        # one-off costs out of the live call: the C library's lookup (powf), numpy's first calls
        from vmafxd.features._ciede_color import _libm_powf, ciede2000_libm

        _libm_powf()
        ciede2000_libm(np.arange(6 * 16, dtype=np.float64).reshape(16, 6) % 200 + 16, 8)
        batch = sc.enqueue([GpuFrame(up.source(r, PixelFormat.YUV420P), up.source(d, PixelFormat.YUV420P))
                            for r, d in frames])
        batch.done.synchronize()
        sc.complete(batch)
        del twin._redo_listed, twin.metrics  # the replays time the twin's own methods
        recs, lists = kept[0]
        old_t, new_t = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            old = scalar_totals(twin, recs, lists)
            old_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            new = batched_totals(twin, recs, lists)
            new_t.append(time.perf_counter() - t)
            if old != new:
                raise SystemExit(f"window {window}: the batched totals differ from the scalar ones: {old} {new}")
        return {"listed": [int(r[2]) for r in recs], "live": live[0] / n,
                "scalar": statistics.median(old_t) / n, "batched": statistics.median(new_t) / n,
                "scalar_min": min(old_t) / n, "batched_min": min(new_t) / n, "slow": twin.slow_frames}
    finally:
        up.close()
        sc.close()
        ks.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--windows", default="1e-5,default", help="device doubt windows (float ulps), 'default' = the kernel's")
    ap.add_argument("--lane", default="emu", choices=("emu", "cuda"))
    ap.add_argument("--pair", help="a reference pair's frames instead of the scaled sample")
    a = ap.parse_args()
    if a.pair:
        frames, w, h = pair_frames(a.pair, a.frames)
    else:
        w, h = (int(v) for v in a.size.split("x"))
        frames = make_frames(w, h, a.frames)
    what = a.pair or "scaled sample + noise"
    print(f"ciede host step, {w}x{h} ({what}), batch of {len(frames)}, lane {a.lane}, medians of {a.repeats} replays")
    print(f"{'window':>8} {'listed/frame':>13} {'scalar µs/f':>12} {'(min)':>7} {'batched µs/f':>13} {'(min)':>7} "
          f"{'ratio':>6} {'metrics() µs/f':>15} {'slow frames':>11}")
    for window in a.windows.split(","):
        r = run_window(a.lane, window, w, h, frames, a.repeats)
        listed = statistics.median(r["listed"])
        print(f"{window:>8} {listed:>13.0f} {r['scalar'] * 1e6:>12.0f} {r['scalar_min'] * 1e6:>7.0f} "
              f"{r['batched'] * 1e6:>13.0f} {r['batched_min'] * 1e6:>7.0f} "
              f"{r['scalar'] / max(r['batched'], 1e-12):>6.1f} {r['live'] * 1e6:>15.0f} {r['slow']:>11}")


if __name__ == "__main__":
    main()
