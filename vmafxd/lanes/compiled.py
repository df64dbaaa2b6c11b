"""The compiled CPU engine: the GPU kernels built for the host, behind the CPU twins' interface.

The emulated GPU runtime (:mod:`.emulated`) compiles every kernel source with the
host C++ compiler and runs a launch's blocks in one C loop, one thread a block.
The GPU engine over it (:class:`~.gpu.engine.GpuScorer`) scores frames exactly
as the numpy twins do -- the emu tests in tests/lanes prove it cell by cell --
and, for some features, 1.2-3x faster on one core (others' kernels lose to
their twins; docs/performance.md).  :class:`CompiledScorer` gives
it :class:`~vmafxd.core.scoring.CpuScorer`'s interface (``push`` a picture pair,
``finish``, ``pooled``, ``aggregate``), so the CPU lane and ``vmafxctl score``
can run it in place of the twins; the twins stay the reference.

One scorer belongs to one thread at a time (a session is pinned to a worker);
launches of several scorers run at once (the emulator keeps no lock: a block's
shared memory is its call's stack, ``blockIdx`` is ``thread_local``).  The kernels are compiled
once a process, at the first scorer, and shared by all.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from vmafx.formats import PixelFormat, Subsampling

from .native import available  # a host C++ compiler is found: the compiled engine can run here
from .runtime import RuntimeUnavailable

__all__ = ["AUTO_FEATURES", "CompiledScorer", "ENGINES", "available", "make_cpu_scorer", "resolve_engine"]

log = logging.getLogger("vmafxd.lanes.compiled")

#: the CPU lane's engines: "numpy" (the twins), "compiled" (every feature with a kernel
#: compiled), "auto" (when a host C++ compiler is found: the features with a native kernel
#: on it, those in AUTO_FEATURES compiled, the rest -- and everything without a compiler --
#: on the numpy twins)
ENGINES = ("auto", "compiled", "numpy")

#: the features whose compiled kernels beat their numpy twins at 576x324 and at 1080p on
#: one core (scripts/bench_compiled_cpu.py; docs/performance.md, "The compiled engine" and
#: "Every feature's CPU lane against libvmaf's C").  The others' kernels are shaped for
#: thousands of GPU threads (a tile and its halo per block, an index divided per sample) and
#: lose to the vectorised twins on a CPU at one size or both: motion, vif, psnr; cambi and
#: float_psnr win at one size only (cambi and motion run their native kernels instead, and so
#: do adm, vif and psnr: vmafxd/lanes/native; vif and psnr at 0.6-0.9 of libvmaf's
#: single-threaded C, docs/performance.md).  float_motion's and float_vif's kernels joined
#: once their row walks and folded decimations made them win at both sizes (1.4x / 2.4x and
#: 1.4x / 1.4x the twins).
AUTO_FEATURES = frozenset({
    "adm", "ciede", "float_adm", "float_ansnr", "float_moment", "float_motion", "float_ms_ssim", "float_ssim",
    "float_vif", "psnr_hvs",
    # the SpEED pair runs its native kernel in auto (vmafxd/lanes/native/speed.cpp: faster than these and libvmaf)
    "speed_chroma", "speed_temporal",
})

#: the planar format a Picture's planes are stored in, by subsampling
_PLANAR = {
    Subsampling.S420: PixelFormat.YUV420P,
    Subsampling.S422: PixelFormat.YUV422P,
    Subsampling.S444: PixelFormat.YUV444P,
    Subsampling.S400: PixelFormat.YUV400P,
}

_shared_lock = threading.Lock()
_shared: tuple | None = None  # (runtime, device, KernelSet)
_fallback_said = False


def _kernels():
    """The process's emulated device and its kernel set (made once, shared by every scorer)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            from . import emulated
            from .gpu.engine import KernelSet

            rt = emulated.load()
            dev = rt.device(0)
            _shared = (rt, dev, KernelSet(rt, dev))
        return _shared


def resolve_engine(engine: str) -> str:
    """``auto`` -> ``compiled`` when available, else ``numpy`` (said once in the log);
    ``compiled`` without a compiler raises :class:`RuntimeUnavailable`."""
    global _fallback_said
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "numpy":
        return engine
    if available():
        return "compiled"
    if engine == "compiled":
        raise RuntimeUnavailable("compiled", "no host C++ compiler (g++) to build the kernels")
    if not _fallback_said:
        _fallback_said = True
        log.info("cpu engine: no host C++ compiler found, scoring with the numpy twins")
    return "numpy"


