#!/usr/bin/env python3
"""GPU-lane throughput through the daemon: frames/s and per-frame latency, vmaf_v0.6.1.

    python3 scripts/bench_gpu.py [--sizes 576x324,1920x1080,3840x2160] [--frames N] [--repeats R]
                                 [--lane cuda] [--batch B] [--inflight K] [--engine-only]
                                 [--models SPEC,...] [--features SPEC,...] [--memfd]

A daemon process runs the GPU lane; this process is the producer: it keeps a
ring of VMM frame buffers in device memory (content: the bundled sample,
scaled to the size, with noise as the distortion), registers them once as
VMM fds and submits frames reusing each buffer only after its ``released``,
with up to K frames in flight.  Frames/s is wall-clock from the first submit
to the last result; latency is submit -> result per frame.  Medians over R
runs (the min and max too: the machine is shared).

``--engine-only`` times the engine alone in this process (no daemon, no
protocol), frames already on the device: the kernels' own ceiling.

``--models '' --features psnr --sizes 64x64`` measures the daemon's and the
protocol's own cost per frame.  ``VX_PROF=FILE`` runs the daemon under cProfile
(its trio thread; the figures drop while profiled).
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
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import numpy as np  # noqa: E402


def make_frames(w: int, h: int, count: int = 2):
    """(ref planes, dist planes) pairs at w x h from the bundled sample (nearest scaling + noise)."""
    from tests.reference import vendored_pairs

    refs, _ = vendored_pairs()[0].pictures()
    rng = np.random.default_rng(7)
    out = []
    for k in range(count):
        src = refs[k * 3]
        planes = []
        for p, (pw, ph) in enumerate([(w, h), ((w + 1) // 2, (h + 1) // 2), ((w + 1) // 2, (h + 1) // 2)]):
            pl = src.planes[p]
            ys = (np.arange(ph) * pl.shape[0] // ph)[:, None]
            xs = (np.arange(pw) * pl.shape[1] // pw)[None, :]
            planes.append(np.ascontiguousarray(pl[ys, xs]))
        dist = [np.clip(x.astype(np.int16) + rng.integers(-6, 7, x.shape), 0, 255).astype(np.uint8) for x in planes]
        out.append((planes, dist))
    return out


def start_daemon(lane: str, batch: int, sock: str) -> subprocess.Popen:
    r, wfd = os.pipe()
    proc = subprocess.Popen([sys.executable] + (["-m", "cProfile", "-o", os.environ["VX_PROF"]] if os.environ.get("VX_PROF") else []) + ["-m", "vmafxd", "--socket", sock, "--lane", lane, "--gpu-batch",
                             str(batch), "--ready-fd", str(wfd), "--log-level", "warning",
                             "--limit", "max_frames_in_flight=256"],
                            pass_fds=(wfd,), cwd=str(ROOT))
    os.close(wfd)
    if os.read(r, 16) != b"READY\n":
        proc.kill()
        raise RuntimeError("the daemon did not start")
    os.close(r)
    return proc


def bench_daemon(sock: str, w: int, h: int, frames: int, inflight: int, ring: int, memfd: bool = False,
                 models=("version=vmaf_v0.6.1",), features=()):
    from tests.daemon.rawclient import RawClient
    from tests.lanes.test_gpu_lane import _register_vmm
    from vmafx.cuda_frames import CudaProducer, VmmFrameBuffer
    from vmafx.protocol import Released, Result

    content = make_frames(w, h)
    c = RawClient(sock, "bench")
    c.hello()
    bufs = []
    producer = None
    if memfd:
        # host buffers (sealed memfds): for lanes without device imports (cpu, emu)
        from tests.daemon.rawclient import frame_memfd
        from vmafx.formats import Subsampling
        from vmafxd.picture import Picture

        for k in range(ring):
            ref, dist = content[k % len(content)]
            rb = frame_memfd(Picture(tuple(ref), 8, Subsampling.S420))
            db = frame_memfd(Picture(tuple(dist), 8, Subsampling.S420))
            bufs.append((rb, db, c.register_ok(rb), c.register_ok(db)))
    else:
        producer = CudaProducer(0)
        for k in range(ring):
            ref, dist = content[k % len(content)]
            rb = VmmFrameBuffer(producer, w, h, "yuv420p")
            db = VmmFrameBuffer(producer, w, h, "yuv420p")
            rb.write(ref)
            db.write(dist)
            bufs.append((rb, db, _register_vmm(c, rb), _register_vmm(c, db)))
        producer.synchronize()
    s = c.open_ok(models=list(models), features=list(features), width=w, height=h).session
    free = list(range(ring))
    held: dict[int, int] = {}  # frame index -> ring slot
    roles: dict[int, int] = {}
    submitted: dict[int, float] = {}
    latency = []
    done = 0
    nxt = 0

    def handle(msg) -> None:
        nonlocal done
        if isinstance(msg, Released):
            roles[msg.index] -= 1
            if roles[msg.index] == 0:
                free.append(held.pop(msg.index))
        elif isinstance(msg, Result):
            latency.append(time.perf_counter() - submitted.pop(msg.index))
            done += 1
            c.outcomes.pop((msg.session, msg.index), None)

    t0 = time.perf_counter()
    # Motion's lag holds a session's last frames until it closes: submit them
    # all, then close, and count the results that arrive before session_closed.
    while nxt < frames:
        while nxt < frames and free and nxt - done < inflight:
            slot = free.pop()
            held[nxt] = slot
            roles[nxt] = 2
            submitted[nxt] = time.perf_counter()
            c.submit(s, nxt, bufs[slot][2], bufs[slot][3])
            nxt += 1
        if nxt < frames:
            handle(c.recv(timeout=60))
    from vmafx.protocol import CloseSession, SessionClosed

    c.send(CloseSession(seq=c.conn.next_seq(), session=s))
    while True:
        msg = c.recv(timeout=120)
        if isinstance(msg, SessionClosed):
            break
        handle(msg)
    elapsed = time.perf_counter() - t0
    assert done == frames, f"{done} of {frames} frames scored"
    packets = c.packets
    for rb, db, rid, did in bufs:
        c.unregister(rid)
        c.unregister(did)
        rb.close()
        db.close()
    c.close()
    if producer is not None:
        producer.close()
    return frames / elapsed, statistics.median(latency) * 1000, np.percentile(latency, 95) * 1000, frames / packets


def bench_engine(w: int, h: int, frames: int, batch: int, models=("version=vmaf_v0.6.1",), features=()):
    from vmafx.formats import PixelFormat, Subsampling
    from vmafxd.lanes import cuda
    from vmafxd.lanes.gpu.engine import FrameSource, GpuFrame, GpuScorer, KernelSet
    from vmafxd.lanes.gpu.kernels import NVRTC_OPTIONS
    from vmafxd.model import load_model
    from vmafxd.scoring import FeatureRequest, ScoringPlan

    rt = cuda.load()
    dev = rt.device(0)
    stream = dev.create_stream()
    ks = KernelSet(rt, dev, NVRTC_OPTIONS)
    reqs = []
    for spec in features:  # NAME or NAME=opt=value:opt=value, as the daemon takes them
        name, _, opts = spec.partition("=")
        reqs.append(FeatureRequest(name, dict(o.split("=", 1) for o in opts.split(":") if o)))
    plan = ScoringPlan.build([load_model(m) for m in models], reqs)
    sc = GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=batch)
    srcs = []
    for ref, dist in make_frames(w, h):
        pair = []
        for planes in (ref, dist):
            blob = np.concatenate([p.ravel() for p in planes])
            ptr = dev.alloc(blob.nbytes)
            host = dev.alloc_host(blob.nbytes)
            host[:] = blob
            dev.copy_htod_async(ptr, host, blob.nbytes, stream)
            offs, o = [], 0
            for p in planes:
                offs.append((o, p.shape[1]))
                o += p.nbytes
            pair.append(FrameSource(ptr, PixelFormat.YUV420P, tuple(offs)))
        srcs.append(pair)
    stream.synchronize()
    frames_list = [GpuFrame(*srcs[i % len(srcs)]) for i in range(batch)]
    # warm-up (compiles, pools)
    b = sc.enqueue(frames_list)
    b.done.synchronize()
    sc.complete(b)
    t0 = time.perf_counter()
    n = 0
    inflight = []
    while n < frames:
        while sc.can_enqueue() and n < frames:
            inflight.append(sc.enqueue(frames_list))
            n += batch
        b = inflight.pop(0)
        b.done.synchronize()
        sc.complete(b)
    for b in inflight:
        b.done.synchronize()
        sc.complete(b)
    return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="576x324,1920x1080,3840x2160")
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lane", default="cuda")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--inflight", type=int, default=128)
    ap.add_argument("--engine-only", action="store_true")
    ap.add_argument("--models", default="version=vmaf_v0.6.1",
                    help="comma-separated model specs ('' for none: with --features psnr at a tiny size this "
                         "measures the daemon's and protocol's own cost per frame)")
    ap.add_argument("--features", default="", help="comma-separated feature specs")
    ap.add_argument("--memfd", action="store_true", help="host (memfd) frame buffers instead of VMM (cpu/emu lanes)")
    args = ap.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    rows = []
    if args.engine_only:
        for w, h in sizes:
            fps = [bench_engine(w, h, args.frames, args.batch, [m for m in args.models.split(",") if m],
                                [f for f in args.features.split(",") if f]) for _ in range(args.repeats)]
            rows.append((f"{w}x{h}", "engine", statistics.median(fps), min(fps), max(fps), None, None))
            print(f"engine {w}x{h}: {statistics.median(fps):.0f} fps (min {min(fps):.0f}, max {max(fps):.0f})",
                  flush=True)
        return 0
    tmp = tempfile.mkdtemp(prefix="vxb", dir="/tmp")
    sock = os.path.join(tmp, "d.sock")
    proc = start_daemon(args.lane, args.batch, sock)
    try:
        for w, h in sizes:
            frames = args.frames if w * h <= 2_100_000 else max(64, args.frames // 3)
            runs = [bench_daemon(sock, w, h, frames, args.inflight, ring=min(args.inflight, 96) // 2 * 2, memfd=args.memfd,
                                 models=[m for m in args.models.split(",") if m],
                                 features=[f for f in args.features.split(",") if f])
                    for _ in range(args.repeats)]
            fps = [r[0] for r in runs]
            what = "+".join(x for x in (args.models, args.features) if x)
            print(f"daemon {args.lane} {what} {w}x{h}: {statistics.median(fps):.0f} fps (min {min(fps):.0f}, "
                  f"max {max(fps):.0f}); latency median {statistics.median(r[1] for r in runs):.1f} ms, "
                  f"p95 {statistics.median(r[2] for r in runs):.1f} ms, {statistics.median(r[3] for r in runs):.1f} frames "
                  f"per packet read ({frames} frames, batch {args.batch}, "
                  f"{args.inflight} in flight)", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
