"""Scoring batches of frames on one device: the GPU lane's engine.

One :class:`GpuScorer` per session.  It never synchronises per frame: a
batch of frames is enqueued on the device's library stream (R1) as

1. waits on the frames' device acquire fences (producer IPC events);
2. one gather/convert launch that copies every plane of every frame into
   planar staging memory taken from the stream's pool (R7: one allocation
   per batch, the staging and the features' scratch, :class:`_BatchPlan`) —
   after it the producer's buffers are no longer read, so ``copied`` (an
   event recorded right here) is the batch's *release point*;
3. each feature's kernels over the whole batch (one launch per kernel and
   scale, the frame in ``blockIdx.z``), writing exact integer (or float)
   partial statistics into one per-frame record;
4. one device-to-host copy of the records into pinned memory and the
   ``done`` event.

The host later (when ``done`` has completed, queried, never waited on in the
scoring path) turns each feature's statistics into metrics with the *same*
``metrics_from_stats`` function its CPU twin uses, so the integer features
come out bit for bit as on the CPU lane, and feeds the lane-independent
:class:`~vmafxd.core.scoring.FrameAssembler` (models, pooling).

Frames are numbered densely here (0, 1, 2 ... in submission order); the
session maps them back to the producer's indices.
"""

from __future__ import annotations

import importlib
import struct
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from vmafx.formats import PixelFormat, Subsampling, scoring_planes

from ...core.scoring import FrameAssembler, PlanError, ScoringPlan
from ...features.declaration import per_frame
from ..native.host_math import install_soon
from .batch_graphs import BatchGraphs
from .launch import I32, U64, Launcher

__all__ = ["FrameSource", "GpuFrame", "HostUploads", "packed_layout", "Staging", "Batch", "GpuScorer", "KernelSet", "GpuUnsupported", "twin_modules",
           "rows_of", "job_table"]

def twin_modules() -> dict[str, str]:
    """Feature name -> its GPU twin's module under vmafxd.lanes.gpu (``make(instance, scorer)``),
    from the feature declarations (``FeatureDeclaration.gpu``): the one registry."""
    from ...features import all_declarations

    return {d.name: d.gpu for d in all_declarations() if d.gpu}


class GpuUnsupported(PlanError):
    """A feature or format the GPU lane does not run (``field`` names it): a plan it cannot run."""


class GpuFeature:
    """What every feature's GPU half shares.

    Its plan ``instance`` and ``scorer``; ``values``, the instance's options
    over the declaration's defaults; the device memory it owns (:meth:`own`),
    freed by :meth:`close`; and :meth:`flush`, nothing held back at the end (a
    feature that holds frames back, motion, gives them there: :meth:`temporal`).
    """

    def __init__(self, instance, scorer, declaration):
        self.instance = instance
        self.scorer = scorer
        self.values = declaration.with_defaults(instance.values)
        self._owned: list[int] = []
        self._rule_push = self._rule_flush = None

    def own(self, ptr: int) -> int:
        """``ptr``, device memory of the scorer's device, to be freed by :meth:`close`."""
        self._owned.append(ptr)
        return ptr

    def temporal(self, push, flush) -> None:
        """A temporal feature's half: the kernels give each frame's score, and the CPU twin's own
        rule makes the metrics (``push(seq, score)``: the frames it makes final; ``flush()``: those
        it still holds at the end), so the first/last-frame rules cannot drift between lanes."""
        self._rule_push, self._rule_flush = push, flush

    def push_scores(self, first_seq: int, scores) -> list:
        """Frames ``first_seq``, ``first_seq + 1`` ...'s ``scores`` through the rule, in order."""
        out = []
        for seq, score in enumerate(scores, first_seq):
            out.extend(self._rule_push(seq, score))
        return out

    def flush(self):
        return self._rule_flush() if self._rule_flush is not None else []

    def graph_key(self, n: int, first_seq: int) -> tuple | None:
        """What this feature's work for a batch of ``n`` frames from ``first_seq`` depends on
        besides ``n`` and the scorer's addresses (a tuple; ``()``: nothing), or None when it
        cannot go into a graph (batch_graphs.py).  A feature that gives a key promises that
        its ``enqueue`` only enqueues stream work (kernels, copies, memsets: no allocation,
        no wait, no host state changed), the same work for the same key: a graph replays it
        without calling ``enqueue``."""
        return None

    def columns(self, stats: np.ndarray, first_seq: int, count: int) -> tuple[int, dict[str, np.ndarray]] | None:
        """A batch's metrics as columns: (the first frame's seq, base metric name -> float64 array
        over consecutive frames from it); None for a twin that gives one dict per frame
        (:meth:`metrics` alone).  A twin that has it defines ``metrics`` as ``rows_of(columns)``."""
        return None

    def close(self) -> None:
        """Free the owned device memory, in the order it was owned; a second call does nothing."""
        owned, self._owned = self._owned, []
        for ptr in owned:
            self.scorer.device.free(ptr)


