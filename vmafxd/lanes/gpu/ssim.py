"""Float SSIM and MS-SSIM on the GPU (one kernel source, ``ssim.cu``, for both).

Per batch (every launch covers all frames, the frame in ``blockIdx.z``):

``float_ssim``
    one box-decimation launch when the scale factor is above 1 (staging
    samples -> float pictures in per-batch scratch), one statistics launch,
    one reduction launch.
``float_ms_ssim``
    four 9x9 low-pass decimation launches (scale 1 straight from the
    staging samples), ONE statistics launch for all five scales (a job per
    scale; scale 0 reads the staging samples), one reduction launch.

The statistics kernel leaves four double sums (l, c, s, l*c*s) per block in
per-batch scratch; the reduction kernel adds each scale's block sums in a
fixed order into the frame's record, so results never depend on scheduling.
Record: ``float64[4]`` (float_ssim) or ``float64[5, 4]`` (float_ms_ssim),
``(l, c, s, lcs)`` sums over the valid region; the host builds the CPU twins'
:class:`~vmafxd.features._ssim_core.ScaleSums` from them and calls their
``metrics_from_stats``, so ``enable_lcs``, ``enable_db`` and ``clip_db``
behave exactly as on the CPU lane.

Precision: see ``ssim.cu``'s header.  The device computes what the CPU twins
compute, bit for bit: with the features' ``exact_filter`` option (default
true) the Gaussian passes use libvmaf's double accumulation (EXACT=1), which
gives libvmaf's values; with ``exact_filter=false`` they use the twins'
faster float32 formula (EXACT=0).  Decimations and per-pixel terms are
libvmaf's arithmetic either way, so the scores match the CPU lane up to the
order of the double sums.  :attr:`GpuSsimBase.exact_filter`, when set,
overrides the option (tests use it).
"""

from __future__ import annotations

import numpy as np

from ...features import ms_ssim as ms_cpu
from ...features import ssim as ssim_cpu
from ...features._ssim_core import WINDOW, ScaleSums, db_cap, to_float_divisor
from ...features.declaration import check_bitdepth
from .engine import GpuFeature
from .launch import I32, I64, U64, PreparedBatches, Relative

__all__ = ["make", "GpuFloatSsim", "GpuFloatMsSsim"]

# keep in step with ssim.cu
_JOB_WORDS = 16
_SS_BW, _SS_ROWS = 128, 16 * 8 - 10  # stats block: columns (== threads), output rows
_RED_THREADS = 256
_BOX_TW, _BOX_TH = 32, 8
_DN_TW, _DN_TH = 32, 16
_KIND_U8, _KIND_U16, _KIND_F32 = 0, 1, 2
_BASE_STAGING, _BASE_SCRATCH = 0, 1

_STATS_TYPES = [U64, I32, U64, U64, U64, I32]
_REDUCE_TYPES = [U64, I32, U64, U64, I32, I32]
_BOX_TYPES = [U64, I64, I64, I64, I32, I32, I32, I32, U64, I64, I64, I64, I32, I32]
_DOWN_TYPES = [U64, I64, I64, I64, I32, I32, I32, U64, I64, I64, I64, I32, I32]


def _align(n: int, a: int = 256) -> int:
    return (n + a - 1) // a * a


