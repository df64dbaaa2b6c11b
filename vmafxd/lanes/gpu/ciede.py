"""CIEDE2000 on the GPU (``ciede.cu``): per-pixel differences and an exact
fixed-point sum on the device; the host finishes with the CPU twin's arithmetic.

One launch per batch (a block a row, all frames).  The kernel leaves,
per frame, the sum of the pixels' float differences in units of 2^-32 (exact
integers), a histogram of the lowest set bit and the count of pixels it could
not trust (a transcendental function's double too close to a float rounding
midpoint for the device's libm; see the kernel's header), and for the batch
one list of those pixels with the samples they used.  The host copies back the
records and the list's head in one copy (the list's rest, copied only when the
head did not hold it, is rare: about a dozen pixels a 1080p frame on real
content) and redoes the listed pixels of every frame of the batch at once with
the C library's functions
(:func:`~vmafxd.features._ciede_color.ciede2000_libm`, equal element for
element to the CPU twin's scalar transcription) and adds them exactly.

libvmaf adds the floats into a double one by one in raster order.  That
sequential sum equals the exact sum whenever every partial sum is a double:
all terms are multiples of 2^L and the total is below 2^(L + 53).  When that
holds (practically always) the exact sum *is* libvmaf's double; otherwise
(or when the list overflowed, or a difference has bits below 2^-32) the frame
takes the slow path: its per-pixel floats and samples, kept on the device
until then, come back and the host adds them in raster order as the CPU twin
does.  Either way ``metrics_from_stats`` gives the CPU lane's double.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import numpy as np

from vmafx.formats import Subsampling

from ...features import ciede as cpu
from ...features._ciede_color import ciede2000_libm
from ...core.picture import Picture
from ...features.declaration import check_bitdepth, check_chroma
from .engine import GpuFeature
from .launch import I32, I64, U64

__all__ = ["make", "GpuCiede", "lab8_table", "LAB8_BYTES", "LAB_TABLE_ENV"]

_THREADS = 256
_TYPES = [U64] * 6 + [I32] * 4 + [I64] * 3 + [I32, I32, U64, U64, U64, U64, U64, U64, I32]
_MODES = {Subsampling.S444: 0, Subsampling.S420: 1, Subsampling.S422: 2}
# keep in step with ciede.cu
_REC_WORDS, _REC_SUM, _REC_FINE, _REC_DOUBT, _REC_LOW = 16, 0, 1, 2, 3
_LIST_WORDS = 8  # pixel index, the six samples, the frame
_LIST_FRAME = 7
#: listed pixels a frame copied back with the records (the rest only when needed), at
#: least; frames of more than 2^21 pixels copy one for every 8,192 pixels (GpuCiede.head)
_HEAD = 256
_UNIT = 32  # the sum's unit is 2^-32
_GAMMA_TABLE_MAX_BITS = 10
#: vx_ciede_lab8's table: 2^24 entries of four floats; its build's grid (a grid-stride loop)
LAB8_BYTES = (1 << 24) * 16
_LAB8_BLOCKS = 4096
#: vx_ciede_seqsum's threads a block (a block a frame: ciede.cu's CIEDE_SUM_THREADS)
_SEQ_THREADS = 1024
#: VMAFXD_CIEDE_LAB_TABLE: "1" always, "0" never, else (the default) on parallel devices only
LAB_TABLE_ENV = "VMAFXD_CIEDE_LAB_TABLE"


def lab_table_wanted(runtime) -> bool:
    """Whether 8-bit pictures read their L*a*b* from the device's table: on a device whose
    launches run in parallel (a one-off build of milliseconds), not on the emulator (seconds,
    more than it saves on a short clip), unless ``VMAFXD_CIEDE_LAB_TABLE`` says otherwise."""
    choice = os.environ.get(LAB_TABLE_ENV, "")
    if choice in ("0", "1"):
        return choice == "1"
    return bool(runtime.parallel_launches)


def build_gamma(kernels, bitdepth: int, stream) -> int:
    """A new red/blue gamma table for ``bitdepth`` (device memory), its build enqueued on ``stream``."""
    pairs = 1 << (2 * bitdepth)
    ptr = kernels.device.alloc(2 * pairs * 8)
    build = kernels.launcher("ciede.cu", "vx_ciede_gamma", [U64, I32])
    build(((pairs + _THREADS - 1) // _THREADS,), (_THREADS,), stream, ptr, bitdepth)
    return ptr


def _build_lab8(kernels, table: int, stream) -> None:
    """``vx_ciede_lab8`` into ``table``, from an 8-bit gamma table freed once it has been read."""
    gamma = build_gamma(kernels, 8, stream)
    try:
        build = kernels.launcher("ciede.cu", "vx_ciede_lab8", [U64, U64])
        build((_LAB8_BLOCKS,), (_THREADS,), stream, table, gamma)
        stream.synchronize()
    finally:
        kernels.device.free(gamma)


def lab8_table(kernels, stream) -> int:
    """The device's L*a*b* table of every 8-bit sample triple (``vx_ciede_lab8``): built at the
    first call (on ``stream``, waited for), shared by the device's sessions, freed with ``kernels``."""
    return kernels.device_table("ciede_lab8", LAB8_BYTES, partial(_build_lab8, kernels), stream)