def make_cpu_scorer(plan, width: int, height: int, bitdepth: int, subsampling: Subsampling, engine: str = "auto",
                    keep_frames: bool = True):
    """The CPU lane's scorer of ``plan`` for ``engine`` (see ENGINES): a :class:`CompiledScorer`,
    or the twins' ``CpuScorer`` when nothing of the plan is to run compiled.  With ``auto``, the
    features with a native kernel (:mod:`.native`) run it, those in AUTO_FEATURES the compiled
    GPU kernels, the rest their twins; a build that fails is said once in the log and the twins
    score instead.  A plan the kernels do not take (GpuUnsupported: e.g. CAMBI's heatmaps) is
    the twins' with either (with ``auto``, a native kernel still runs its feature).  ``keep_frames``:
    the scorer's assembler's (False for a daemon's session, which keeps no frames)."""
    from ..core.scoring import CpuScorer
    from .errors import CompileError
    from .gpu.engine import GpuUnsupported

    global _fallback_said
    chosen = resolve_engine(engine)
    alternative = None
    features = None  # every feature with a kernel ("compiled")
    if chosen != "numpy":
        from .native.host_math import install_soon

        install_soon()  # the SVM's exp and the powf loops compiled (the same bits)
    if engine != "compiled" and chosen != "numpy":
        from . import native

        alternative = native.extractor
        features = AUTO_FEATURES - native.NATIVE_FEATURES.keys()
    if chosen == "numpy" or not any(features is None or i.decl.name in features for i in plan.instances):
        return CpuScorer(plan, width, height, bitdepth, alternative, keep_frames=keep_frames)
    try:
        return CompiledScorer(plan, width, height, bitdepth, subsampling, features=features, alternative=alternative,
                              keep_frames=keep_frames)
    except GpuUnsupported as e:
        log.info("cpu engine: %s (%s): this session on the numpy twins", e.field, e)
        return CpuScorer(plan, width, height, bitdepth, alternative, keep_frames=keep_frames)
    except (CompileError, RuntimeUnavailable, OSError) as e:  # OSError: a library that cannot be loaded
        if engine == "compiled":
            raise
        if not _fallback_said:
            _fallback_said = True
            log.warning("cpu engine: the compiled kernels cannot be built (%s); scoring with the numpy twins", e)
        return CpuScorer(plan, width, height, bitdepth, alternative, keep_frames=keep_frames)


class CompiledScorer:
    """``CpuScorer(plan, width, height, bitdepth)``'s interface over the compiled kernels.

    ``features``: the features to run compiled (None: every one with a kernel); the
    plan's other instances run on their numpy twins (or ``alternative``'s extractors: see
    CpuScorer), in the same scorer.  Each part
    has its own assembler over its own instances; the frames each makes final go
    into this scorer's assembler, which predicts the models once a frame is final
    here (a part's lag is at most the plan's, so a part has given a frame before
    this assembler finalises it)."""

    def __init__(self, plan, width: int, height: int, bitdepth: int, subsampling: Subsampling = Subsampling.S420,
                 features=None, alternative=None, keep_frames: bool = True):
        from ..core.scoring import CpuScorer, FrameAssembler, ScoringPlan
        from .gpu.engine import GpuScorer

        self.plan = plan
        self.assembler = FrameAssembler(plan, keep_frames=keep_frames)
        self.aggregate: dict[str, float] = {}
        compiled = [i for i in plan.instances if i.decl.gpu is not None and (features is None or i.decl.name in features)]
        rest = [i for i in plan.instances if i not in compiled]
        self._numpy = (CpuScorer(ScoringPlan(rest, [], {}), width, height, bitdepth, alternative, keep_frames=False)
                       if rest else None)  # (the parts' frames go to this assembler)
        self._scorer = None
        self._frame: int | None = None  # device memory of one frame pair (host memory here)
        self._host: np.ndarray | None = None
        if compiled:
            _, dev, kernels = _kernels()
            self.device = dev
            self._format = _PLANAR[subsampling]
            self._stream = dev.create_stream()
            self._scorer = GpuScorer(dev, kernels, self._stream, ScoringPlan(compiled, [], {}), width, height,
                                     bitdepth, subsampling, max_batch=1, slots=1, keep_frames=False)
        self._layout: tuple[tuple[int, int], ...] = ()
        self._frame_bytes = 0

    @property
    def compiled_features(self) -> list[str]:
        return [t.instance.decl.name for t in self._scorer.twins] if self._scorer is not None else []

    def _upload(self, ref, dist):
        from .gpu.engine import FrameSource, GpuFrame, packed_layout

        planes = [np.ascontiguousarray(p) for p in ref.planes]
        if self._frame is None:
            self._layout, off = packed_layout(planes)
            self._frame_bytes = off
            self._host = self.device.alloc_host(2 * off)
            self._frame = self.device.alloc(2 * off)
        host, fb = self._host, self._frame_bytes
        for k, pic in enumerate((planes, [np.ascontiguousarray(p) for p in dist.planes])):
            for p, (o, _) in zip(pic, self._layout):
                host[k * fb + o:k * fb + o + p.nbytes] = p.view(np.uint8).ravel()
        self.device.copy_htod_async(self._frame, host, 2 * fb, self._stream)
        return GpuFrame(FrameSource(self._frame, self._format, self._layout),
                        FrameSource(self._frame + fb, self._format, self._layout))

    def _add(self, frames) -> None:
        for idx, metrics in frames:
            self.assembler.add(idx, metrics)

    def push(self, index: int, ref, dist) -> list[tuple[int, dict[str, float]]]:
        """Score one pair (frames numbered densely from 0, as CpuScorer's); returns frames now final."""
        if self._scorer is not None:
            batch = self._scorer.enqueue([self._upload(ref, dist)])
            batch.done.synchronize()
            self._add(self._scorer.complete(batch))
        if self._numpy is not None:
            self._add(self._numpy.push(index, ref, dist))
        return self.assembler.pushed(index)

    def finish(self) -> list[tuple[int, dict[str, float]]]:
        for part in (self._scorer, self._numpy):
            if part is not None:
                self._add(part.finish())
                self.aggregate.update(part.aggregate)
        return self.assembler.finish()

    def pooled(self) -> dict[str, dict[str, float]]:
        return self.assembler.pooled()

    def close(self) -> None:
        """Free the compiled part's buffers (a second call does nothing)."""
        if self._scorer is not None:
            self._scorer.close()
            self._scorer = None
        if self._frame is not None:
            self.device.free(self._frame)
            self.device.free_host(self._host)
            self._frame = self._host = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
