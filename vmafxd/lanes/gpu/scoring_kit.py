"""What scoring two files on a device needs besides the frames, made once and kept for reuse.

A :class:`ScoringKit` is one device's runtime and device, its kernels' modules (loaded at
their first use), a stream, and the slots: page-locked host batches with their device
twins.  ``vmafxctl score --in-process`` makes one for its one scoring and closes it
after (vmafxd/lanes/gpu/in_process.py).  A daemon scores file after file: building a kit
costs it per job what a process start costs the command (on the H200 about 0.12 s of
module loads and 0.4 ms a MiB of pinning, 0.1 s for four 64 MiB slots), so it keeps one a
device in a :class:`KitPool` between jobs (vmafxd/file_jobs.py) and frees it after a
while unused.

One owner at a time: a kit is taken for one job and given back after it; :meth:`ScoringKit.close`
is idempotent and makes the device current on the calling thread first.
"""

from __future__ import annotations

import logging
import threading
import time

from .device_start import SLOT_BYTES, take_device
from .engine import KernelSet

__all__ = ["KitPool", "ScoringKit", "SLOTS"]

log = logging.getLogger("vmafxd.lanes.gpu")

#: batches of host memory circulating: the readers fill one while others are uploaded and scored
SLOTS = 4


class ScoringKit:
    """One device's means of scoring files (the module says what it holds).

    ``min_slot_bytes``: the least a slot is pinned at.  0 (in-process): exactly a batch's
    bytes, pinned when the scoring asks; a daemon's kits pin ``SLOT_BYTES`` so that the next
    job's batch, whatever its geometry, fits the slots already pinned."""

    def __init__(self, lane: str, ordinal: int = 0, *, slots: int = SLOTS, min_slot_bytes: int = 0):
        self.lane, self.ordinal = lane, ordinal
        self.runtime, self.device, first = take_device(lane, ordinal)
        self.min_slot_bytes = min_slot_bytes
        #: per slot: pinned host memory (numpy uint8) or None; (device pointer, bytes) or None
        self.hosts: list = [None] * slots
        self.devs: list = [None] * slots
        #: the pinned memory the device's start made ahead (device_start.py), for slot 0 if it fits
        self._first = first
        self.kernels = KernelSet(self.runtime, self.device)
        self._stream = None
        self._lock = threading.Lock()  # the pinner thread fills hosts beside the scoring thread
        self.closed = False
        #: time.monotonic() of its last use (the pool frees kits unused for long)
        self.used = time.monotonic()

    @property
    def slots(self) -> int:
        return len(self.hosts)

    def stream(self):
        """The kit's stream (made at its first use, on the device made current)."""
        if self._stream is None:
            self._stream = self.device.create_stream()
        return self._stream

    def has_host(self, k: int, nbytes: int) -> bool:
        h = self.hosts[k]
        return h is not None and h.nbytes >= nbytes

    def host(self, k: int, nbytes: int):
        """Slot ``k``'s page-locked memory, at least ``nbytes`` (pinned now when it has none as large)."""
        with self._lock:
            h = self.hosts[k]
            if h is not None and h.nbytes >= nbytes:
                return h
            first = self._first
            if first is not None and first.nbytes >= max(nbytes, self.min_slot_bytes):
                self._first = None
                new = first
            else:
                new = None
        if new is None:
            new = self.device.alloc_host(max(nbytes, self.min_slot_bytes))
        with self._lock:
            old, self.hosts[k] = self.hosts[k], new
        if old is not None:
            self.device.free_host(old)
        return new

    def dev(self, k: int, nbytes: int) -> int:
        """Slot ``k``'s device memory, at least ``nbytes``."""
        d = self.devs[k]
        if d is not None and d[1] >= nbytes:
            return d[0]
        if d is not None:
            self.devs[k] = None
            self.device.free(d[0])
        size = max(nbytes, self.min_slot_bytes)
        self.devs[k] = (self.device.alloc(size), size)
        return self.devs[k][0]

    def close(self) -> None:
        """Free everything it holds (the device made current on this thread first); idempotent.
        Every free is tried, also after one failed (a device gone bad); the first error is raised."""
        if self.closed:
            return
        self.closed = True
        dev = self.device
        errors: list[BaseException] = []

        def attempt(fn, *args) -> None:
            try:
                fn(*args)
            except Exception as e:  # the rest is still freed
                errors.append(e)

        attempt(dev.make_current)
        stream, self._stream = self._stream, None
        if stream is not None:
            attempt(stream.synchronize)
            attempt(stream.close)
        devs, self.devs = self.devs, [None] * len(self.devs)
        for d in devs:
            if d is not None:
                attempt(dev.free, d[0])
        with self._lock:
            hosts, self.hosts = [h for h in self.hosts if h is not None], [None] * len(self.hosts)
            if self._first is not None:
                hosts.append(self._first)
                self._first = None
        for h in hosts:
            attempt(dev.free_host, h)
        attempt(self.kernels.close)
        if errors:
            raise errors[0]


class KitPool:
    """A daemon's kits between file jobs: at most one a device kept, freed after ``keep_s`` unused.

    :meth:`take` gives a kept kit of the device or makes one (a device's second job at once
    gets a kit of its own); :meth:`give` keeps it, or closes it when the device already has
    one kept, when ``keep`` is false (a job that failed on the device) or when ``keep_s`` is 0."""

    def __init__(self, lane: str, keep_s: float):
        self.lane, self.keep_s = lane, keep_s
        self._kept: dict[int, ScoringKit] = {}
        self._lock = threading.Lock()
        #: kits made (a job that found one kept made none)
        self.made = 0
        self.closed = False

    @property
    def kept(self) -> int:
        """Devices with a kit kept now."""
        return len(self._kept)

    def take(self, ordinal: int) -> ScoringKit:
        """A kit of device ``ordinal`` for one job (raises RuntimeUnavailable when the lane cannot run)."""
        with self._lock:
            kit = self._kept.pop(ordinal, None)
        if kit is not None:
            return kit
        kit = ScoringKit(self.lane, ordinal, min_slot_bytes=SLOT_BYTES)
        with self._lock:
            self.made += 1
        return kit

    def give(self, kit: ScoringKit, keep: bool = True) -> None:
        """A job's kit back (on the job's thread)."""
        kit.used = time.monotonic()
        with self._lock:
            if keep and not self.closed and self.keep_s > 0 and not kit.closed and kit.ordinal not in self._kept:
                self._kept[kit.ordinal] = kit
                return
        _close(kit)

    def expire(self, now: float | None = None) -> int:
        """Close the kits unused for ``keep_s`` or more (on a thread that may wait on the device);
        returns how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            old = [o for o, kit in self._kept.items() if now - kit.used >= self.keep_s]
            kits = [self._kept.pop(o) for o in old]
        for kit in kits:
            _close(kit)
        return len(kits)

    def close(self) -> None:
        """Close every kept kit; kits given back later are closed at once.  Idempotent."""
        with self._lock:
            self.closed = True
            kits, self._kept = list(self._kept.values()), {}
        for kit in kits:
            _close(kit)


def _close(kit: ScoringKit) -> None:
    """A kit the pool lets go of, closed; a failure is logged (the daemon goes on)."""
    try:
        kit.close()
    except Exception as e:
        log.warning("device %d: freeing a file-scoring kit failed: %s", kit.ordinal, e)