def rows_of(columns: tuple[int, dict[str, np.ndarray]]) -> list:
    """:meth:`GpuFeature.columns`' result as ``metrics()`` gives it: (seq, {name: float}) per frame."""
    first, cols = columns
    return list(enumerate(per_frame(cols), first)) if cols else []


class KernelSet:
    """The compiled modules of one device, loaded once and shared by its sessions, and the
    read-only tables its kernels build once a device (:meth:`device_table`)."""

    def __init__(self, runtime, device, options: Sequence[str] | None = None):
        from . import kernels

        self.runtime = runtime
        self.device = device
        self._options = tuple(runtime.compile_options if options is None else options)
        self._modules: dict[str, Any] = {}
        self._launchers: dict[tuple, Launcher] = {}
        self._tables: dict[Any, int] = {}
        self._tables_lock = threading.Lock()
        self._kernels = kernels

    def device_table(self, key: Any, nbytes: int, build: Callable[[int, Any], None], stream) -> int:
        """Device memory of ``nbytes`` that ``build(ptr, stream)`` fills (a launch on ``stream``),
        made at the first call for ``key`` and shared by every later caller until :meth:`close`.

        The first call waits for the build to finish, so another session's stream, which
        has no order with ``stream``, reads a finished table.  A build that fails frees
        the memory and raises; the next call tries again.
        """
        with self._tables_lock:
            ptr = self._tables.get(key)
            if ptr is None:
                ptr = self.device.alloc(nbytes)
                try:
                    build(ptr, stream)
                    stream.synchronize()
                except BaseException:
                    self.device.free(ptr)
                    raise
                self._tables[key] = ptr
            return ptr

    def module(self, source: str):
        m = self._modules.get(source)
        if m is None:
            if not self.runtime.caches_binaries:
                # e.g. the emulator's "binary" is a library path in its own directory
                image = self.runtime.compile(self._kernels.source(source), source, self.device.info.arch,
                                             [*self._kernels.COMMON_OPTIONS, *self._options])
            else:
                image = self._kernels.compile_cached(
                    source, self.device.info.arch, self.runtime.compiler_version(), self.runtime.compile,
                    self._options)
            m = self._modules[source] = self.device.load_module(image)
        return m

    def launcher(self, source: str, name: str, types: Sequence[np.dtype], *, shared: int = 0) -> Launcher:
        """A launcher per (kernel, caller): each owns its argument record."""
        fn = self.module(source).function(name)
        return Launcher(self.device, fn, types, shared=shared)

    def close(self) -> None:
        """The modules unloaded and the tables freed; a second call does nothing."""
        modules, self._modules = list(self._modules.values()), {}
        with self._tables_lock:
            tables, self._tables = list(self._tables.values()), {}
        self._launchers.clear()
        for m in modules:
            m.close()
        for ptr in tables:
            self.device.free(ptr)


@dataclass(frozen=True)
class FrameSource:
    """A frame's buffer on the device: base pointer, format and stored-plane layout."""

    ptr: int
    pixel_format: PixelFormat
    #: (offset, pitch) in bytes per stored plane
    planes: tuple[tuple[int, int], ...]


@dataclass
class GpuFrame:
    ref: FrameSource
    dist: FrameSource
    #: device events to wait on before reading (producer acquire fences)
    waits: list = field(default_factory=list)


