"""The CPU lane's allocator settings (vmafxd/lanes/cpu_alloc.py): freed memory stays in the process.

Each case runs in a fresh interpreter: the settings are once a process, and
they must not leak into the test process's own allocator.
"""

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Allocates and frees 64 MB of touched pages (one block, then many 2 MB ones, as a twin's
# temporaries are) and reports what keep_heap returned and how much of it stayed resident.
_PROBE = r"""
import json, sys
from vmafxd.lanes.cpu_alloc import keep_heap
import numpy as np

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

applied = keep_heap(*([sys.argv[1] == "on"] if len(sys.argv) > 1 else []))
before = rss()
a = np.ones(8_000_000)
del a
blocks = [np.ones(250_000) for _ in range(32)]
del blocks
print(json.dumps({"applied": applied, "kept": rss() - before}))
"""


def _probe(*args, env_value=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "client")]))
    env.pop("VMAFX_CPU_KEEP_HEAP", None)
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(var, None)
    if env_value is not None:
        env["VMAFX_CPU_KEEP_HEAP"] = env_value
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "gnu_get_libc_version")
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's mallopt only")
def test_keep_heap_keeps_freed_memory_and_each_switch_turns_it_off():
    on = _probe()
    # an older glibc takes a 32 MiB mmap threshold at most
    assert on["applied"]["mmap_threshold"] >= 32 * 1024 * 1024
    assert on["applied"]["trim_threshold"] == 2**31 - 1 and on["applied"]["top_pad"] == 100_000_000
    assert on["kept"] > 48_000_000  # the 64 MB came back to the heap, not to the kernel
    for off in (_probe(env_value="0"), _probe("off")):
        assert off["applied"] is None
        assert off["kept"] < 16_000_000  # glibc's defaults: munmap and trim gave it back


def test_a_c_library_without_glibc_mallopt_is_left_alone(monkeypatch):
    from vmafxd.lanes import cpu_alloc

    monkeypatch.setattr(cpu_alloc, "_applied", None)
    monkeypatch.setattr(cpu_alloc, "_mallopt", lambda: None)
    monkeypatch.delenv("VMAFX_CPU_KEEP_HEAP", raising=False)
    assert cpu_alloc.keep_heap() is None
