#!/usr/bin/env python3
"""GPU-lane throughput through the daemon: frames/s and per-frame latency, vmaf_v0.6.1.

    python3 scripts/bench_gpu.py [--sizes 576x324,1920x1080,3840x2160] [--frames N] [--repeats R]
                                 [--lane cuda] [--batch B|auto] [--inflight K] [--ring P] [--engine-only]
                                 [--models SPEC,...] [--features SPEC,...] [--memfd] [--producers N]
                                 [--single-submits] [--single-outcomes] [--lane-process]

A daemon process runs the GPU lane; this process is the producer: it keeps a
ring of VMM frame buffers in device memory (content: the bundled sample,
scaled to the size, with noise as the distortion), registers them once as
VMM fds and submits frames reusing each buffer only after its ``released``,
with up to K frames in flight (and at most P buffer pairs not yet released: ``--ring``,
by default K up to 96).  Frames/s is wall-clock from the first submit
to the last result; latency is submit -> result per frame (p50/p90/p95/p99 at
the K in flight asked for).  Medians over R runs (the min and max too: the
machine is shared).  The daemon's CPU time (user + sys of all its threads, from
/proc/PID/stat) over the timed part is printed per 1,000 frames: what a frame
costs the host, whatever the machine's load.

``--producers N`` runs N producer processes at once (each its own connection
and session, the same geometry, --frames and --inflight each), started together
once all are set up, after one producer alone (the same way, for comparison):
the aggregate frames/s (all frames over first submit to last close) against the
lone producer's, each producer's own rate, and each one's share of the results
that arrived while all of them were running, over the fair share 1/N (min and
max: 1.00 is fair).  The daemon is started with per-uid limits that let N
connections of one user hold their rings (all producers run as one uid).

On the CPU or emulated lane (``--lane cpu --memfd``, tiny ``--sizes``) every
mode runs without a GPU (``--engine-only`` with ``--lane emu``): a smoke test of the script.

``--engine-only`` times the engine alone in this process (no daemon, no
protocol), frames already on the device: the kernels' own ceiling; with
``--models ''`` and ``--features cambi`` (say) it times one feature's kernels alone (µs a frame).

``--models '' --features psnr --sizes 64x64`` measures the daemon's and the
protocol's own cost per frame.  ``VX_PROF=FILE`` runs the daemon under cProfile
(its trio thread; the figures drop while profiled); with ``VX_PROF_CPU=1`` too, the profile
counts the trio thread's CPU time, not wall-clock time (on a loaded machine a wall-clock profile
charges a call for the time the thread waited for a core).  Besides the daemon's CPU per
1,000 frames, the line gives its trio thread's alone (requests, ledger, messages,
reaper: the protocol's host path, without the lane's worker threads), and the producer's
own CPU (this process's thread: the client side of the protocol -- encoding submits,
decoding results and releases, its frame ledger -- and the benchmark's loop).  With
``--lane-process`` a line before it gives the lane worker processes' CPU per 1,000 frames over
the timed runs (and of it their trio threads': the messages, the hand-over to the lane, the
releases; the rest is the device worker thread's), besides the whole run's with the setup.

The producer sends the frames it may send at once in one ``submit_many`` packet
(up to the daemon's ``max_frames_per_submit``); ``--single-submits`` sends one
``submit`` per frame, as older clients do, for the A/B.  It asks for runs of outcomes
(``result_many``, ``released_many``: a batch's results and releases as columns, docs/protocol.md);
``--single-outcomes`` asks for a message a result and a release, as older clients do.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import numpy as np  # noqa: E402

from vmafxd.core.batch_size import batch_for, check_batch_setting  # noqa: E402


def make_frames(w: int, h: int, count: int = 2):
    """(ref planes, dist planes) pairs at w x h from the bundled sample (nearest scaling + noise)."""
    from tests.reference import vendored_pairs

    refs, _ = vendored_pairs()[0].pictures()
    rng = np.random.default_rng(7)
    out = []
    for k in range(count):
        src = refs[(k * 3) % len(refs)]
        planes = []
        for p, (pw, ph) in enumerate([(w, h), ((w + 1) // 2, (h + 1) // 2), ((w + 1) // 2, (h + 1) // 2)]):
            pl = src.planes[p]
            ys = (np.arange(ph) * pl.shape[0] // ph)[:, None]
            xs = (np.arange(pw) * pl.shape[1] // pw)[None, :]
            planes.append(np.ascontiguousarray(pl[ys, xs]))
        dist = [np.clip(x.astype(np.int16) + rng.integers(-6, 7, x.shape), 0, 255).astype(np.uint8) for x in planes]
        out.append((planes, dist))
    return out


#: cProfile on the trio thread's CPU clock (``VX_PROF_CPU=1``)
_CPU_PROFILE = ("import cProfile,os,runpy,sys,time; p=cProfile.Profile(time.thread_time); sys.argv[:3]=['vmafxd']\n"
                "try:\n p.runcall(runpy.run_module,'vmafxd',run_name='__main__',alter_sys=True)\n"
                "except SystemExit: pass\nfinally: p.dump_stats(os.environ['VX_PROF'])")


def _profiler() -> list[str]:
    """The interpreter's arguments before ``-m vmafxd``: cProfile when ``VX_PROF`` names a file."""
    if not os.environ.get("VX_PROF"):
        return []
    if os.environ.get("VX_PROF_CPU") == "1":
        return ["-c", _CPU_PROFILE]
    return ["-m", "cProfile", "-o", os.environ["VX_PROF"]]


