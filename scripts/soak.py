#!/usr/bin/env python3
"""The reliability suite's long versions, with a table of what they measured.

    scripts/soak.py [--lane cpu|cuda|hip|emu] [--fuzz-minutes 10] [--churn 10000]
                    [--sigterm-trials 100] [--eproto-trials 300]

Runs against fresh daemons started from this tree (tests/daemon/conftest.Daemon):

* fuzz: the hypothesis protocol fuzzer (tests/reliability/fuzz.py) for N
  minutes: packets sent, crashes, the daemon's fds / RSS / threads before and
  after (and, on a GPU lane, device memory used, from nvidia-smi or rocm-smi);
* churn: N forked clients SIGKILLed mid-session; fds before/after and whether
  the daemon's status is clean (no client, session, buffer, frame or pending
  release left);
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
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

import random  # noqa: E402

from tests.daemon.conftest import Daemon  # noqa: E402
from tests.reliability.fuzz import health, play, random_sequence  # noqa: E402
from tests.reliability.test_errors_delivered import eproto_trial  # noqa: E402
from tests.reliability.trials import churn, sigterm_trial, wait_clean  # noqa: E402


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


def daemon(lane: str, log_level: str = "info", **kw) -> Daemon:
    return Daemon("--lane", lane, "--log-level", log_level, **kw)


def soak_fuzz(lane: str, minutes: float, seed: int = 0) -> dict:
    """The fuzzer's conversations (random_sequence: the CI strategy's choices from a seeded Random), for minutes."""
    d = daemon(lane, log_level="warning")
    try:
        wait_clean(d)
        d.wait_settled()
        mem0 = device_memory_mib(lane)
        before = health(d.pid)
        counts = {"sent": 0, "read": 0, "conversations": 0}
        rng = random.Random(seed)
        end = time.monotonic() + minutes * 60
        while time.monotonic() < end and d.proc.poll() is None:
            sent, got = play(d.socket, random_sequence(rng), read_s=0.0005, final_read_s=0.002)
            counts["sent"] += sent
            counts["read"] += got
            counts["conversations"] += 1
        crashed = d.proc.poll() is not None
        st = wait_clean(d) if not crashed else {}
        end_settle = time.monotonic() + 12  # trio's thread cache lets idle threads go after ~10 s
        after = health(d.pid) if not crashed else None
        while not crashed and time.monotonic() < end_settle and (after.fds != before.fds
                                                                  or after.threads > before.threads):
            time.sleep(0.2)
            after = health(d.pid)
        mem1 = device_memory_mib(lane)
        tracebacks = d.log().count("Traceback")
        rc = d.stop() if not crashed else d.proc.returncode
        return dict(minutes=minutes, **counts, crashes=int(crashed), before=before, after=after, status=st,
                    mem=(mem0, mem1), tracebacks=tracebacks, exit=rc)
    finally:
        d.close()


def soak_churn(lane: str, clients: int) -> dict:
    d = daemon(lane, workers=1)
    try:
        churn(d.socket, 3, seed=99)  # warm-up
        wait_clean(d)
        base = d.wait_settled()
        mem0 = device_memory_mib(lane)
        t0 = time.monotonic()
        killed = churn(d.socket, clients, seed=1)
        elapsed = time.monotonic() - t0
        st = wait_clean(d, timeout=30)
        fds = d.wait_fds(base, timeout=30)
        mem1 = device_memory_mib(lane)
        clean = (st["clients"] == 1 and st["sessions"] == 0 and st["buffers"] == 0
                 and st["frames_in_flight"] == 0 and st["pending_releases"] == 0)
        rc = d.stop()
        return dict(clients=clients, killed=killed, seconds=elapsed, fds=(base, fds), clean=clean,
                    scored=st.get("frames_scored"), mem=(mem0, mem1), exit=rc)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lane", default="cpu")
    ap.add_argument("--fuzz-minutes", type=float, default=10.0)
    ap.add_argument("--churn", type=int, default=10000)
    ap.add_argument("--sigterm-trials", type=int, default=100)
    ap.add_argument("--eproto-trials", type=int, default=300)
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    rows = []
    good = True

    f = soak_fuzz(args.lane, args.fuzz_minutes)
    b, a = f["before"], f["after"]
    fuzz_ok = (not f["crashes"] and a is not None and a.fds == b.fds and a.rss_kb <= b.rss_kb * 1.10
               and f["tracebacks"] == 0 and f["exit"] == 0)
    mem = f"; device memory {f['mem'][0]}→{f['mem'][1]} MiB" if f["mem"][0] is not None else ""
    rows.append(("fuzzed packets in %g min (%d conversations), crashes, fds / RSS / threads before→after"
                 % (f["minutes"], f["conversations"]),
                 f"{f['sent']:,}, {f['crashes']}, "
                 + (f"{b.fds}→{a.fds} / {b.rss_kb // 1024}→{a.rss_kb // 1024} MB / {b.threads}→{a.threads}"
                    if a else "daemon died") + mem))
    good &= fuzz_ok

    c = soak_churn(args.lane, args.churn)
    mem = f"; device memory {c['mem'][0]}→{c['mem'][1]} MiB" if c["mem"][0] is not None else ""
    rows.append((f"churned clients (SIGKILL mid-session, {c['seconds']:.0f} s), fds before→after, status",
                 f"{c['killed']:,}, {c['fds'][0]}→{c['fds'][1]}, {'clean' if c['clean'] else 'NOT clean'}{mem}"))
    good &= c["killed"] == c["clients"] and c["fds"][0] == c["fds"][1] and c["clean"] and c["exit"] == 0

    s = soak_sigterm(args.sigterm_trials)
    rows.append((f"submits answered exactly once across SIGTERM ({s['trials']} trials)",
                 f"{s['ok']}/{s['trials']} trials ({s['submitted']:,} submits, {s['shutdown_errors']:,} "
                 f"answered E_SHUTDOWN)"))
    good &= s["ok"] == s["trials"]

    e = soak_eproto(args.eproto_trials)
    rows.append((f"E_PROTO delivered with 4 packets following ({e['trials']} trials)",
                 f"{e['delivered']}/{e['trials']}" + (f" (others: {e['other']})" if e["other"] else "")))
    good &= e["delivered"] == e["trials"]

    width = max(len(r[0]) for r in rows)
    print(f"| {'figure (lane ' + args.lane + ')':<{width}} | measured |")
    print(f"|{'-' * (width + 2)}|---:|")
    for name, value in rows:
        print(f"| {name:<{width}} | {value} |")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
