"""The CPU lane's allocator settings: keep the heap instead of giving it back every frame.

The numpy twins allocate and free their temporaries every frame (a few hundred
arrays of 0.1-16 MB).  glibc's malloc serves the large ones with ``mmap`` and
returns them with ``munmap``, and trims the top of the heap back to the kernel
when more than ``M_TRIM_THRESHOLD`` is free, so each frame's temporaries are
fresh pages again: faulted in and zeroed by the kernel, one fault a 4 KiB page.
At 576x324 that costs the allocation-heavy twins (ADM, CAMBI, PSNR-HVS) a third
of their time (docs/performance.md, "The slowest twins, second round").

:func:`keep_heap` tells glibc, through ``mallopt``, to serve them from the heap
and keep what was freed there:

* ``M_MMAP_THRESHOLD`` 1 GB, or as high as glibc takes (older ones refuse values
  above half their arena size, 32 MiB on 64-bit: larger blocks are still mmapped);
* ``M_TRIM_THRESHOLD`` 2 GiB (the heap's top is never trimmed in practice);
* ``M_TOP_PAD`` 100 MB (the heap grows in large steps: fewer ``brk`` calls).

The price: a process that scores on the CPU lane keeps its peak heap (the
largest frame's working set, per worker thread's arena) until it exits.  The
daemon's ``cpu_keep_heap = false`` and the environment variable
``VMAFX_CPU_KEEP_HEAP=0`` turn it off (docs/operations.md).

Settings the results cannot see: only where memory comes from changes, not a
value computed from it.  On a C library without ``mallopt`` (musl, macOS) this
does nothing and says so only in the debug log.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

__all__ = ["ENV_VAR", "keep_heap", "keep_heap_wanted"]

log = logging.getLogger("vmafxd.lanes.cpu_alloc")

#: set to 0 / false / no / off to leave glibc's defaults alone
ENV_VAR = "VMAFX_CPU_KEEP_HEAP"

# glibc's <malloc.h> parameter numbers
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

#: mallopt takes an int: the largest, 2 GiB (the top of the heap is never trimmed in practice)
_TRIM_THRESHOLD = 2**31 - 1
_TOP_PAD = 100_000_000
#: tried in order: older glibc refuses a threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit)
_MMAP_THRESHOLDS = (1_000_000_000, 32 * 1024 * 1024, 16 * 1024 * 1024)

_lock = threading.Lock()
_applied: dict[str, int] | None = None


def keep_heap_wanted(enabled: bool = True) -> bool:
    """Whether :func:`keep_heap` applies: ``enabled`` (the daemon's ``cpu_keep_heap``) and
    the environment variable not saying 0/false/no/off -- either one turns it off."""
    v = os.environ.get(ENV_VAR, "").strip().lower()
    return bool(enabled) and v not in ("0", "false", "no", "off")


def _mallopt():
    if os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    # musl exports a mallopt that does nothing and returns 0; glibc's says 1 for a taken value
    if not hasattr(libc, "gnu_get_libc_version"):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def keep_heap(enabled: bool = True) -> dict[str, int] | None:
    """Apply the settings once a process (later calls return the first result).

    Returns what was set ({"mmap_threshold": ..., "trim_threshold": ..., "top_pad": ...}),
    or None when it was turned off or the C library is not glibc.
    """
    global _applied
    if not keep_heap_wanted(enabled):
        return None
    with _lock:
        if _applied is not None:
            return _applied
        mallopt = _mallopt()
        if mallopt is None:
            log.debug("no glibc mallopt here: the allocator's defaults stay")
            return None
        done: dict[str, int] = {}
        for value in _MMAP_THRESHOLDS:
            if mallopt(_M_MMAP_THRESHOLD, value) == 1:
                done["mmap_threshold"] = value
                break
        if mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1:
            done["trim_threshold"] = _TRIM_THRESHOLD
        if mallopt(_M_TOP_PAD, _TOP_PAD) == 1:
            done["top_pad"] = _TOP_PAD
        log.debug("allocator: keeping the heap (%s)", done)
        _applied = done
        return done