def packed_layout(planes: Sequence[np.ndarray]) -> tuple[tuple[tuple[int, int], ...], int]:
    """A :class:`FrameSource` layout (offset, pitch per plane) of C-contiguous ``planes`` packed
    one after another, and the bytes of them all."""
    layout, off = [], 0
    for x in planes:
        layout.append((off, x.strides[0]))
        off += x.nbytes
    return tuple(layout), off


class HostUploads:
    """Pictures in host memory copied to device memory as :class:`FrameSource` s, planes packed
    one after another: how the engine's checks, tests and benchmarks feed it without a daemon.
    ``close()`` (or leaving the with-block) waits for the stream and frees every copy."""

    def __init__(self, device, stream):
        self.device, self.stream = device, stream
        self._held: list[tuple[int, np.ndarray]] = []

    def source(self, planes: Sequence[np.ndarray], pixel_format: PixelFormat) -> FrameSource:
        planes = [np.ascontiguousarray(x) for x in planes]
        layout, off = packed_layout(planes)
        dev = self.device
        host = dev.alloc_host(off)
        for x, (o, _) in zip(planes, layout):
            host[o:o + x.nbytes] = x.view(np.uint8).ravel()
        ptr = dev.alloc(off)
        self._held.append((ptr, host))
        dev.copy_htod_async(ptr, host, off, self.stream)
        return FrameSource(ptr, pixel_format, layout)

    def close(self) -> None:
        if self._held:
            self.stream.synchronize()
        while self._held:
            ptr, host = self._held.pop()
            self.device.free(ptr)
            self.device.free_host(host)

    def __enter__(self) -> "HostUploads":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class Staging:
    """Planar staging layout of one frame (ref planes, then dist planes)."""

    width: int
    height: int
    bitdepth: int
    subsampling: Subsampling
    elem: int  # bytes per sample
    #: per plane (w, h)
    shapes: tuple[tuple[int, int], ...]
    #: per plane pitch in elements
    pitches: tuple[int, ...]
    #: per plane byte offset within a role
    offsets: tuple[int, ...]
    role_bytes: int
    frame_bytes: int

    @classmethod
    def build(cls, width: int, height: int, bitdepth: int, subsampling: Subsampling) -> "Staging":
        elem = 1 if bitdepth == 8 else 2
        shapes = tuple(scoring_planes(subsampling, width, height))
        pitches, offsets, off = [], [], 0
        for w, h in shapes:
            pitch = (w * elem + 255) // 256 * 256 // elem
            pitches.append(pitch)
            offsets.append(off)
            off += pitch * elem * h
        role = (off + 255) // 256 * 256
        return cls(width, height, bitdepth, subsampling, elem, shapes, tuple(pitches), tuple(offsets), role, 2 * role)

    def plane_ptr(self, base: int, frame: int, role: int, plane: int) -> int:
        return base + frame * self.frame_bytes + role * self.role_bytes + self.offsets[plane]

    @property
    def frame_stride_elems(self) -> int:
        return self.frame_bytes // self.elem


_KIND_PLANAR8, _KIND_PLANAR16, _KIND_NV12_U, _KIND_NV12_V, _KIND_P010_Y, _KIND_P010_U, _KIND_P010_V = range(7)


def convert_jobs(src: FrameSource, staging: Staging, dst_base: int, frame: int, role: int) -> list[list[int]]:
    """The gather/convert jobs that copy one frame's stored planes into staging."""
    fmt = src.pixel_format
    jobs = []
    for p, (w, h) in enumerate(staging.shapes):
        dst = staging.plane_ptr(dst_base, frame, role, p)
        if fmt.semi_planar:
            off, pitch = src.planes[0 if p == 0 else 1]
            if fmt is PixelFormat.NV12:
                kind = _KIND_PLANAR8 if p == 0 else (_KIND_NV12_U if p == 1 else _KIND_NV12_V)
            else:
                kind = _KIND_P010_Y if p == 0 else (_KIND_P010_U if p == 1 else _KIND_P010_V)
        else:
            off, pitch = src.planes[p]
            kind = _KIND_PLANAR8 if staging.elem == 1 else _KIND_PLANAR16
        jobs.append([src.ptr + off, pitch, kind, w, h, dst, staging.pitches[p], 0])
    return jobs