@dataclass
class _Listed:
    """A batch's listed pixels redone (``GpuCiede._redo_listed``): per frame whether every
    doubtful pixel was listed, and its redone floats, ``values[starts[i]:ends[i]]``, in
    raster order, at the pixels ``index[starts[i]:ends[i]]``."""

    complete: list[bool]
    starts: list[int]
    ends: list[int]
    values: np.ndarray
    index: np.ndarray


class GpuCiede(GpuFeature):
    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, cpu.DECLARATION)
        stg = scorer.staging
        check_chroma("ciede", len(stg.shapes))
        check_bitdepth("ciede", stg.bitdepth, cpu.SUPPORTED_BITDEPTHS)
        self.width, self.height = stg.shapes[0]
        cw, ch = stg.shapes[1]
        self.mode = _MODES[stg.subsampling]
        self.upsample = cpu.ChromaUpsampler(stg.subsampling, self.width, self.height, (ch, cw))
        pixels = self.width * self.height
        #: listed doubtful pixels per frame of a batch (about one in 100,000 is doubtful)
        self.capacity = max(1024, pixels // 256)
        #: the fixed-point sum cannot overflow 63 bits (each difference is below 2^40 units)
        self.exact_sum = pixels < (1 << 23)
        self.stats_bytes = 0  # the results come back through the twin's own copies
        self.stats_offset = 0
        #: 8-bit pictures on a parallel device: the L*a*b* of every sample triple, one table a
        #: device (``vx_ciede_lab8``, 256 MiB, built once); 0: converted a pixel
        self._lab8 = 0
        #: the red and blue gamma expansions of every sample pair (8- and 10-bit: 1 and 16 MiB),
        #: built once on the stream before any batch (``vx_ciede_gamma``); 0: computed a pixel
        self._gamma = 0
        if stg.bitdepth == 8 and lab_table_wanted(scorer.kernels.runtime):
            self._lab8 = lab8_table(scorer.kernels, scorer.stream)
        elif stg.bitdepth <= _GAMMA_TABLE_MAX_BITS:
            self._gamma = self.own(build_gamma(scorer.kernels, stg.bitdepth, scorer.stream))
        kernel = "vx_ciede_u8_lab" if self._lab8 else "vx_ciede_u8" if stg.elem == 1 else "vx_ciede_u16"
        self._launch = scorer.kernels.launcher("ciede.cu", kernel, _TYPES)
        self._scatter = scorer.kernels.launcher("ciede.cu", "vx_ciede_scatter", [U64, U64, U64, I64])
        self._seqsum = scorer.kernels.launcher("ciede.cu", "vx_ciede_seqsum", [U64, I64, U64, U64, I32])
        self._host_bytes = scorer.max_batch * (_REC_WORDS * 8 + self.head * _LIST_WORDS * 4) + 8
        self._free: list[np.ndarray] = []
        self._pending: dict[int, tuple] = {}
        self.slow_frames = 0  # frames that took the slow path (for tests and curiosity)

    @property
    def head(self) -> int:
        """Listed pixels a frame copied back with the records: 256, one for every 8,192
        pixels in larger frames (a 4K frame lists more than 256, and the rest's copy
        waits for the stream), never more than the list holds (the copy reads no further)."""
        return min(self.capacity, max(_HEAD, self.width * self.height // 8192))

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int) -> None:
        dev, st, stg = self.scorer.device, self.scorer.stream, self.scorer.staging
        w, h = self.width, self.height
        cw, ch = stg.shapes[1]
        diffs = dev.alloc_async(n * w * h * 4, st)
        kept = dev.alloc_async(n * stg.frame_bytes, st)  # the samples, for the slow path
        dev.copy_dtod_async(kept, staging, n * stg.frame_bytes, st)
        rec_bytes = n * _REC_WORDS * 8 + 8  # the records, then the batch's list count
        rec = dev.alloc_async(rec_bytes + n * self.capacity * _LIST_WORDS * 4, st)
        dev.memset_async(rec, 0, rec_bytes, st)
        ptrs = [stg.plane_ptr(staging, 0, role, p) for role in (0, 1) for p in range(3)]
        # a block a row: its threads step along it, so a block's fixed work (the atan
        # table's copy, the record's reductions and atomics) is once a row, not once
        # every 256 pixels
        self._launch((1, h, n), (_THREADS,), st, *ptrs, w, h, cw, ch,
                     stg.pitches[0], stg.pitches[1], stg.frame_stride_elems, self.mode, stg.bitdepth, self._gamma,
                     self._lab8, diffs, rec, rec + rec_bytes - 8, rec + rec_bytes, n * self.capacity)
        host = self._free.pop() if self._free else dev.alloc_host(self._host_bytes)
        dev.copy_dtoh_async(host, rec, rec_bytes + n * self.head * _LIST_WORDS * 4, st)
        self._pending[first_seq] = (diffs, kept, rec, host, n)

    # -- results -----------------------------------------------------------------------
    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        diffs, kept, rec, host, n = self._pending.pop(first_seq)
        dev, st = self.scorer.device, self.scorer.stream
        w, h = self.width, self.height
        try:
            rec_bytes = n * _REC_WORDS * 8 + 8
            recs = host[: rec_bytes - 8].view(np.int64).reshape(n, _REC_WORDS)
            entries = self._entries(host, rec, rec_bytes, n)
            redone, listed = self._redo_listed(recs[:count], entries)
            totals = [self._exact_total(recs[i], redone[i]) if self.exact_sum and redone[i] is not None else None
                      for i in range(count)]
            slow = [i for i in range(count) if totals[i] is None]
            self.slow_frames += len(slow)
            # frames whose doubtful pixels were all listed: libvmaf's sequential sum on the
            # device; the others (the list ran out of room: rare) on the host
            on_device = [i for i in slow if listed.complete[i]]
            for i, total in zip(on_device, self._sequential_totals(diffs, on_device, listed)):
                totals[i] = total
            for i in slow:
                if totals[i] is None:
                    totals[i] = self._slow_total(diffs, kept, i)
            return [(first_seq + i, cpu.metrics_from_stats(totals[i], w, h)) for i in range(count)]
        finally:
            dev.free_async(diffs, st)
            dev.free_async(kept, st)
            dev.free_async(rec, st)
            self._free.append(host)

    def _sequential_totals(self, diffs: int, frames: list[int], listed: "_Listed") -> list[float]:
        """libvmaf's raster-order double sums of ``frames``' floats, added on the device
        (``vx_ciede_seqsum``: a block a frame), the listed pixels' redone floats put in
        place of their markers first (``vx_ciede_scatter``)."""
        if not frames:
            return []
        dev, st = self.scorer.device, self.scorer.stream
        k, pixels = len(frames), self.width * self.height
        parts = [(listed.starts[i], listed.ends[i]) for i in frames]
        values = np.concatenate([listed.values[a:b] for a, b in parts]).astype(np.float32)
        targets = np.concatenate([np.asarray(listed.index[a:b], np.int64) + i * pixels
                                  for i, (a, b) in zip(frames, parts)])
        m = len(values)
        # one upload: the frames (i64), the targets (i64), the values (f32); the sums after
        words = np.concatenate((np.asarray(frames, np.int64), targets))
        nbytes = words.nbytes + (values.nbytes + 7) // 8 * 8
        up = dev.alloc_host(nbytes + k * 8)
        buf = dev.alloc_async(nbytes + k * 8, st)
        try:
            up[:words.nbytes] = words.view(np.uint8)
            up[words.nbytes:words.nbytes + values.nbytes] = values.view(np.uint8)
            dev.copy_htod_async(buf, up, nbytes, st)
            sums = buf + nbytes
            if m:
                self._scatter((min((m + 255) // 256, 1024),), (256,), st, diffs, buf + 8 * k, buf + words.nbytes, m)
            self._seqsum((k,), (_SEQ_THREADS,), st, diffs, pixels, buf, sums, k)
            dev.copy_dtoh_async(up[nbytes:], sums, k * 8, st)
            st.synchronize()
            return up[nbytes:nbytes + k * 8].view(np.float64).tolist()
        finally:
            dev.free_async(buf, st)
            st.synchronize()
            dev.free_host(up)

    def _entries(self, host: np.ndarray, rec: int, rec_bytes: int, n: int) -> np.ndarray:
        """The batch's listed pixels, (m, 8) int32: the head copied with the records, the
        rest (when the head did not hold them: rare) copied now."""
        listed = min(int(host[rec_bytes - 8: rec_bytes].view(np.int64)[0]), n * self.capacity)
        head = n * self.head
        entries = host[rec_bytes: rec_bytes + head * _LIST_WORDS * 4].view(np.int32).reshape(head, _LIST_WORDS)
        if listed <= head:
            return entries[:listed]
        dev, st = self.scorer.device, self.scorer.stream
        word = _LIST_WORDS * 4
        rest = dev.alloc_host((listed - head) * word)
        try:
            dev.copy_dtoh_async(rest, rec + rec_bytes + head * word, (listed - head) * word, st)
            st.synchronize()
            return np.concatenate([entries, rest.view(np.int32).reshape(-1, _LIST_WORDS)])
        finally:
            dev.free_host(rest)

    def _redo_listed(self, recs: np.ndarray, entries: np.ndarray) -> tuple[list[tuple[int, int] | None], "_Listed"]:
        """The listed pixels of the batch's frames, redone with the C library in one call.

        ``entries``: the batch's list (rows of ``_LIST_WORDS`` int32, any order; word
        ``_LIST_FRAME`` the frame).  Per frame: the sum of their differences in units of
        2^-32 (exact) and the lowest set bit among them (as a power of two; 64 when
        none), or None for a frame that cannot take the fast path (a device difference
        below 2^-32, pixels the list had no room for, or a redone difference off the
        2^-32 grid or >= 2^8).  Also the redone floats themselves, frame by frame in
        raster order, for the sequential sum (:class:`_Listed`).
        """
        n = len(recs)
        frames = entries[:, _LIST_FRAME]
        entries = entries[frames < n]
        frames = entries[:, _LIST_FRAME]
        counts = np.bincount(frames, minlength=n)[:n]
        # every doubtful pixel of the frame listed (the list may have run out of room)
        complete = counts == recs[:, _REC_DOUBT]
        fast = (recs[:, _REC_FINE] == 0) & complete
        ends = np.cumsum(counts)
        listed = _Listed(complete.tolist(), (ends - counts).tolist(), ends.tolist(), np.zeros(0, np.float32),
                         np.zeros(0, np.int64))
        if not len(entries):
            return [(0, 64) if ok else None for ok in fast.tolist()], listed
        order = np.lexsort((entries[:, 0], frames))  # by frame, then raster order
        frames = frames[order]
        listed.values = ciede2000_libm(entries[order, 1:7], self.scorer.staging.bitdepth)
        listed.index = entries[order, 0].astype(np.int64)
        de = listed.values.astype(np.float64)
        units = de * 2.0**_UNIT  # exact: a power-of-two scaling
        off_grid = (units != np.floor(units)) | ~(units < 2.0**40)  # (NaN too)
        v = np.where(off_grid, 0.0, units).astype(np.int64)
        # each one's lowest set bit: v & -v is a power of two 2^k, frexp gives k + 1
        bits = np.where(v > 0, np.frexp((v & -v).astype(np.float64))[1] - 1, 64 + _UNIT)
        # a frame's sum is below 2^63 (2^40 each, below 2^23 pixels); the running sum may wrap
        # past 2^63 over a batch, but differences of wrapped int64 sums are exact
        partial = np.concatenate(([0], np.cumsum(v)))
        sums = partial[ends] - partial[ends - counts]
        lowest = np.full(n, 64 + _UNIT)
        np.minimum.at(lowest, frames, bits)
        bad = np.bincount(frames, weights=off_grid, minlength=n) > 0
        return [(s, b - _UNIT) if ok and not x else None
                for ok, x, s, b in zip(fast.tolist(), bad.tolist(), sums.tolist(), lowest.tolist())], listed

    def _exact_total(self, rec: np.ndarray, listed: tuple[int, int]) -> float | None:
        """libvmaf's double sum from the exact one and the listed pixels' (``_redo_listed``),
        or None when they may differ."""
        hist = rec[_REC_LOW:_REC_LOW + 13].tolist()
        low = next((k - _UNIT for k, c in enumerate(hist) if c), 64)  # 12 stands for "2^-20 or above"
        total = int(rec[_REC_SUM]) + listed[0]
        low = min(low, listed[1])
        if total == 0:
            return 0.0
        top = total.bit_length() - 1 - _UNIT  # the sum is in [2^top, 2^(top + 1))
        if low < top - 52:
            return None  # a partial sum may have rounded: the sequential sum is needed
        return total / 2**_UNIT

    def _slow_total(self, diffs: int, kept: int, frame: int) -> float:
        """The frame's per-pixel floats and samples from the device, summed as the CPU twin sums."""
        dev, st, stg = self.scorer.device, self.scorer.stream, self.scorer.staging
        w, h = self.width, self.height
        de_host = dev.alloc_host(w * h * 4)
        samples = dev.alloc_host(stg.frame_bytes)
        try:
            dev.copy_dtoh_async(de_host, diffs + frame * w * h * 4, w * h * 4, st)
            dev.copy_dtoh_async(samples, kept + frame * stg.frame_bytes, stg.frame_bytes, st)
            st.synchronize()
            de = de_host.view(np.float32).reshape(h, w).copy()
            redo = np.nonzero(de < 0)
            if redo[0].size:
                self._redo(de, redo, samples)
            return cpu.compute_stats(de)
        finally:
            dev.free_host(de_host)
            dev.free_host(samples)

    def _picture(self, samples: np.ndarray, role: int) -> Picture:
        stg = self.scorer.staging
        dtype = np.uint8 if stg.elem == 1 else np.dtype("<u2")
        planes = []
        for p, (w, h) in enumerate(stg.shapes):
            start = role * stg.role_bytes + stg.offsets[p]
            rows = samples[start:start + stg.pitches[p] * stg.elem * h].view(dtype).reshape(h, stg.pitches[p])
            planes.append(rows[:, :w])
        return Picture(tuple(planes), stg.bitdepth, stg.subsampling)

    def _redo(self, de: np.ndarray, where, samples: np.ndarray) -> None:
        """The doubtful pixels with the C library, as the CPU twin does them."""
        bd = self.scorer.staging.bitdepth
        ref, dist = self._picture(samples, 0), self._picture(samples, 1)
        ru, rv = self.upsample(ref)
        du, dv = self.upsample(dist)
        ry, dy = ref.planes[0], dist.planes[0]
        samples = np.stack([a[where] for a in (ry, ru, rv, dy, du, dv)], axis=1)
        de[where] = ciede2000_libm(samples, bd)

    def close(self) -> None:
        super().close()
        dev, st = self.scorer.device, self.scorer.stream
        for diffs, kept, rec, host, _ in self._pending.values():
            dev.free_async(diffs, st)
            dev.free_async(kept, st)
            dev.free_async(rec, st)
            self._free.append(host)
        self._pending.clear()
        for host in self._free:
            dev.free_host(host)
        self._free.clear()


def make(instance, scorer) -> GpuCiede:
    return GpuCiede(instance, scorer)
