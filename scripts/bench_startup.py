#!/usr/bin/env python3
"""The command line's start-up: ``vmafxctl score --frames 1`` with no daemon, timed whole.

    python3 scripts/bench_startup.py [--lane cpu|cuda|hip] [--runs 5] [-r REF -d DIST]

Prints the median wall time of ``--runs`` fresh processes scoring one frame in this
process (``--in-process``: no daemon is looked for), then one more run under
``python -X importtime``: the import total and the slowest top-level imports, and which
of trio, msgpack, PyAV (``av``) and the feature modules were imported at all.  Without
``-r``/``-d`` it scores the vendored astronaut pair (decompressed to a temporary folder).
"""

from __future__ import annotations

import argparse
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIPS = ROOT / "tests" / "data" / "clips"
PAIR = ("src_astronaut_576x324.y4m.xz", "dst_astronaut_576x324_unsharp.y4m.xz")
#: modules whose presence says a path pays for something it does not use
WATCH = ("trio", "msgpack", "av", "urllib.request", "vmafx.protocol", "vmafx.transport", "vmafxd.lanes.device")

CODE = ("import sys; from vmafx.cli import main; "
        "rc = main(['score', '-r', sys.argv[1], '-d', sys.argv[2], '--frames', '1', '-q', '--in-process', "
        "'--lane', sys.argv[3]]); sys.stderr.write('MODULES ' + ' '.join(sys.modules) + '\\n'); sys.exit(rc)")


def _env(pycache: str) -> dict:
    env = dict(os.environ)
    # as an installed vmafxctl starts: from compiled bytecode (kept under a prefix of
    # our own, not beside the sources), even where the shell says not to write it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "client"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run(argv: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        said = "".join(line for line in (p.stdout + p.stderr).splitlines(True) if not line.startswith("MODULES "))
        sys.exit(f"bench_startup: vmafxctl score ({' '.join(argv[3:])}) exited {p.returncode}:\n{said}")
    return dt, p.stderr


def _import_table(stderr: str):
    """(total microseconds of top-level imports, [(cumulative us, module)] top-level, set of every module).

    -X importtime times the ``import`` statement only: a module loaded through
    ``importlib.import_module`` (the lane and feature registries) is not listed, its own
    imports are, as top-level ones.  So the set of modules is what the process had loaded
    at its end (sys.modules, written by CODE)."""
    total, top, every = 0, [], set()
    for line in stderr.splitlines():
        if line.startswith("MODULES "):
            every = set(line.split()[1:])
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _self, cum, name = line[len("import time:"):].split("|", 2)
        mod = name.rstrip()
        if mod.startswith(" ") and not mod.startswith("  "):
            # one space after the bar: a top-level import
            total += int(cum)
            top.append((int(cum), mod.strip()))
    return total, sorted(top, reverse=True), every


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lane", default="cpu", choices=("cpu", "cuda", "hip"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=12, help="how many top-level imports to list")
    ap.add_argument("-r", dest="ref")
    ap.add_argument("-d", dest="dist")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(os.path.join(tmp, "pycache"))
        ref, dist = a.ref, a.dist
        if not (ref and dist):
            ref, dist = (os.path.join(tmp, n[:-3]) for n in PAIR)
            for n, out in zip(PAIR, (ref, dist)):
                Path(out).write_bytes(lzma.decompress((CLIPS / n).read_bytes()))
        argv = [sys.executable, "-c", CODE, ref, dist, a.lane]
        _run(argv, env)  # once unmeasured: bytecode (and a GPU lane's kernel cache) written
        walls = [_run(argv, env)[0] for _ in range(a.runs)]
        _, err = _run([sys.executable, "-X", "importtime", *argv[1:]], env)
        base, _ = _run([sys.executable, "-c", "pass"], env)
    total, top, every = _import_table(err)
    print(f"vmafxctl score --frames 1 --in-process --lane {a.lane}: median {statistics.median(walls):.3f} s "
          f"of {a.runs} (min {min(walls):.3f}, max {max(walls):.3f}); a bare python -c pass: {base:.3f} s")
    print(f"imports: {total / 1e6:.3f} s in all (one -X importtime run; {len(every)} modules loaded)")
    for us, mod in top[:a.top]:
        print(f"  {us / 1e3:8.1f} ms  {mod}")
    print("imported: " + ", ".join(f"{m} {'yes' if m in every else 'no'}" for m in WATCH))
    feats = sorted(m.rsplit(".", 1)[1] for m in every if m.startswith("vmafxd.features.")
                   and not m.rsplit(".", 1)[1].startswith("_") and m.rsplit(".", 1)[1] not in ("declaration", "names"))
    print(f"feature modules: {len(feats)} ({', '.join(feats)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