#: more daemon flags (--lane-process)
DAEMON_ARGS: list[str] = []
#: the CPUs the daemon runs on (--daemon-cpus; None: wherever the scheduler puts it)
DAEMON_CPUS: set[int] | None = None


def cpu_list(text: str) -> set[int]:
    """``0,2-3`` -> {0, 2, 3} (taskset's list form)."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def start_daemon(lane: str, batch: int | str, sock: str, limits: dict[str, int] | None = None) -> subprocess.Popen:
    r, wfd = os.pipe()
    lim = {"max_frames_in_flight": 256, **(limits or {})}
    proc = subprocess.Popen([sys.executable] + _profiler() + ["-m", "vmafxd", "--socket", sock, "--lane", lane, "--gpu-batch",
                             str(batch), "--ready-fd", str(wfd), "--log-level", "warning"]
                            + [a for k, v in lim.items() for a in ("--limit", f"{k}={v}")] + DAEMON_ARGS,
                            pass_fds=(wfd,), cwd=str(ROOT),
                            preexec_fn=(lambda: os.sched_setaffinity(0, DAEMON_CPUS)) if DAEMON_CPUS else None)
    os.close(wfd)
    if os.read(r, 16) != b"READY\n":
        proc.kill()
        raise RuntimeError("the daemon did not start")
    os.close(r)
    return proc


def producer_limits(producers: int, inflight: int, ring: int) -> dict[str, int]:
    """Per-uid and daemon-wide limits that let ``producers`` connections of one user each hold their ring
    and ``inflight`` frames (every producer here runs as the same uid; the defaults are sized for one)."""
    frames, buffers = producers * inflight, producers * 2 * ring + 16
    return {"max_frames_in_flight_per_uid": max(256, frames), "max_frames_in_flight_total": max(1024, frames),
            "max_buffers_per_uid": max(1024, buffers), "max_buffers_total": max(4096, buffers),
            "max_clients_per_uid": max(32, producers + 4), "max_sessions_per_uid": max(64, producers + 4)}


def cpu_seconds(pid: int, main_thread: bool = False) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat; ``main_thread``: of its
    main thread alone (the daemon's trio thread: the protocol's host path, without the lanes' workers)."""
    with open(f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workers_cpu(pid: int, main_thread: bool = False) -> float:
    """CPU seconds of a daemon's child processes (its lane workers with --lane-process); ``main_thread``:
    of their main threads alone (each worker's trio thread: its messages, hand-over and releases)."""
    kids = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids.extend(int(k) for k in f.read().split())
        except FileNotFoundError:  # a thread that ended meanwhile (trio's idle worker threads do)
            pass
    total = 0.0
    for k in kids:
        try:
            total += cpu_seconds(k, main_thread)
        except (FileNotFoundError, ProcessLookupError):  # a short-lived child (a compiler) that ended meanwhile
            pass
    return total


@dataclass
class RunStats:
    """One producer's timed run: monotonic clock (the same for every process of the machine)."""

    frames: int
    start: float
    end: float
    latencies: list[float]  # submit -> result, seconds, per frame
    done_at: list[float]  # when each result arrived
    packets: int
    sent: int  # packets this producer sent (submits, close)
    daemon_cpu: float | None = None  # seconds of the daemon's CPU during the run (one producer only)
    trio_cpu: float | None = None  # of it, the daemon's trio thread (requests, ledger, messages)
    producer_cpu: float = 0.0  # this producer's own CPU (its thread: the protocol's client side and the loop)
    workers_cpu: float | None = None  # the daemon's lane worker processes' (--lane-process), during the run
    workers_trio_cpu: float | None = None  # of it, their trio threads

    @property
    def fps(self) -> float:
        return self.frames / (self.end - self.start)


class Producer:
    """A connection, a ring of registered frame buffers and one open session: one producer."""

    def __init__(self, sock: str, w: int, h: int, ring: int, memfd: bool = False,
                 models=("version=vmaf_v0.6.1",), features=(), name: str = "bench", submit_many: bool = True,
                 outcome_runs: bool = True):
        from tests.daemon.rawclient import RawClient

        content = make_frames(w, h)
        self.c = c = RawClient(sock, name, submit_many=submit_many, outcome_runs=outcome_runs, expand_runs=False)
        hello = c.hello()
        #: frames per submit_many packet (1: one submit per frame, as older clients send)
        self.per_packet = hello.limits["max_frames_per_submit"] if hello.submit_many else 1
        self.bufs = []
        self.cuda = None
        if memfd:
            # host buffers (sealed memfds): for lanes without device imports (cpu, emu)
            from tests.daemon.rawclient import frame_memfd
            from vmafx.formats import Subsampling
            from vmafxd.core.picture import Picture

            for k in range(ring):
                ref, dist = content[k % len(content)]
                rb = frame_memfd(Picture(tuple(ref), 8, Subsampling.S420))
                db = frame_memfd(Picture(tuple(dist), 8, Subsampling.S420))
                self.bufs.append((rb, db, c.register_ok(rb), c.register_ok(db)))
        else:
            from tests.lanes.test_gpu_lane import _register_vmm
            from vmafx.cuda_frames import CudaProducer, VmmFrameBuffer

            self.cuda = CudaProducer(0)
            for k in range(ring):
                ref, dist = content[k % len(content)]
                rb = VmmFrameBuffer(self.cuda, w, h, "yuv420p")
                db = VmmFrameBuffer(self.cuda, w, h, "yuv420p")
                rb.write(ref)
                db.write(dist)
                self.bufs.append((rb, db, _register_vmm(c, rb), _register_vmm(c, db)))
            self.cuda.synchronize()
        self.session = c.open_ok(models=list(models), features=list(features), width=w, height=h).session

    def run(self, frames: int, inflight: int, daemon_pid: int | None = None) -> RunStats:
        """Submit ``frames`` frames with up to ``inflight`` unanswered, close the session, time it."""
        from vmafx.protocol import CloseSession, FrameError, Released, ReleasedMany, Result, ResultMany, SessionClosed

        c, s = self.c, self.session
        ring = len(self.bufs)
        free = list(range(ring))
        held: dict[int, int] = {}  # frame index -> ring slot
        roles: dict[int, int] = {}
        submitted: dict[int, float] = {}
        latency: list[float] = []
        done_at: list[float] = []
        done = 0
        nxt = 0
        clock = time.monotonic

        def handle(msg) -> None:
            nonlocal done
            cls = type(msg)
            if cls is ReleasedMany:  # both roles of each frame: its ring slot is free
                for index in msg.indices:
                    del roles[index]
                    free.append(held.pop(index))
            elif cls is ResultMany:
                now = clock()
                for index in msg.indices:
                    latency.append(now - submitted.pop(index))
                    done_at.append(now)
                done += len(msg.indices)
            elif cls is Released:
                roles[msg.index] -= 1
                if roles[msg.index] == 0:
                    free.append(held.pop(msg.index))
            elif cls is Result:
                now = clock()
                latency.append(now - submitted.pop(msg.index))
                done_at.append(now)
                done += 1
                c.outcomes.pop((msg.session, msg.index), None)
            elif cls is FrameError:
                raise RuntimeError(f"frame {msg.index} failed: {msg}")

        cpu0 = cpu_seconds(daemon_pid) if daemon_pid else None
        trio0 = cpu_seconds(daemon_pid, main_thread=True) if daemon_pid else None
        workers0 = workers_cpu(daemon_pid) if daemon_pid else None
        wtrio0 = workers_cpu(daemon_pid, main_thread=True) if daemon_pid else None
        packets0, sent0 = c.packets, c.sent
        own0 = time.thread_time()
        t0 = clock()
        # Motion's lag holds a session's last frames until it closes: submit them
        # all, then close, and count the results that arrive before session_closed.
        per_packet = self.per_packet
        while nxt < frames:
            batch = []
            while nxt < frames and free and nxt - done < inflight:
                slot = free.pop()
                held[nxt] = slot
                roles[nxt] = 2
                submitted[nxt] = clock()
                batch.append((nxt, self.bufs[slot][2], self.bufs[slot][3]))
                nxt += 1
                if len(batch) == per_packet:
                    c.submit_many(s, batch) if per_packet > 1 else c.submit(s, *batch[0])
                    batch = []
            if batch:
                c.submit_many(s, batch) if len(batch) > 1 else c.submit(s, *batch[0])
            if nxt < frames:
                handle(c.recv(timeout=60))
                while c.pending():  # the rest of the bundle: free every slot it frees before submitting
                    handle(c.recv())
        c.send(CloseSession(seq=c.conn.next_seq(), session=s))
        while True:
            msg = c.recv(timeout=120)
            if isinstance(msg, SessionClosed):
                break
            handle(msg)
        t1 = clock()
        own = time.thread_time() - own0
        cpu = cpu_seconds(daemon_pid) - cpu0 if daemon_pid else None
        trio = cpu_seconds(daemon_pid, main_thread=True) - trio0 if daemon_pid else None
        workers = workers_cpu(daemon_pid) - workers0 if daemon_pid else None
        wtrio = workers_cpu(daemon_pid, main_thread=True) - wtrio0 if daemon_pid else None
        assert done == frames, f"{done} of {frames} frames scored"
        return RunStats(frames, t0, t1, latency, done_at, c.packets - packets0, c.sent - sent0, cpu, trio, own,
                        workers, wtrio)

    def close(self) -> None:
        for rb, db, rid, did in self.bufs:
            self.c.unregister(rid)
            self.c.unregister(did)
            rb.close()
            db.close()
        self.c.close()
        if self.cuda is not None:
            self.cuda.close()


def bench_daemon(sock: str, w: int, h: int, frames: int, inflight: int, ring: int, memfd: bool = False,
                 models=("version=vmaf_v0.6.1",), features=(), daemon_pid: int | None = None,
                 submit_many: bool = True, outcome_runs: bool = True) -> RunStats:
    """One producer in this process: one timed run of ``frames`` frames."""
    p = Producer(sock, w, h, ring, memfd, models, features, submit_many=submit_many, outcome_runs=outcome_runs)
    try:
        return p.run(frames, inflight, daemon_pid)
    except Exception as e:  # a connection the daemon closed: say what it sent last (its error says why)
        raise RuntimeError(f"{type(e).__name__}: {e}; the daemon's last words: {last_words(p.c)}") from e
    finally:
        p.close()


def last_words(c, wait_s: float = 0.5) -> str:
    """After a failed run: the errors and goodbye the daemon sent that were not read yet (a daemon
    closes a connection after a fatal error, and the producer's next send fails with EPIPE first)."""
    from vmafx.protocol import Error, Goodbye

    said = []
    end = time.monotonic() + wait_s
    while time.monotonic() < end and len(said) < 8:
        try:
            msg = c.recv(timeout=max(0.01, end - time.monotonic()))
        except Exception:
            break  # the end of the stream, or nothing more within the wait
        if isinstance(msg, (Error, Goodbye)):
            said.append(repr(msg)[:400])
    return "; ".join(said) or "none unread"


def _producer_process(k: int, sock: str, w: int, h: int, frames: int, inflight: int, ring: int, memfd: bool,
                      models, features, barrier, results, submit_many: bool = True,
                      outcome_runs: bool = True) -> None:
    """A producer process of --producers: set up, wait for the others, run, report (or report the error)."""
    p = None
    try:
        p = Producer(sock, w, h, ring, memfd, models, features, name=f"bench{k}", submit_many=submit_many,
                     outcome_runs=outcome_runs)
        barrier.wait(timeout=300)
        results.put((k, p.run(frames, inflight)))
    except BaseException as e:  # reported to the parent, which says which producer failed and how
        barrier.abort()
        results.put((k, f"{type(e).__name__}: {e}"))
    finally:
        if p is not None:
            try:
                p.close()
            except Exception:
                pass


def bench_producers(n: int, daemon_pid: int, sock: str, w: int, h: int, frames: int, inflight: int, ring: int,
                    memfd: bool, models, features, submit_many: bool = True,
                    outcome_runs: bool = True) -> tuple[list[RunStats], float]:
    """``n`` producer processes at once, each its own connection and session; started together once all
    are set up (buffers registered, session open). Returns their runs and the daemon's CPU seconds."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a fresh interpreter each: no CUDA state inherited through fork
    barrier = ctx.Barrier(n + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_producer_process, args=(k, sock, w, h, frames, inflight, ring, memfd,
                                                         list(models), list(features), barrier, results,
                                                         submit_many, outcome_runs))
             for k in range(n)]
    for pr in procs:
        pr.start()
    import threading

    try:
        barrier.wait(timeout=300)
    except threading.BrokenBarrierError:
        pass  # a producer failed to set up: its error is in the queue
    cpu0 = cpu_seconds(daemon_pid)
    got: dict[int, RunStats | str] = {}
    while len(got) < n:
        k, r = results.get(timeout=600)
        got[k] = r
    cpu = cpu_seconds(daemon_pid) - cpu0
    for pr in procs:
        pr.join(timeout=60)
    errors = [f"producer {k}: {r}" for k, r in sorted(got.items()) if isinstance(r, str)]
    if errors:
        raise RuntimeError("; ".join(errors))
    return [got[k] for k in range(n)], cpu


def fairness(runs: list[RunStats]) -> tuple[float, float]:
    """Each producer's share of the results in the window where all of them ran, over the fair share 1/n:
    (min, max); 1.0 is perfectly fair. Whole-run rates would hide unfairness (a starved producer just
    finishes last), so only the common window counts."""
    lo, hi = max(r.start for r in runs), min(r.end for r in runs)
    counts = [sum(lo <= t <= hi for t in r.done_at) for r in runs]
    total = sum(counts)
    if total == 0:
        return float("nan"), float("nan")
    rel = [c / total * len(runs) for c in counts]
    return min(rel), max(rel)


def latency_text(latencies: list[float]) -> str:
    p50, p90, p99 = (np.percentile(latencies, q) * 1000 for q in (50, 90, 99))
    return f"latency p50 {p50:.1f} ms, p90 {p90:.1f} ms, p99 {p99:.1f} ms, max {max(latencies) * 1000:.1f} ms"


#: per bench_engine run: its scorer's (graphs captured, batches launched through a graph)
GRAPH_COUNTS: list[tuple[int, int]] = []


def device_frames(dev, stream, w: int, h: int) -> list:
    """make_frames' (ref, dist) pairs copied to the device: a pair of 4:2:0 FrameSources each
    (the caller frees each one's ``ptr``)."""
    from vmafx.formats import PixelFormat
    from vmafxd.lanes.gpu.engine import FrameSource

    srcs, hosts = [], []
    for ref, dist in make_frames(w, h):
        pair = []
        for planes in (ref, dist):
            blob = np.concatenate([p.ravel() for p in planes])
            ptr = dev.alloc(blob.nbytes)
            host = dev.alloc_host(blob.nbytes)
            host[:] = blob
            dev.copy_htod_async(ptr, host, blob.nbytes, stream)
            hosts.append(host)
            offs, o = [], 0
            for p in planes:
                offs.append((o, p.shape[1]))
                o += p.nbytes
            pair.append(FrameSource(ptr, PixelFormat.YUV420P, tuple(offs)))
        srcs.append(pair)
    stream.synchronize()
    for host in hosts:
        dev.free_host(host)
    return srcs


def _engine_fps(sc, frames_list: list, frames: int, batch: int) -> float:
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


def build_plan(models, features):
    """The scoring plan of these model and feature specs."""
    from vmafxd.core.scoring import ScoringPlan, parse_feature_spec
    from vmafxd.model import load_model

    return ScoringPlan.build([load_model(m) for m in models], [parse_feature_spec(f) for f in features])


def bench_engine(w: int, h: int, frames: int, batch: int, models=("version=vmaf_v0.6.1",), features=(),
                 lane: str = "cuda"):
    from vmafx.formats import Subsampling
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, KernelSet

    # the lane's own binding (on "emu" a smoke test of this mode: the emulator's times mean nothing)
    bindings = {"cuda": "cuda", "hip": "hip", "emu": "emulated"}
    if lane not in bindings:
        raise SystemExit(f"bench_gpu.py: --engine-only runs on a GPU lane ({', '.join(bindings)}), not {lane!r}")
    binding = importlib.import_module(f"vmafxd.lanes.{bindings[lane]}")
    rt = binding.load()
    dev = rt.device(0)
    dev.make_current()
    stream = dev.create_stream()
    ks = KernelSet(rt, dev, rt.compile_options)
    plan = build_plan(models, features)
    sc = GpuScorer(dev, ks, stream, plan, w, h, 8, Subsampling.S420, max_batch=batch)
    srcs = device_frames(dev, stream, w, h)
    try:
        fps = _engine_fps(sc, [GpuFrame(*srcs[i % len(srcs)]) for i in range(batch)], frames, batch)
        GRAPH_COUNTS.append((sc.graphs.captures, sc.graphs.launches))
    finally:  # each size's engine closed before the next one's (nothing left to the collector)
        sc.close()
        stream.synchronize()
        for pair in srcs:
            for src in pair:
                dev.free(src.ptr)
        stream.close()
        ks.close()
    return fps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="576x324,1920x1080,3840x2160")
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lane", default="cuda")
    ap.add_argument("--batch", default="auto",
                    help="the daemon's --gpu-batch (a number, or auto: 32 at 1080p, up to 128 below; the engine "
                         "alone takes the same number)")
    ap.add_argument("--inflight", type=int, default=128)
    ap.add_argument("--ring", type=int, default=0,
                    help="frame buffer pairs a producer registers and reuses (default: --inflight, at most 96): a "
                         "frame in flight holds its pair until it is released, so fewer pairs than --inflight bound "
                         "the frames not yet released")
    ap.add_argument("--engine-only", action="store_true")
    ap.add_argument("--models", default="version=vmaf_v0.6.1",
                    help="comma-separated model specs ('' for none: with --features psnr at a tiny size this "
                         "measures the daemon's and protocol's own cost per frame)")
    ap.add_argument("--features", default="", help="comma-separated feature specs")
    ap.add_argument("--memfd", action="store_true", help="host (memfd) frame buffers instead of VMM (cpu/emu lanes)")
    ap.add_argument("--producers", type=int, default=1,
                    help="N producer processes at once, each its own connection and session (same geometry, "
                         "--frames and --inflight each): aggregate frames/s against one producer, each one's share")
    ap.add_argument("--single-submits", action="store_true",
                    help="one submit packet per frame (as older clients), not submit_many: the A/B of the two")
    ap.add_argument("--single-outcomes", action="store_true",
                    help="a message a result and a release (as older clients), not runs of them (result_many, "
                         "released_many): the A/B of the two")
    ap.add_argument("--lane-process", action="store_true",
                    help="the daemon runs the GPU lane in a worker process per device (vmafxd --lane-process)")
    ap.add_argument("--daemon-cpus", type=cpu_list, default=None, metavar="LIST",
                    help="pin the daemon (its threads and lane workers) to these CPUs (taskset's form: 2 or 2-3,6)")
    ap.add_argument("--producer-cpus", type=cpu_list, default=None, metavar="LIST",
                    help="pin this process and its producer processes to these CPUs")
    args = ap.parse_args()
    try:
        args.batch = check_batch_setting(int(args.batch) if args.batch.strip().isdigit() else args.batch)
    except ValueError as e:
        ap.error(f"--batch: {e}")
    DAEMON_ARGS.extend(["--lane-process"] if args.lane_process else [])
    global DAEMON_CPUS
    DAEMON_CPUS = args.daemon_cpus
    if args.producer_cpus:
        os.sched_setaffinity(0, args.producer_cpus)
    if args.producers < 1 or args.inflight < 1 or args.frames < 1:
        ap.error("--producers, --inflight and --frames must be at least 1")
    if args.ring and not 2 <= args.ring <= 1000:
        ap.error("--ring: from 2 to 1000 buffer pairs")
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    rows = []
    if args.engine_only:
        for w, h in sizes:
            models = [m for m in args.models.split(",") if m]
            features = [f for f in args.features.split(",") if f]
            batch = batch_for(args.batch, w, h)
            fps = [bench_engine(w, h, args.frames, batch, models, features, args.lane)
                   for _ in range(args.repeats)]
            rows.append((f"{w}x{h}", "engine", statistics.median(fps), min(fps), max(fps), None, None))
            what = "+".join(x for x in (args.models, args.features) if x)
            graphs = GRAPH_COUNTS[-1] if GRAPH_COUNTS else (0, 0)
            print(f"engine {what} {w}x{h}: {statistics.median(fps):.0f} fps (min {min(fps):.0f}, "
                  f"max {max(fps):.0f}; {1e6 / statistics.median(fps):.0f} us/frame; batch {batch}, "
                  f"graphs captured {graphs[0]}, launched {graphs[1]})", flush=True)
        return 0
    models = [m for m in args.models.split(",") if m]
    features = [f for f in args.features.split(",") if f]
    what = "+".join(x for x in (args.models, args.features) if x)
    lag = build_plan(models, features).max_lag  # frame i is final once frame i + lag has come
    if args.inflight <= lag:  # frame i is answered once frame i + lag has come: never, with lag in flight
        ap.error(f"--inflight {args.inflight}: {what} answers frame i once frame i + {lag} has come; "
                 f"keep at least {lag + 1} in flight")
    ring = args.ring or max(2, min(args.inflight, 96) // 2 * 2)
    tmp = tempfile.mkdtemp(prefix="vxb", dir="/tmp")
    sock = os.path.join(tmp, "d.sock")
    limits = {}
    if args.producers > 1 or args.inflight > 256 or 2 * ring + 16 > 256:  # beyond one client's defaults
        limits = {**producer_limits(args.producers, args.inflight, ring),
                  "max_frames_in_flight": max(256, args.inflight), "max_buffers_per_client": max(256, 2 * ring + 16)}
    proc = start_daemon(args.lane, args.batch, sock, limits or None)
    try:
        for w, h in sizes:
            frames = args.frames if w * h <= 2_100_000 else max(64, args.frames // 3)
            tail = (f"({frames} frames, batch {batch_for(args.batch, w, h)}, {args.inflight} in flight, "
                    f"{'one submit per frame' if args.single_submits else 'submit_many'}, "
                    f"{'single outcomes' if args.single_outcomes else 'outcome runs'})")
            if args.producers > 1:
                print(producers_line(args, proc.pid, sock, w, h, frames, ring, models, features, what), flush=True)
                continue
            workers0 = workers_cpu(proc.pid)
            runs = [bench_daemon(sock, w, h, frames, args.inflight, ring, args.memfd, models, features, proc.pid,
                                 submit_many=not args.single_submits, outcome_runs=not args.single_outcomes)
                    for _ in range(args.repeats)]
            if args.lane_process:  # the daemon's CPU below is its own process's; its lane workers' here
                print(f"lane workers' CPU {(workers_cpu(proc.pid) - workers0) / (frames * args.repeats) * 1000:.3f}"
                      f" s per 1,000 frames (all runs, with their sessions' setup); in the timed part "
                      f"{statistics.median(r.workers_cpu / r.frames * 1000 for r in runs):.3f} s (their trio "
                      f"threads {statistics.median(r.workers_trio_cpu / r.frames * 1000 for r in runs):.3f} s)",
                      flush=True)
            fps = [r.fps for r in runs]
            pct = {q: statistics.median(np.percentile(r.latencies, q) * 1000 for r in runs) for q in (50, 90, 95, 99)}
            print(f"daemon {args.lane} {what} {w}x{h}: {statistics.median(fps):.0f} fps (min {min(fps):.0f}, "
                  f"max {max(fps):.0f}); latency p50 {pct[50]:.1f} ms, p90 {pct[90]:.1f} ms, p95 {pct[95]:.1f} ms, "
                  f"p99 {pct[99]:.1f} ms; daemon CPU "
                  f"{statistics.median(r.daemon_cpu / r.frames * 1000 for r in runs):.3f} s per 1,000 frames (its trio "
                  f"thread {statistics.median(r.trio_cpu / r.frames * 1000 for r in runs):.3f} s); producer CPU "
                  f"{statistics.median(r.producer_cpu / r.frames * 1000 for r in runs):.3f} s per 1,000 frames; "
                  f"{statistics.median(r.frames / r.packets for r in runs):.1f} frames per packet read; "
                  f"{statistics.median(r.frames / r.sent for r in runs):.1f} frames per packet sent {tail}",
                  flush=True)
    except Exception as e:
        # a run that failed says, on its last line, whether the daemon was still running then
        # (a crashed daemon's status: negative for the signal that ended it)
        import traceback

        traceback.print_exc()
        try:  # a daemon that died closed its socket before it could be waited for: give it a moment
            status = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            status = None
        print(f"bench_gpu.py: the run failed ({type(e).__name__}: {e}); the daemon "
              + ("was still running" if status is None else f"had exited with status {status}"), flush=True)
        return 1
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return 0


def producers_line(args, daemon_pid: int, sock: str, w: int, h: int, frames: int, ring: int, models, features,
                   what: str) -> str:
    """--producers N: one producer alone, then N at once (same geometry, frames and depth each), R times."""
    n = args.producers
    alone, many = [], []
    for _ in range(args.repeats):
        many_ok = not args.single_submits
        runs, cpu = bench_producers(1, daemon_pid, sock, w, h, frames, args.inflight, ring, args.memfd, models, features,
                                    many_ok, not args.single_outcomes)
        alone.append((runs[0].fps, cpu / frames * 1000))
        runs, cpu = bench_producers(n, daemon_pid, sock, w, h, frames, args.inflight, ring, args.memfd, models, features,
                                    many_ok, not args.single_outcomes)
        agg = sum(r.frames for r in runs) / (max(r.end for r in runs) - min(r.start for r in runs))
        many.append((agg, cpu / (n * frames) * 1000, runs))
    one = statistics.median(a[0] for a in alone)
    aggs = [m[0] for m in many]
    agg = statistics.median(aggs)
    # the repetition whose aggregate is the median stands for the per-producer figures
    mid = sorted(many, key=lambda m: m[0])[len(many) // 2][2]
    each = [r.fps for r in mid]
    share_lo, share_hi = fairness(mid)
    return (f"producers {n} {args.lane} {what} {w}x{h}: aggregate {agg:.0f} fps (min {min(aggs):.0f}, max "
            f"{max(aggs):.0f}) vs one producer {one:.0f} fps: {agg / one:.2f}x; each producer {min(each):.0f}.."
            f"{max(each):.0f} fps; share of the common window over the fair 1/{n}: min {share_lo:.2f}, max "
            f"{share_hi:.2f}; {latency_text([x for r in mid for x in r.latencies])}; daemon CPU "
            f"{statistics.median(m[1] for m in many):.2f} s per 1,000 frames (one producer: "
            f"{statistics.median(a[1] for a in alone):.2f}) ({frames} frames each, batch {batch_for(args.batch, w, h)}, "
            f"{args.inflight} in flight each)")


if __name__ == "__main__":
    sys.exit(main())
