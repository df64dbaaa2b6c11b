"""The reader side of in-process file scoring: page-locked slots filled with frame pairs.

:class:`BatchFiller` is the thread that reads two inputs into the slots that
vmafxd/lanes/gpu/in_process.py uploads and scores; :class:`SlotPinner` pins the slots after
the first while the first batches are read and scored.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from vmafx.io.input import PARALLEL_READ_BYTES, pack_planes, read_pair
from vmafx.io.parallel_read import ParallelPairReads, read_mapped

__all__ = ["BatchFiller", "SlotPinner"]


def _read_into(reader, dst: memoryview) -> bool:
    """The reader's next frame, packed plane after plane, into ``dst``; False at its end."""
    into = getattr(reader, "read_frame_into", None)
    if into is not None:
        return into(dst)
    planes = reader.read_frame()  # a reader of planes only (the --scale path)
    if planes is None:
        return False
    pack_planes(planes, dst)
    return True


class BatchFiller:
    """The reader thread: fills free slots' page-locked memory with frame pairs.

    Reading is most of what the command does (the kernels take a fraction of a
    millisecond a 1080p frame), so it runs beside the scoring thread.  Regular y4m and raw
    files are read by position on ``threads`` threads at once (:mod:`vmafx.io.parallel_read`:
    ``preadv`` releases the GIL, so the copies out of the page cache run on several cores
    while the scoring thread uploads, launches and completes batches); every free slot's
    reads are started at once, so the threads read the next slot while the last frames of
    this one come in, and slots are handed over in the files' order.  Other inputs, a
    frame given back, and the first pair that is not a plain whole frame in either file (the
    end, a truncated frame, a ``FRAME`` line with parameters) are read one pair at a time as
    before, so a file ends or fails exactly as it did; from 1 MiB a frame the distorted frame
    is then read on a second thread while this one reads the reference.  A frame read past
    the other input's end is given back (``pushback``), as the CPU lane does."""

    def __init__(self, reference, distorted, fs: int, batch: int, max_frames: int | None, unpack,
                 threads: int = 1, read_bytes: int | None = None):
        self.rr, self.dr = reference, distorted
        self.fs, self.batch, self.left = fs, batch, max_frames
        #: of each frame read by position, only its first bytes (the luma plane: nothing reads chroma)
        self.read_bytes = read_bytes
        self.unpack = unpack
        self.free: queue.SimpleQueue = queue.SimpleQueue()  # slot (memoryview) or None: stop
        self.ready: queue.SimpleQueue = queue.SimpleQueue()  # (slot, count, last) or an exception
        self._helper = ThreadPoolExecutor(1, "vmafx-read-dist") if fs >= PARALLEL_READ_BYTES else None
        positional = all(getattr(r, "frames_at", None) is not None for r in (reference, distorted))
        self._parallel = ParallelPairReads(threads) if threads > 1 and positional else None
        self._mapped = read_mapped() if self._parallel is not None else False
        self._thread = threading.Thread(target=self._run, name="vmafx-read", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.free.put(None)
        self._thread.join()
        if self._helper is not None:
            self._helper.shutdown(wait=True)
        if self._parallel is not None:
            self._parallel.close()

    def _pair(self, host: memoryview, i: int) -> bool:
        fs = self.fs
        ref, dist = host[2 * i * fs:(2 * i + 1) * fs], host[(2 * i + 1) * fs:(2 * i + 2) * fs]
        a, b = read_pair(lambda: _read_into(self.rr, ref), lambda: _read_into(self.dr, dist), self._helper)
        if b and not a and hasattr(self.dr, "pushback"):  # the reference ended first
            self.dr.pushback(self.unpack(dist))
        if a and not b and hasattr(self.rr, "pushback"):  # the distorted ended first
            self.rr.pushback(self.unpack(ref))
        return a and b

    def _run(self) -> None:
        try:
            if self._parallel is not None and self._by_position():
                return
            while True:
                slot = self.free.get()
                if slot is None or self._fill(slot, 0):
                    return
        except BaseException as e:  # reported in the scoring thread
            self.ready.put(e)

    def _fill(self, slot, count: int, *, after_position: bool = False) -> bool:
        """Pairs ``count``.. of ``slot`` read one by one, the slot handed over; True at the end.

        ``after_position``: pair ``count`` is the first the position reads did not take; when
        it turns out whole all the same (a ``FRAME`` line with parameters, after which the
        offsets do not hold) the rest of the inputs is read one by one."""
        last = False
        while count < self.batch:
            if self.left is not None and self.left <= 0:
                last = True
                break
            if not self._pair(slot[1], count):
                last = True
                break
            if after_position:
                after_position = False
                self._parallel.close()
                self._parallel = None
            count += 1
            if self.left is not None:
                self.left -= 1
        self.ready.put((slot, count, last))
        return last

    def _by_position(self) -> bool:
        """Slots filled by position reads while the inputs' frames are plain: each free slot's
        pairs are started at once (the threads read the next slot while this one's last frames
        are read), and slots are handed over in order.  True when the inputs ended (or the
        command stopped) here; False when the rest is to be read one by one."""
        ra, da = self.rr.frames_at(mapped=self._mapped), self.dr.frames_at(mapped=self._mapped)
        if ra is None or da is None:
            for at in (ra, da):
                if at is not None:
                    at.close()
            return False
        inflight: deque = deque()  # (slot, first pair, pairs, PairReads)
        planned = 0
        try:
            while True:
                slot = False  # no slot to start (one is waited for only when nothing is under way)
                if self.left is None or self.left > 0:
                    try:
                        slot = self.free.get() if not inflight else self.free.get_nowait()
                    except queue.Empty:
                        pass
                if slot is None:  # stop
                    return True
                if slot is False and not inflight:  # max_frames 0: nothing to read
                    slot = self.free.get()
                    if slot is not None:
                        self.ready.put((slot, 0, True))
                    return True
                if slot is not False:
                    want = self.batch if self.left is None else min(self.batch, self.left)
                    reads = self._parallel.start(ra, da, slot[1], self.fs, want, planned, self.read_bytes)
                    inflight.append((slot, planned, want, reads))
                    planned += want
                    if self.left is not None:
                        self.left -= want
                    continue
                slot, first, want, reads = inflight.popleft()
                got = reads.result()
                if got == want:
                    last = self.left == 0 and not inflight  # max_frames reached
                    if last:
                        ra.advance(planned)
                        da.advance(planned)
                    self.ready.put((slot, got, last))
                    if last:
                        return True
                    continue
                # pair first + got is not plain: what was started after it is past it
                for later, _first, w, r in inflight:
                    r.wait()
                    self.free.put(later)
                    if self.left is not None:
                        self.left += w
                inflight.clear()
                if self.left is not None:
                    self.left += want - got
                ra.advance(first + got)
                da.advance(first + got)
                return self._fill(slot, got, after_position=True)
        finally:
            for _slot, _first, _w, r in inflight:  # an error or a stop: no read writes on after it
                r.wait()
            ra.close()
            da.close()


class SlotPinner:
    """Pins the slots ``todo`` (``pin(k)``: slot k's page-locked memory) on a thread of its own
    and hands each to the reader as it is ready, so that only the first slot's pinning is paid
    before the first frame."""

    def __init__(self, dev, todo: list[int], pin, free: queue.SimpleQueue):
        self._dev, self._todo, self._pin, self._free = dev, todo, pin, free
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vmafx-pin", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._dev.make_current()
            for k in self._todo:
                if self._stopping.is_set():
                    return
                self._free.put((k, memoryview(self._pin(k))))
        except BaseException:  # fewer slots circulate; the scoring goes on with those there are
            pass

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