def job_table(frames: Sequence["GpuFrame"], staging: Staging, dst_base: int, templates: dict,
              out: np.ndarray | None = None) -> np.ndarray:
    """uint64[jobs, 8]: every frame's :func:`convert_jobs`, ref then dist, frame by frame, as one
    table built in whole-array operations (into ``out``, uint64, when given: the pinned slot).

    A source's jobs depend on its pointer, its layout and where it lands in
    staging.  The layout's part is made once per (format, planes) and kept in
    ``templates`` (the layout's jobs at pointer 0 into staging at 0), as are
    the places in staging per batch size (the k-th source: frame ``k // 2``,
    role ``k % 2``, as ``plane_ptr``), and, for a batch of one layout, the
    two added per batch size; the rest is two columns added here: the
    sources' pointers, and ``dst_base``.
    """
    srcs = [s for f in frames for s in (f.ref, f.dist)]
    keys = [(s.pixel_format, s.planes) for s in srcs]
    uniform = keys.count(keys[0]) == len(keys)
    if uniform and out is not None and len(srcs) <= _FEW_SOURCES:
        return _few(srcs, keys[0], staging, dst_base, templates, out)
    if uniform:  # one layout (the usual case): its batch-size table
        template = _uniform(keys[0], len(srcs), staging, templates)
    else:
        template = np.stack([_template(k, staging, templates) for k in keys])
        template[:, :, 5] += _places(len(srcs), staging, templates)
    count, per, words = template.shape
    if out is None:
        table = np.empty(template.shape, dtype=np.uint64)
    else:
        table = out[:count * per * words].reshape(template.shape)
    table[:] = template
    table[:, :, 0] += np.array([s.ptr for s in srcs], dtype=np.uint64)[:, None]
    table[:, :, 5] += np.uint64(dst_base)
    return table.reshape(-1, 8)


#: a batch of at most this many sources of one layout (two frames) is written by :func:`_few`
_FEW_SOURCES = 4


def _few(srcs: list, key: tuple, staging: Staging, dst_base: int, templates: dict, out: np.ndarray) -> np.ndarray:
    """:func:`job_table` of a few sources of one layout into ``out``, on Python ints (the same
    sums: pointer + offset, staging base + place) and one ``struct`` store: a third of the
    array operations' cost for one frame."""
    got = templates.get(("few", key, len(srcs)))
    if got is None:
        table = _uniform(key, len(srcs), staging, templates)
        got = templates[("few", key, len(srcs))] = (table.reshape(-1).tolist(), table.shape[1],
                                                    struct.Struct(f"={table.size}Q"))
    words, per, pack = got
    words = words.copy()
    i = 0
    for s in srcs:
        for _ in range(per):  # the source's jobs: its pointer into word 0, the batch's base into word 5
            words[i] += s.ptr
            words[i + 5] += dst_base
            i += 8
    pack.pack_into(out, 0, *words)
    return out[:len(words)].reshape(-1, 8)


