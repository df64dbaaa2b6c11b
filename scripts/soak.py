#!/usr/bin/env python3
"""The reliability suite's long versions, with a table of what they measured.

    scripts/soak.py [--lane cpu|cuda|hip|emu] [--fuzz-minutes 10] [--fuzzers N] [--churn 10000]
                    [--churn-parallel N] [--sigterm-trials 100] [--eproto-trials 300]

A count or a duration of 0 leaves that part out (so each fits a bounded run).
Runs against fresh daemons started from this tree (tests/daemon/conftest.Daemon):

* fuzz: ``--fuzzers`` processes (default: one per core but one) flood the
  daemon with mutated packets for N minutes (tests/reliability/fuzz_flood.py:
  packets made in advance with the CI fuzzer's mutator, many per connection,
  non-blocking writes): packets written and their rate, crashes, the daemon's
  fds / RSS / threads before and after, RSS in the middle of the run (does it
  plateau?) and after a gc and malloc_trim (SIGUSR2, vmafxd/memory_debug.py);
  on a GPU lane device memory (nvidia-smi / rocm-smi, and the lane's own
  figure from ``status``).  The baseline is taken after a warm-up (a scored
  session and a short flood): the first of them load code, kernels and
  allocator arenas once.
* churn: N forked clients, ``--churn-parallel`` alive at a time, each SIGKILLed
  mid-session (after its first submit); fds, RSS, status and device memory
  before/after.
* SIGTERM: N trials of submits before and during SIGTERM; trials in which every
  submit got exactly one answer;
* E_PROTO: N trials of a garbage packet followed by 4 more; trials in which the
  client read the E_PROTO error (then end-of-file, not a reset).

Exit status 0 when every figure is what the suite asks for, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _checkout import ROOT

from tests.daemon.conftest import Daemon  # noqa: E402
from tests.reliability.fuzz import health  # noqa: E402
from tests.reliability.fuzz_flood import run_fuzzers  # noqa: E402
from tests.reliability.test_errors_delivered import eproto_trial  # noqa: E402
from tests.reliability.trials import churn, sigterm_trial, status_of, wait_clean  # noqa: E402


def device_memory_mib(lane: str) -> int | None:
    """Device memory in use on GPU 0 (MiB), or None on the CPU lanes / without the tool."""
    if lane == "cuda" and shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True).stdout.strip()
        return int(out.splitlines()[0]) if out else None
    if lane == "hip" and shutil.which("rocm-smi"):
        out = subprocess.run(["rocm-smi", "--showmeminfo", "vram", "--csv"], capture_output=True, text=True).stdout
        for line in out.splitlines()[1:]:
            cells = line.split(",")
            if len(cells) >= 3:
                return int(cells[2]) >> 20
    return None


def lane_memory(d: Daemon) -> tuple[float, int | None] | None:
    """The lane's own figure from ``status``: (MiB in use on device 0, live allocations or None)."""
    rows = status_of(d.socket).get("device_memory")
    if not rows or "used_bytes" not in rows[0]:
        return None
    return rows[0]["used_bytes"] / 2**20, rows[0].get("allocations")


def memory_report(d: Daemon, timeout: float = 10.0) -> str:
    """SIGUSR2: the daemon runs gc and malloc_trim and logs its RSS around them (vmafxd/memory_debug.py)."""
    n = d.log().count("memory: RSS")
    os.kill(d.pid, signal.SIGUSR2)
    end = time.monotonic() + timeout
    while d.log().count("memory: RSS") == n and time.monotonic() < end:
        time.sleep(0.05)
    lines = [ln for ln in d.log().splitlines() if "memory: RSS" in ln]
    return "RSS" + lines[-1].split("memory: RSS", 1)[1] if len(lines) > n else "no report"


def daemon(lane: str, log_level: str = "info", **kw) -> Daemon:
    return Daemon("--lane", lane, "--log-level", log_level, **kw)


