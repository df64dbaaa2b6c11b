"""Looking at the daemon's memory from outside: ``SIGUSR2`` and ``VMAFXD_TRACEMALLOC``.

``kill -USR2 <daemon>`` runs a full ``gc.collect()`` and glibc's
``malloc_trim(0)`` and logs the RSS before and after each (a warning line:
``memory: RSS 61.2 MB; after gc 61.0 MB; after malloc_trim 48.3 MB``), so a
soak can tell memory the daemon still holds from memory the allocator kept.
With ``VMAFXD_TRACEMALLOC=N`` in its environment the daemon traces Python
allocations from its start (``N`` frames per traceback; slow, for
investigations only) and each ``SIGUSR2`` also writes a snapshot,
``$VMAFXD_TRACEMALLOC_DIR/vmafxd-PID-K.tracemalloc`` (default ``/tmp``), whose
diff against the first shows what grew (scripts/soak.py ``--tracemalloc``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import signal
import tracemalloc

__all__ = ["install", "malloc_trim", "rss_kb"]

log = logging.getLogger("vmafxd.memory")

_snapshots = 0


def rss_kb() -> int:
    """This process's resident set (kB), from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _libc():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def malloc_trim() -> bool:
    """glibc's ``malloc_trim(0)``: hand free heap pages back to the kernel.  False where there is no such call."""
    libc = _libc()
    fn = getattr(libc, "malloc_trim", None) if libc is not None else None
    if fn is None:
        return False
    fn.argtypes = [ctypes.c_size_t]
    fn(0)
    return True


def _report(signum=None, frame=None) -> None:
    global _snapshots
    before = rss_kb()
    gc.collect()
    after_gc = rss_kb()
    trimmed = malloc_trim()
    after_trim = rss_kb()
    where = ""
    if tracemalloc.is_tracing():
        directory = os.environ.get("VMAFXD_TRACEMALLOC_DIR", "/tmp")
        path = os.path.join(directory, f"vmafxd-{os.getpid()}-{_snapshots}.tracemalloc")
        tracemalloc.take_snapshot().dump(path)
        _snapshots += 1
        where = f"; snapshot {path}"
    log.warning("memory: RSS %.1f MB; after gc %.1f MB; after malloc_trim %s%s", before / 1024, after_gc / 1024,
                f"{after_trim / 1024:.1f} MB" if trimmed else "(no malloc_trim here)", where)


def install() -> None:
    """From the main thread, before the event loop: the SIGUSR2 handler, and tracing if asked for."""
    frames = os.environ.get("VMAFXD_TRACEMALLOC")
    if frames:
        tracemalloc.start(max(1, int(frames)))
        log.warning("VMAFXD_TRACEMALLOC=%s: tracing Python allocations (slow)", frames)
    signal.signal(signal.SIGUSR2, _report)