def _places(count: int, staging: Staging, templates: dict) -> np.ndarray:
    """uint64[count, 1]: the k-th source's offset in staging, ``k // 2`` frames and ``k % 2`` roles in."""
    got = templates.get(count)
    if got is None:
        k = np.arange(count, dtype=np.uint64)
        got = templates[count] = ((k // np.uint64(2)) * np.uint64(staging.frame_bytes)
                                  + (k % np.uint64(2)) * np.uint64(staging.role_bytes))[:, None]
    return got


def _uniform(key: tuple, count: int, staging: Staging, templates: dict) -> np.ndarray:
    """uint64[count, jobs, 8]: ``count`` sources of one layout into staging at 0, pointers 0."""
    got = templates.get((key, count))
    if got is None:
        got = np.repeat(_template(key, staging, templates)[None], count, axis=0)
        got[:, :, 5] += _places(count, staging, templates)
        templates[(key, count)] = got
    return got


def _template(key: tuple, staging: Staging, templates: dict) -> np.ndarray:
    t = templates.get(key)
    if t is None:
        t = np.asarray(convert_jobs(FrameSource(0, *key), staging, 0, 0, 0), dtype=np.uint64)
        if len(templates) >= 80:  # a session sees one or two layouts (and batch sizes); bound it
            templates.clear()
        templates[key] = t
    return t


@dataclass
class Batch:
    first_seq: int
    count: int
    copied: Any  # event: the release point of the batch's buffers
    done: Any  # event: statistics are in host memory (the slot's, recorded again by its next batch)
    stats: np.ndarray  # (count, stats_bytes) view of pinned memory
    slot: int


class _HostSlot:
    """What one batch in flight holds while it is: pinned memory for the job table and the
    statistics records, and the ``done`` event (recorded again by each batch that takes the slot:
    a slot is taken again only after its last batch completed)."""

    def __init__(self, device, max_batch: int, stats_bytes: int, max_jobs: int):
        self.jobs = device.alloc_host(max_jobs * 64)
        self.jobs64 = self.jobs.view(np.uint64)
        self.stats = device.alloc_host(max(8, max_batch * stats_bytes))
        self.done = device.create_event()
        self.busy = False
        self._stats_bytes = stats_bytes
        self._views: dict[int, np.ndarray] = {}

    def stats_of(self, n: int) -> np.ndarray:
        """(n, stats_bytes) view of the records (one per batch size, kept)."""
        v = self._views.get(n)
        if v is None:
            v = self._views[n] = self.stats[: n * self._stats_bytes].reshape(n, self._stats_bytes)
        return v

    def free(self, device) -> None:
        self.done.close()
        device.free_host(self.jobs)
        device.free_host(self.stats)


class _BatchPlan:
    """What every batch of ``n`` frames shares: its device memory's layout and the gather launch.

    A batch's device memory is ONE allocation from the stream's pool (R7):
    the staging of its ``n`` frames, then the scratch of every feature with
    per-batch scratch (``scratch_bytes(n)``).  Called one after another on
    the stream, the features share one region, as large as the largest need:
    each one's scratch is dead before the next one's kernels start (the pool
    gave them the same memory too when each allocated its own).  Where the
    batches go through graphs, the features run side by side (batch_graphs.py's
    branches), so each gets a region of its own (``branches``).
    """

    def __init__(self, scorer: "GpuScorer", n: int, branches: bool):
        stg = scorer.staging
        self.scratch = n * stg.frame_bytes  # staging's frame_bytes is a multiple of 256
        self.branches = branches
        #: per twin: its scratch's byte offset from the batch's start (None: it takes none)
        self.offsets: list[int | None] = []
        end = top = self.scratch
        for twin, takes in zip(scorer.twins, scorer._scratch):
            if not takes:
                self.offsets.append(None)
                continue
            need = (twin.scratch_bytes(n) + 255) // 256 * 256
            at = end if branches else self.scratch  # apart, or all at the one shared region
            self.offsets.append(at)
            end = top = max(top, at + need)
        self.nbytes = top
        self.jobs = n * 2 * len(stg.shapes)  # one per plane of each source (convert_jobs)
        rows_per_block = 4
        self.convert = scorer._convert.prepare(((stg.height + rows_per_block - 1) // rows_per_block, self.jobs),
                                               (256,), (scorer._jobs_dev, self.jobs))


class GpuScorer:
    """Scores one session's frames on one device, batch by batch."""

    def __init__(self, device, kernels: KernelSet, stream, plan: ScoringPlan, width: int, height: int,
                 bitdepth: int, subsampling: Subsampling, *, max_batch: int = 32, slots: int = 3,
                 keep_frames: bool = True):
        install_soon()  # the SVM's exp and ADM's powf loops compiled (the same bits), once a process
        self.device = device
        self.kernels = kernels
        self.stream = stream
        self.plan = plan
        # a plan whose features all read luma alone stages luma alone: the gather copies a third
        # less of a 4:2:0 frame (two thirds of a 4:4:4 one) and nothing reads the chroma
        self.staging = Staging.build(width, height, bitdepth, Subsampling.S400 if plan.luma_only else subsampling)
        self.max_batch = max_batch
        self.assembler = FrameAssembler(plan, keep_frames=keep_frames)  # (a daemon session keeps none)
        self.aggregate: dict[str, float] = {}
        self.twins = []
        offset = 0
        for inst in plan.instances:
            mod_name = inst.decl.gpu
            if mod_name is None:
                raise GpuUnsupported(f"feature.{inst.decl.name}", "has no GPU kernel")
            mod = importlib.import_module(f"{__package__}.{mod_name}")
            twin = mod.make(inst, self)
            twin.stats_offset = offset
            offset += (twin.stats_bytes + 7) // 8 * 8
            self.twins.append(twin)
        #: per twin: base metric name -> output name (the plan's names, once per session)
        self._names = [twin.instance.names for twin in self.twins]
        #: per twin: whether every output name is its base name (no option suffix): then a batch's
        #: values whose names are all the plan's go to the assembler as they are
        self._plain = [all(k == v for k, v in names.items()) for names in self._names]
        #: per twin: its columns() (GpuFeature's), or None for one that gives dicts alone (cambi)
        self._columns = [getattr(twin, "columns", None) for twin in self.twins]
        self.stats_bytes = max(8, offset)
        self._stats_dev = device.alloc(self.stats_bytes * max_batch)
        self._jobs_dev = device.alloc(max_batch * 2 * 3 * 64)
        self._convert = kernels.launcher("convert.cu", "vx_convert", [U64, I32])
        self._slots = [_HostSlot(device, max_batch, self.stats_bytes, max_batch * 2 * 3) for _ in range(slots)]
        self._next_seq = 0
        self._inflight: list[Batch] = []
        #: (pixel format, planes) -> that layout's convert jobs at pointer 0 (:func:`job_table`)
        self._templates: dict[tuple, np.ndarray] = {}
        #: batch size -> its _BatchPlan (made at its first batch)
        self._plans: dict[int, _BatchPlan] = {}
        #: per twin: whether it takes a share of the batch's scratch (``scratch_bytes``)
        self._scratch = [hasattr(twin, "scratch_bytes") for twin in self.twins]
        #: the batches' feature work as graphs, where the device and every twin allow it
        self.graphs = BatchGraphs(device, keys=slots * max_batch + 16)  # (+ motion's leading batches)

    # -- submission --------------------------------------------------------------
    def can_enqueue(self) -> bool:
        return any(not s.busy for s in self._slots)

    def enqueue(self, frames: Sequence[GpuFrame]) -> Batch:
        """Enqueue a batch; returns at once (nothing here waits on the device)."""
        n = len(frames)
        if not 0 < n <= self.max_batch:
            raise ValueError(f"a batch holds 1..{self.max_batch} frames, got {n}")
        slot_i = next(i for i, s in enumerate(self._slots) if not s.busy)
        slot = self._slots[slot_i]
        plan = self._plan(n)
        dev, st = self.device, self.stream
        first_seq = self._next_seq
        key = self._graph_key(n, first_seq, slot_i)
        for f in frames:
            for ev in f.waits:
                st.wait_event(ev)
        # the batch's device memory: staging, then the features' scratch (_BatchPlan); the
        # graphs' one block, or a block from the pool for this batch alone
        staging = (self.graphs.block(plan.nbytes, self._full_batch_bytes(), st) if key is not None
                   else dev.alloc_async(plan.nbytes, st))
        slot.busy = True
        table = job_table(frames, self.staging, staging, self._templates, out=slot.jobs64)
        dev.copy_htod_async(self._jobs_dev, slot.jobs, table.nbytes, st)
        plan.convert(st, 0)
        copied = dev.create_event()
        copied.record(st)

        def features(stream, branches: bool = False) -> None:
            self._enqueue_features(stream, staging, plan, n, first_seq, slot, branches)

        if key is None or not self.graphs.run(key, st, partial(features, branches=plan.branches)):
            features(st)
        if key is None:
            dev.free_async(staging, st)
        slot.done.record(st)
        st.submit()  # R9: make sure the work is submitted, not just queued
        self._next_seq += n
        batch = Batch(first_seq, n, copied, slot.done, slot.stats_of(n), slot_i)
        self._inflight.append(batch)
        return batch

    def _plan(self, n: int) -> _BatchPlan:
        """The batches of ``n`` frames' plan (made at the first): features side by side where
        graphs are on and more than one feature has work."""
        plan = self._plans.get(n)
        if plan is None:
            plan = self._plans[n] = _BatchPlan(self, n, self.graphs.on and len(self.twins) > 1)
        return plan

    def _full_batch_bytes(self) -> int:
        """A batch of ``max_batch`` frames' device memory (its _BatchPlan's)."""
        return self._plan(self.max_batch).nbytes

    def _graph_key(self, n: int, first_seq: int, slot: int) -> tuple | None:
        """The graph key of a batch (batch_graphs.py), or None: graphs off, or a twin without one."""
        if not self.graphs.on:
            return None
        keys = []
        for twin in self.twins:
            graph_key = getattr(twin, "graph_key", None)  # a twin not built on GpuFeature has none
            k = graph_key(n, first_seq) if graph_key is not None else None
            if k is None:
                return None
            keys.append(k)
        return (n, slot, *keys)

    def _enqueue_features(self, stream, staging: int, plan: "_BatchPlan", n: int, first_seq: int,
                          slot: "_HostSlot", branches: bool = False) -> None:
        """A batch's work after its gather, on ``stream`` (the library stream, or the capture
        stream while a graph of it is made: the twins enqueue on ``self.stream``).  With
        ``branches`` (a capture, the plan's scratch laid out apart), each twin enqueues on a
        branch of its own (batch_graphs.py)."""
        dev, library = self.device, self.stream
        self.stream = stream
        try:
            nbytes = n * self.stats_bytes
            dev.memset_async(self._stats_dev, 0, nbytes, stream)
            streams = self.graphs.fork(stream, len(self.twins)) if branches else [stream] * len(self.twins)
            for twin, at, twin_stream in zip(self.twins, plan.offsets, streams):
                self.stream = twin_stream
                if at is not None:
                    twin.enqueue(staging, n, first_seq, self._stats_dev, self.stats_bytes, staging + at)
                else:
                    twin.enqueue(staging, n, first_seq, self._stats_dev, self.stats_bytes)
            self.stream = stream
            if branches:
                self.graphs.join(stream, streams)
            dev.copy_dtoh_async(slot.stats, self._stats_dev, nbytes, stream)
        finally:
            self.stream = library

    # -- completion ----------------------------------------------------------------
    def complete(self, batch: Batch) -> list[tuple[int, dict[str, float]]]:
        """Metrics of a batch whose ``done`` event has completed; returns frames now final."""
        if not batch.done.query():
            raise RuntimeError("batch completed before its done event")
        for twin, names, columns, plain in zip(self.twins, self._names, self._columns, self._plain):
            got = columns(batch.stats, batch.first_seq, batch.count) if columns is not None else None
            if got is not None:  # the batch's values as arrays, handed over whole
                first, cols = got
                if not (plain and cols.keys() <= names.keys()):
                    cols = {names[k]: v for k, v in cols.items() if k in names}
                self.assembler.add_columns(first, cols)
                continue
            for seq, metrics in twin.metrics(batch.stats, batch.first_seq, batch.count):
                if not (plain and metrics.keys() <= names.keys()):
                    metrics = {names[k]: v for k, v in metrics.items() if k in names}
                self.assembler.add(seq, metrics)
        finals = self.assembler.pushed(batch.first_seq + batch.count - 1)
        self._slots[batch.slot].busy = False
        self._inflight.remove(batch)
        return finals

    def finish(self) -> list[tuple[int, dict[str, float]]]:
        """After the last batch completed: flush temporal features, final frames."""
        for twin, names in zip(self.twins, self._names):
            for seq, metrics in twin.flush():
                self.assembler.add(seq, {names[k]: v for k, v in metrics.items() if k in names})
            agg = getattr(twin, "aggregate", None)
            if agg is not None:
                self.aggregate.update(agg())
        return self.assembler.finish()

    def close(self) -> None:
        """Free the session's device state (the stream must have passed its batches)."""
        self._inflight = []  # an aborted session's batches were never completed
        for twin in self.twins:
            twin.close()
        self.graphs.close(self.stream)
        self.device.free(self._stats_dev)
        self.device.free(self._jobs_dev)
        for s in self._slots:
            s.free(self.device)
        self._slots = []