def settled_health(d: Daemon, before, seconds: float = 12.0):
    """The daemon's health once its fds are back and its threads no more than before (or after ``seconds``:
    trio's thread cache lets idle threads go after ~10 s)."""
    end = time.monotonic() + seconds
    after = health(d.pid)
    while time.monotonic() < end and (after.fds != before.fds or after.threads > before.threads):
        time.sleep(0.2)
        after = health(d.pid)
    return after


def tracemalloc_diff(directory: str, top: int = 15) -> list[str]:
    """The lines whose Python allocations grew most between the first and the last snapshot."""
    import tracemalloc

    snaps = sorted(Path(directory).glob("vmafxd-*.tracemalloc"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    if len(snaps) < 2:
        return ["(fewer than two snapshots)"]
    first, last = (tracemalloc.Snapshot.load(str(p)) for p in (snaps[0], snaps[-1]))
    return [str(st) for st in last.compare_to(first, "lineno")[:top]]


def soak_fuzz(lane: str, minutes: float, fuzzers: int, seed: int = 0, trace_frames: int = 0) -> dict:
    env, trace_dir = {}, None
    if trace_frames:
        import tempfile

        trace_dir = tempfile.mkdtemp(prefix="vxtm", dir="/tmp")
        env = {"VMAFXD_TRACEMALLOC": str(trace_frames), "VMAFXD_TRACEMALLOC_DIR": trace_dir}
    d = daemon(lane, log_level="warning", env=env)
    try:
        # Warm-up: a scored session (code, kernels, the lane's first scorer) and a short flood
        # (allocator arenas, trio's thread cache); the baseline is what a warm daemon holds.
        churn(d.socket, 2, seed=99)
        run_fuzzers(d.socket, 5.0, fuzzers, seed=seed + 7919)
        wait_clean(d)
        d.wait_settled()
        time.sleep(2.0)
        if trace_dir:
            memory_report(d)  # the first snapshot (gc and malloc_trim run before the baseline's RSS)
        before = settled_health(d, health(d.pid), 12.0)
        mem0, lane0 = device_memory_mib(lane), lane_memory(d)
        samples: list[tuple[float, int]] = []
        t0 = time.monotonic()

        def sample() -> None:
            if d.proc.poll() is None:
                samples.append((time.monotonic() - t0, health(d.pid).rss_kb))

        counts = run_fuzzers(d.socket, minutes * 60, fuzzers, seed=seed, on_tick=sample, tick_s=10.0)
        crashed = d.proc.poll() is not None
        st = wait_clean(d) if not crashed else {}
        after = settled_health(d, before) if not crashed else None
        report = memory_report(d) if not crashed else ""
        mem1, lane1 = device_memory_mib(lane), (lane_memory(d) if not crashed else None)
        tracebacks = d.log().count("Traceback")
        rc = d.stop() if not crashed else d.proc.returncode
        half = [rss for t, rss in samples if t >= minutes * 30]
        grew = tracemalloc_diff(trace_dir) if trace_dir else []
        return dict(grew=grew, minutes=minutes, fuzzers=fuzzers, counts=counts, crashes=int(crashed), before=before,
                    after=after, status=st, mem=(mem0, mem1), lane_mem=(lane0, lane1), tracebacks=tracebacks,
                    exit=rc, report=report, rss_mid=samples[len(samples) // 2][1] if samples else None,
                    rss_max_late=max(half) if half else None)
    finally:
        d.close()


def soak_churn(lane: str, clients: int, parallel: int) -> dict:
    d = daemon(lane, workers=1)
    try:
        churn(d.socket, 3, seed=99)  # warm-up
        wait_clean(d)
        base = d.wait_settled()
        time.sleep(1.0)  # a GPU lane trims its pool 0.5 s after its last session
        h0 = health(d.pid)
        mem0, lane0 = device_memory_mib(lane), lane_memory(d)
        t0 = time.monotonic()
        killed = churn(d.socket, clients, seed=1, parallel=parallel)
        elapsed = time.monotonic() - t0
        st = wait_clean(d, timeout=60)
        fds = d.wait_fds(base, timeout=30)
        time.sleep(1.0)
        h1 = settled_health(d, h0)
        mem1, lane1 = device_memory_mib(lane), lane_memory(d)
        clean = (st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0
                 and st["frames_in_flight"] == 0 and st["pending_releases"] == 0)
        tracebacks = d.log().count("Traceback")
        rc = d.stop()
        return dict(clients=clients, parallel=parallel, killed=killed, seconds=elapsed, fds=(base, fds),
                    clean=clean, scored=st.get("frames_scored"), mem=(mem0, mem1), lane_mem=(lane0, lane1),
                    rss=(h0.rss_kb, h1.rss_kb), threads=(h0.threads, h1.threads), tracebacks=tracebacks, exit=rc)
    finally:
        d.close()


def soak_sigterm(trials: int) -> dict:
    ok = submitted = during = 0
    for seed in range(trials):
        t = sigterm_trial(seed, sigterm_after=None if seed % 3 else 0)
        submitted += t.submitted
        during += t.shutdown_errors
        ok += int(t.answered_once == t.submitted and t.unanswered == 0 and t.unreleased == 0
                  and t.goodbye and t.exit_status == 0)
    return dict(trials=trials, ok=ok, submitted=submitted, shutdown_errors=during)


def soak_eproto(trials: int) -> dict:
    d = daemon("cpu")
    try:
        got = [eproto_trial(d.socket, following=4) for _ in range(trials)]
        d.stop()
        return dict(trials=trials, delivered=got.count("delivered"),
                    other={k: got.count(k) for k in set(got) if k != "delivered"})
    finally:
        d.close()


def _device_memory_text(mem, lane_mem) -> str:
    out = ""
    if mem[0] is not None:
        out += f"; device memory (nvidia-smi) {mem[0]}→{mem[1]} MiB"
    if lane_mem[0] is not None and lane_mem[1] is not None:
        (u0, n0), (u1, n1) = lane_mem
        out += f"; lane's figure {u0:.0f}→{u1:.0f} MiB" + (f", {n0}→{n1} allocations" if n0 is not None else "")
    return out


def _device_memory_back(mem, lane_mem) -> bool:
    """Device memory no higher after than before, by every figure there is (R: back at baseline)."""
    ok = mem[0] is None or (mem[1] is not None and mem[1] <= mem[0])
    if lane_mem[0] is not None:
        (u0, n0), after = lane_mem
        ok &= after is not None and after[0] <= u0 and (n0 is None or after[1] <= n0)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lane", default="cpu")
    ap.add_argument("--fuzz-minutes", type=float, default=10.0, help="0: no fuzz")
    ap.add_argument("--fuzzers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                    help="fuzzing processes (default: one per core but one)")
    ap.add_argument("--churn", type=int, default=10000, help="clients; 0: no churn")
    ap.add_argument("--churn-parallel", type=int, default=min(24, max(4, 2 * (os.cpu_count() or 2))),
                    help="churned clients alive at a time (below max_clients_per_uid, 32)")
    ap.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                    help="fuzz with the daemon tracing its Python allocations; print what grew most")
    ap.add_argument("--sigterm-trials", type=int, default=100)
    ap.add_argument("--eproto-trials", type=int, default=300)
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    rows = []
    good = True

    if args.fuzz_minutes > 0:
        f = soak_fuzz(args.lane, args.fuzz_minutes, args.fuzzers, trace_frames=args.tracemalloc)
        if f["grew"]:
            print("Python allocations that grew most during the fuzz (tracemalloc):")
            print("\n".join("  " + line for line in f["grew"]))
        b, a, n = f["before"], f["after"], f["counts"]
        fuzz_ok = (not f["crashes"] and a is not None and a.fds == b.fds and a.rss_kb <= b.rss_kb * 1.10
                   and f["tracebacks"] == 0 and f["exit"] == 0 and not n["errors"])
        rate = n.get("sent", 0) / max(n["seconds"], 1e-9)
        rows.append((f"fuzzed packets written (of them answered) in {f['minutes']:g} min ({f['fuzzers']} fuzzers, "
                     f"{n.get('connections', 0):,} connections, {n.get('refused', 0):,} refused at hello), "
                     "packets/s, crashes",
                     f"{n.get('sent', 0):,} ({n.get('handled', 0):,}), {rate:,.0f}/s, {f['crashes']}"
                     + (f" (fuzzer errors: {n['errors'][:2]})" if n["errors"] else "")))
        if a is not None:
            mid = f"{f['rss_mid'] // 1024}" if f["rss_mid"] else "?"
            late = f"{f['rss_max_late'] // 1024}" if f["rss_max_late"] else "?"
            rows.append(("after the fuzz: fds / threads before→after; RSS before→mid-run→max of 2nd half→after",
                         f"{b.fds}→{a.fds} / {b.threads}→{a.threads}; {b.rss_kb // 1024}→{mid}→{late}→"
                         f"{a.rss_kb // 1024} MB ({100 * (a.rss_kb - b.rss_kb) / b.rss_kb:+.0f} %)"
                         + _device_memory_text(f["mem"], f["lane_mem"])))
            rows.append(("after the fuzz, SIGUSR2 (gc, malloc_trim)", f["report"]))
        else:
            rows.append(("after the fuzz", "daemon died"))
        good &= fuzz_ok

    if args.churn > 0:
        c = soak_churn(args.lane, args.churn, args.churn_parallel)
        rows.append((f"churned clients (SIGKILL mid-session, {c['parallel']} at a time, {c['seconds']:.0f} s), "
                     "fds / RSS / threads before→after, status",
                     f"{c['killed']:,} of {c['clients']:,} ({c['killed'] / max(c['seconds'], 1e-9):.0f}/s), "
                     f"{c['fds'][0]}→{c['fds'][1]} / {c['rss'][0] // 1024}→{c['rss'][1] // 1024} MB / "
                     f"{c['threads'][0]}→{c['threads'][1]}, {'clean' if c['clean'] else 'NOT clean'}"
                     + _device_memory_text(c["mem"], c["lane_mem"])))
        good &= (c["killed"] == c["clients"] and c["fds"][0] == c["fds"][1] and c["clean"] and c["exit"] == 0
                 and c["tracebacks"] == 0 and _device_memory_back(c["mem"], c["lane_mem"]))

    if args.sigterm_trials > 0:
        s = soak_sigterm(args.sigterm_trials)
        rows.append((f"submits answered exactly once across SIGTERM ({s['trials']} trials)",
                     f"{s['ok']}/{s['trials']} trials ({s['submitted']:,} submits, {s['shutdown_errors']:,} "
                     f"answered E_SHUTDOWN)"))
        good &= s["ok"] == s["trials"]

    if args.eproto_trials > 0:
        e = soak_eproto(args.eproto_trials)
        rows.append((f"E_PROTO delivered with 4 packets following ({e['trials']} trials)",
                     f"{e['delivered']}/{e['trials']}" + (f" (others: {e['other']})" if e["other"] else "")))
        good &= e["delivered"] == e["trials"]

    if not rows:
        ap.error("nothing to run: every part was given 0")
    width = max(len(r[0]) for r in rows)
    print(f"| {'figure (lane ' + args.lane + ')':<{width}} | measured |")
    print(f"|{'-' * (width + 2)}|---:|")
    for name, value in rows:
        print(f"| {name:<{width}} | {value} |")
    print("exit status", 0 if good else 1)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
