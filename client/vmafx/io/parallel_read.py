"""Frame pairs of two files read by several threads at once, in order, into one buffer.

One thread reading a y4m pair frame by frame is the ceiling of a file scorer whose
kernels are fast (about 1,060 frames/s at 1080p on the H200, where ``cat`` of the same
files reads 1,030 pairs a second and the engine scores 7,000): a thread copies out of the
page cache at one core's speed.  Regular uncompressed y4m and raw files have fixed-size
frames once their header is read (:class:`vmafx.io.video.FramesAt`), so frame ``i`` of
each file is at a known offset and a small pool of threads can ``preadv`` different
frames at once; the read syscall holds no GIL, so the copies run on as many cores.

The pool only ever reads *plain* frames (``FRAME\\n`` and the frame's bytes, whole).  The
first pair that is not plain in either file ends a call: the caller reads it the
sequential way, which ends at the end of a file, raises the same error on a truncated
frame and parses a ``FRAME`` line with parameters, exactly as before.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

__all__ = ["ParallelPairReads", "PairReads", "read_threads", "read_mapped", "READ_THREADS_ENV", "READ_MMAP_ENV"]

#: the environment variable that sets how many threads read the files (1: one, sequentially)
READ_THREADS_ENV = "VMAFX_READ_THREADS"
#: the environment variable that has the threads copy frames out of a mapping of each file
#: (1) rather than ``preadv`` them (0, the default): see :class:`vmafx.io.video.FramesAt`
READ_MMAP_ENV = "VMAFX_READ_MMAP"


def read_mapped() -> bool:
    """$VMAFX_READ_MMAP: 1 copies frames out of a mapping, 0 (or unset) reads with ``preadv``."""
    env = os.environ.get(READ_MMAP_ENV, "").strip()
    if env not in ("", "0", "1"):
        raise ValueError(f"${READ_MMAP_ENV}: expected 0 or 1, got {env!r}")
    return env == "1"


def read_threads(asked: int | None = None) -> int:
    """Threads to read with: ``asked``, else $VMAFX_READ_THREADS, else min(8, CPU count).

    Eight: past the memory bandwidth one socket's page-cache copies reach, more threads only
    queue (scripts/bench_files.py measures the rates by thread count)."""
    if asked is None:
        env = os.environ.get(READ_THREADS_ENV, "").strip()
        if env:
            try:
                asked = int(env)
            except ValueError:
                raise ValueError(f"${READ_THREADS_ENV}: expected a whole number of threads, got {env!r}") from None
        else:
            asked = min(8, os.cpu_count() or 1)
    if asked < 1:
        raise ValueError(f"read threads: expected at least 1, got {asked}")
    return asked


class ParallelPairReads:
    """A pool of ``threads`` reading frame pairs of two :class:`~vmafx.io.input.InputFramesAt`
    into a buffer laid out (reference 0, distorted 0, reference 1, ...), each ``frame_size`` bytes.

    :meth:`read` splits a call's reads into contiguous runs of about a MiB, at least one a
    thread, and returns when all are done."""

    def __init__(self, threads: int):
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, "vmafx-read-at")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def read(self, ref, dist, host: memoryview, frame_size: int, count: int) -> int:
        """Read up to ``count`` pairs (pair ``i``: frame ``i`` of each, from where its reader
        stands); the number of leading pairs read whole, ``count`` when all were.  Does not
        move the readers (``advance`` them by what was taken).  A read that failed within those
        pairs or at the first pair not taken raises its :class:`InputError`, the reference's
        first: what the sequential reader would have met first."""
        return self.start(ref, dist, host, frame_size, count).result()

    def start(self, ref, dist, host: memoryview, frame_size: int, count: int, first: int = 0,
              read_bytes: int | None = None) -> "PairReads":
        """:meth:`read` of pairs ``first``.. ``first + count - 1`` into ``host``, under way: its
        :meth:`PairReads.result` is :meth:`read`'s answer (counted from ``first``).  Calls for
        later pairs may be started before an earlier one's result is asked for, so the threads
        read the next slot's frames while the last of this one's are read.  ``read_bytes``: of
        each frame only its first bytes are read (the luma plane; the frame still checked whole)."""
        jobs = 2 * count
        # one contiguous run a thread: a run's hop costs tens of microseconds, a 576x324
        # frame's read about as much.  The runs of one call end unevenly (20 1080p reads on 8
        # threads: 2 or 3 each), which calls started for the next slots meanwhile fill in.
        runs = min(jobs, self.threads)
        bounds = [(jobs * k // runs, jobs * (k + 1) // runs) for k in range(runs)]
        return PairReads(jobs, [self._pool.submit(self._run, ref, dist, host, frame_size, first, a, b, read_bytes)
                                for a, b in bounds])

    @staticmethod
    def _run(ref, dist, host: memoryview, fs: int, first: int, a: int, b: int, nbytes: int | None = None):
        """Jobs ``a``..``b``-1 (job ``j``: pair ``first + j // 2``, the distorted when odd); the
        first that is not a whole plain frame (with its error, if it raised), or (None, None)."""
        for j in range(a, b):
            at = dist if j & 1 else ref
            try:
                if not at.read(first + (j >> 1), host[j * fs:(j + 1) * fs], nbytes):
                    return j, None
            except BaseException as e:  # handed to the caller's thread, which raises it
                return j, e
        return None, None


class PairReads:
    """One :meth:`ParallelPairReads.start` under way."""

    def __init__(self, jobs: int, futures: list):
        self._jobs, self._futures = jobs, futures

    def result(self) -> int:
        """The leading pairs read whole (all asked, or fewer: see :meth:`ParallelPairReads.read`)."""
        first, error = self._jobs, None
        for fut in self._futures:  # every run is waited for: they write into the caller's buffer
            j, e = fut.result()
            if j is not None and j < first:
                first, error = j, e
        if error is not None:
            raise error
        return first // 2

    def wait(self) -> None:
        """Until every read is over, whatever it met (reads past an end that came first)."""
        for fut in self._futures:
            fut.result()