class _FloatPlanes:
    """Layout of float pictures in per-batch scratch: ``[frame][role][plane]``.

    ``sizes`` are ``(w, h)``; each plane's pitch is a multiple of 64 floats.
    """

    def __init__(self, sizes):
        self.sizes = list(sizes)
        self.pitches = [_align(w * 4) // 4 for w, _ in self.sizes]
        self.offsets, off = [], 0
        for (w, h), p in zip(self.sizes, self.pitches):
            self.offsets.append(off)
            off += p * h * 4
        self.role_bytes = _align(off)
        self.frame_bytes = 2 * self.role_bytes


class GpuSsimBase(GpuFeature):
    """What both twins share: the job table, the statistics and reduction launches."""

    #: libvmaf's double accumulation in the Gaussian passes (see ssim.cu);
    #: None: as the feature's ``exact_filter`` option says
    exact_filter: bool | None = None
    cpu = None  # the CPU twin module

    def __init__(self, instance, scorer):
        super().__init__(instance, scorer, self.cpu.DECLARATION)
        stg = scorer.staging
        check_bitdepth(instance.decl.name, stg.bitdepth, (8, 10, 12, 16), "8, 10, 12, 16")
        self.width, self.height = stg.shapes[0]
        self.divisor = int(to_float_divisor(stg.bitdepth))
        self.enable_lcs = bool(self.values["enable_lcs"])
        self.enable_db = bool(self.values["enable_db"])
        self.db_max = db_cap(bool(self.values["clip_db"]), self.width, self.height, stg.bitdepth)
        self.stats_offset = 0

    # -- job table ---------------------------------------------------------------------
    def _build_jobs(self, pictures, with_lcs: bool) -> None:
        """``pictures``: per scale ``(kind, base, offset, role, fstride, pitch, w, h)``."""
        rows, first = [], 0
        self.pixels = []
        for kind, base, offset, role, fstride, pitch, w, h in pictures:
            ow, oh = w - (WINDOW - 1), h - (WINDOW - 1)
            tiles_x, tiles_y = -(-ow // _SS_BW), -(-oh // _SS_ROWS)
            row = [kind, base, offset, role, fstride, pitch, w, h, tiles_x, first, tiles_x * tiles_y,
                   self.divisor, int(with_lcs)]
            rows.append(row + [0] * (_JOB_WORDS - len(row)))
            first += tiles_x * tiles_y
            self.pixels.append(ow * oh)
        self.njobs = len(rows)
        self.total_blocks = first
        table = np.asarray(rows, dtype=np.int64)
        dev, st = self.scorer.device, self.scorer.stream
        self._jobs_dev = self.own(dev.alloc(table.nbytes))
        host = dev.alloc_host(table.nbytes)
        host[:] = table.view(np.uint8).ravel()
        dev.copy_htod_async(self._jobs_dev, host, table.nbytes, st)
        st.synchronize()  # once per session, before the pinned copy goes
        dev.free_host(host)
        ks = self.scorer.kernels
        exact = self.exact_filter if self.exact_filter is not None else bool(self.values["exact_filter"])
        name = "vx_ssim_stats_exact" if exact else "vx_ssim_stats"
        self._stats = ks.launcher("ssim.cu", name, _STATS_TYPES)
        self._reduce = ks.launcher("ssim.cu", "vx_ssim_reduce", _REDUCE_TYPES)
        self._batches = PreparedBatches(self._launches)
        self.stats_bytes = 4 * 8 * self.njobs

    def _partials_bytes(self, n: int) -> int:
        return _align(n * self.total_blocks * 4 * 8)

    def _stats_launches(self, staging, scratch, partials, n: int, stats: int, record_bytes: int):
        # blockDim.x must be _SS_BW: each thread owns one column of the block
        yield self._stats, (self.total_blocks, 1, n), (_SS_BW,), (
            self._jobs_dev, self.njobs, staging, scratch, partials, self.total_blocks)
        yield self._reduce, (self.njobs, n), (_RED_THREADS,), (
            partials, self.total_blocks, self._jobs_dev, stats + self.stats_offset, record_bytes // 8, 0)

    def _records(self, stats: np.ndarray, count: int) -> np.ndarray:
        raw = stats[:count, self.stats_offset:self.stats_offset + self.stats_bytes]
        return np.ascontiguousarray(raw).view(np.float64).reshape(count, self.njobs, 4)

    # -- what each twin adds: its float pictures in scratch, and its sums from a record ---------
    def _picture_bytes(self, n: int) -> int:
        raise NotImplementedError

    def _picture_launches(self, staging, scratch, n: int):
        """The launches that make the twin's float pictures in ``scratch``."""
        raise NotImplementedError

    def _sums(self, record: np.ndarray):
        """The CPU twin's ``metrics_from_stats`` input from one frame's ``(njobs, 4)`` record."""
        raise NotImplementedError

    def scratch_bytes(self, n: int) -> int:
        """The batch's float pictures, then the statistics blocks' partial sums (the engine's scratch)."""
        return self._picture_bytes(n) + self._partials_bytes(n)

    def graph_key(self, n: int, first_seq: int) -> tuple:
        return ()  # enqueue: its prepared launches alone

    def enqueue(self, staging: int, n: int, first_seq: int, stats: int, record_bytes: int, scratch: int) -> None:
        self._batches.run(self.scorer.stream, staging, n, scratch - staging, stats, record_bytes)

    def _launches(self, n: int, scratch_at: int, stats: int, record_bytes: int):
        """The batch's launches (:class:`PreparedBatches`): staging at ``Relative(0)``, the scratch at
        ``scratch_at`` bytes after it."""
        staging, scratch = Relative(0), Relative(scratch_at)
        yield from self._picture_launches(staging, scratch, n)
        yield from self._stats_launches(staging, scratch, scratch + self._picture_bytes(n), n, stats, record_bytes)

    def metrics(self, stats: np.ndarray, first_seq: int, count: int):
        rec = self._records(stats, count)
        return [(first_seq + i, self.cpu.metrics_from_stats(
                    self._sums(rec[i]), enable_lcs=self.enable_lcs, enable_db=self.enable_db, db_max=self.db_max))
                for i in range(count)]


class GpuFloatSsim(GpuSsimBase):
    """``float_ssim``: optional box decimation, then one scale of sums."""

    cpu = ssim_cpu

    def __init__(self, instance, scorer):
        super().__init__(instance, scorer)
        stg = scorer.staging
        w, h = self.width, self.height
        self.factor = ssim_cpu.resolve_scale(int(self.values["scale"]), w, h)
        dw, dh = ssim_cpu.decimated_size(w, h, self.factor)
        if dw < WINDOW or dh < WINDOW:
            raise ValueError(
                f"float_ssim: {w}x{h} decimated by {self.factor} is {dw}x{dh}, "
                f"smaller than the {WINDOW}x{WINDOW} window"
            )
        kind = _KIND_U8 if stg.elem == 1 else _KIND_U16
        if self.factor > 1:
            self.planes = _FloatPlanes([(dw, dh)])
            pic = (_KIND_F32, _BASE_SCRATCH, 0, self.planes.role_bytes // 4, self.planes.frame_bytes // 4,
                   self.planes.pitches[0], dw, dh)
            box = "vx_ssim_box_u8" if stg.elem == 1 else "vx_ssim_box_u16"
            self._box = scorer.kernels.launcher("ssim.cu", box, _BOX_TYPES)
        else:
            self.planes = None
            pic = (kind, _BASE_STAGING, stg.offsets[0], stg.role_bytes // stg.elem, stg.frame_stride_elems,
                   stg.pitches[0], w, h)
        self._build_jobs([pic], with_lcs=True)

    def _picture_bytes(self, n: int) -> int:
        return n * self.planes.frame_bytes if self.planes else 0

    def _picture_launches(self, staging, scratch, n: int):
        stg = self.scorer.staging
        if self.planes:
            (dw, dh), pitch = self.planes.sizes[0], self.planes.pitches[0]
            yield self._box, ((dw + _BOX_TW - 1) // _BOX_TW, 2 * ((dh + _BOX_TH - 1) // _BOX_TH), n), (256,), (
                stg.plane_ptr(staging, 0, 0, 0), stg.frame_stride_elems, stg.role_bytes // stg.elem,
                stg.pitches[0], self.divisor, self.width, self.height, self.factor,
                scratch, self.planes.frame_bytes // 4, self.planes.role_bytes // 4, pitch, dw, dh)

    def _sums(self, record: np.ndarray) -> ScaleSums:
        l, c, s, lcs = record[0].tolist()
        return ScaleSums(pixels=self.pixels[0], l=l, c=c, s=s, lcs=lcs)


class GpuFloatMsSsim(GpuSsimBase):
    """``float_ms_ssim``: four low-pass decimations, then five scales of sums in one launch."""

    cpu = ms_cpu

    def __init__(self, instance, scorer):
        super().__init__(instance, scorer)
        stg = scorer.staging
        ms_cpu.check_size(self.width, self.height)
        sizes = [(w, h) for h, w in ms_cpu.scale_sizes(self.width, self.height)]
        self.sizes = sizes
        self.planes = _FloatPlanes(sizes[1:])
        kind = _KIND_U8 if stg.elem == 1 else _KIND_U16
        pics = [(kind, _BASE_STAGING, stg.offsets[0], stg.role_bytes // stg.elem, stg.frame_stride_elems,
                 stg.pitches[0], *sizes[0])]
        for i, (w, h) in enumerate(sizes[1:]):
            pics.append((_KIND_F32, _BASE_SCRATCH, self.planes.offsets[i], self.planes.role_bytes // 4,
                         self.planes.frame_bytes // 4, self.planes.pitches[i], w, h))
        ks = scorer.kernels
        first = "vx_ms_ssim_down_u8" if stg.elem == 1 else "vx_ms_ssim_down_u16"
        self._down = [ks.launcher("ssim.cu", first, _DOWN_TYPES)] + \
                     [ks.launcher("ssim.cu", "vx_ms_ssim_down_f32", _DOWN_TYPES) for _ in range(3)]
        # MS-SSIM never uses l * c * s
        self._build_jobs(pics, with_lcs=False)

    def _picture_bytes(self, n: int) -> int:
        return n * self.planes.frame_bytes

    def _picture_launches(self, staging, scratch, n: int):
        stg = self.scorer.staging
        pl = self.planes
        src = stg.plane_ptr(staging, 0, 0, 0)
        src_fstride, src_role, src_pitch = stg.frame_stride_elems, stg.role_bytes // stg.elem, stg.pitches[0]
        dst_fstride, dst_role = pl.frame_bytes // 4, pl.role_bytes // 4
        for s in range(1, ms_cpu.SCALES):
            w, h = self.sizes[s - 1]
            ow, oh = self.sizes[s]
            dst = scratch + pl.offsets[s - 1]
            yield self._down[s - 1], ((ow + _DN_TW - 1) // _DN_TW, 2 * ((oh + _DN_TH - 1) // _DN_TH), n), (256,), (
                src, src_fstride, src_role, src_pitch, self.divisor, w, h,
                dst, dst_fstride, dst_role, pl.pitches[s - 1], ow, oh)
            src, src_fstride, src_role, src_pitch = dst, dst_fstride, dst_role, pl.pitches[s - 1]

    def _sums(self, record: np.ndarray) -> tuple[ScaleSums, ...]:
        return tuple(ScaleSums(pixels=self.pixels[k], l=l, c=c, s=s)
                     for k, (l, c, s, _) in enumerate(record.tolist()))


def make(instance, scorer) -> GpuSsimBase:
    name = instance.decl.name
    if name == "float_ssim":
        return GpuFloatSsim(instance, scorer)
    if name == "float_ms_ssim":
        return GpuFloatMsSsim(instance, scorer)
    raise ValueError(f"vmafxd.lanes.gpu.ssim has no twin for {name!r}")
