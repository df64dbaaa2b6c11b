"""Float VIF's banded kernels against the CPU twin at their edges: equal on every frame, bit for bit.

The statistics kernel (float_vif.cu's vx_fvif_stat_*) gives a block a band
of 8 rows across the width, in segments of ``tile_width(taps)`` columns (240
for scale 0's 17 taps), and adds each row's values in order as the segments
come; the decimation (vx_fvif_down_*) works in runs of 120 output columns;
both read scale 0 from the staged 8- or 16-bit samples.  The random frames
here put picture edges one past and one short of those boundaries, take the
smallest picture every scale allows, every depth (8, 10, 12, 16 bits), the
kernels of any filter width (vif_kernelscale other than 1, up to libvmaf's
widest, 65 taps) and a skipped scale 0.  At vif_kernelscale 1 the scale-0
statistics kernel also writes the scale-1 pictures, and scales 1 and 2 the
next ones (vx_fvif_stat_down_*, in segments of 240 columns): their last bands
and last segments hold odd and even counts of kept rows and columns here, in
4:2:0, 4:2:2 and 4:4:4 (the staged frames' layouts differ); the other filters
and a skipped scale 0 take the separate decimation.  Runs on every GPU runtime with a
device and on the emulator; the emulator runs a block as one thread, so one
test also runs the kernels with blocks of real threads
(fvif_block_threads.cpp).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.gpu import float_vif as float_vif_gpu
from vmafxd.lanes.gpu.float_vif import stat_down_kernel, stat_kernel, tile_width
from vmafxd.lanes.gpu.kernels import kernel_tables

from .test_float_kernels import _check
from .test_float_simple_kernels import _Frames


_PIX_FMT = {Subsampling.S420: "yuv420p", Subsampling.S422: "yuv422p", Subsampling.S444: "yuv444p"}


def _noise(bitdepth: int, w: int, h: int, frames: int = 2, seed: int = 0,
           subsampling: Subsampling = Subsampling.S444) -> _Frames:
    """Random reference frames and distorted ones that keep part of them (so VIF is neither 0 nor 1)."""
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    top = (1 << bitdepth) - 1
    cw, ch = {Subsampling.S420: ((w + 1) // 2, (h + 1) // 2), Subsampling.S422: ((w + 1) // 2, h),
              Subsampling.S444: (w, h)}[subsampling]
    shapes = [(h, w), (ch, cw), (ch, cw)]

    def pair():
        ref = [rng.integers(0, top + 1, s) for s in shapes]
        noise = [rng.integers(-(top // 8), top // 8 + 1, s) for s in shapes]
        dist = [np.clip(r + n, 0, top) for r, n in zip(ref, noise)]
        return (Picture(tuple(p.astype(dtype) for p in ref), bitdepth, subsampling),
                Picture(tuple(p.astype(dtype) for p in dist), bitdepth, subsampling))

    pairs = [pair() for _ in range(frames)]
    return _Frames(f"noise{bitdepth}-{w}x{h}", [p[0] for p in pairs], [p[1] for p in pairs], bitdepth,
                   _PIX_FMT[subsampling])


def _plan(options=None):
    return ScoringPlan.build([], [FeatureRequest("float_vif", {**(options or {}), "debug": "true"})])


def test_tile_widths_and_kernels():
    assert [tile_width(t) for t in (17, 9, 5, 3, 65)] == [240, 248, 252, 252, 192]
    assert [tile_width(t, decimating=True) for t in (17, 9, 5)] == [240, 240, 240]
    assert stat_kernel("u8", 17) == "vx_fvif_stat_u8_17"
    assert stat_kernel("u16", 9) == "vx_fvif_stat_u16_any"
    assert stat_kernel("f32", 5) == "vx_fvif_stat_f32_5"
    assert stat_kernel("f32", 23) == "vx_fvif_stat_f32_any"
    # a scale's statistics write the next scale's pictures at vif_kernelscale 1's widths only
    assert stat_down_kernel("u8", 17, 9) == "vx_fvif_stat_down_u8_17_9"
    assert stat_down_kernel("u16", 17, 9) == "vx_fvif_stat_down_u16_17_9"
    assert stat_down_kernel("f32", 9, 5) == "vx_fvif_stat_down_f32_9_5"
    assert stat_down_kernel("f32", 5, 3) == "vx_fvif_stat_down_f32_5_3"
    assert stat_down_kernel("u8", 41, 23) is None
    assert stat_down_kernel("u16", 9, 5) is None
    assert stat_down_kernel("f32", 23, 13) is None
    assert stat_down_kernel("f32", 3, 3) is None


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth, subsampling, w, h", [
    (8, Subsampling.S420, 483, 27),   # last band: 3 rows, 1 kept; last segment: 1 scale-1 column
    (8, Subsampling.S422, 481, 19),   # a last segment with no scale-1 column; last band: 3 rows
    (8, Subsampling.S444, 242, 30),   # even sizes: the last band's 6 rows, 3 kept
    (10, Subsampling.S420, 245, 41),  # odd sizes, 10 bits: last band 1 row, none kept
    (10, Subsampling.S422, 17, 17),   # the smallest a 17-tap scale 0 takes: one band, one segment
    (10, Subsampling.S444, 720, 35),  # three whole segments; last band 3 rows, 1 kept
    (8, Subsampling.S420, 966, 70),   # scale 1 (483 x 35) as 483 x 27 is at scale 0; scale 2 241 x 17
], ids=lambda v: str(v))
def test_folded_decimation_equal_the_cpu_lane(gpu, bitdepth, subsampling, w, h):
    """vx_fvif_stat_down_* (a scale's statistics writing the next scale's pictures) at its edges:
    the scales above (read from those pictures) equal the CPU twin's."""
    rt, dev = gpu
    frames = _noise(bitdepth, w, h, seed=2, subsampling=subsampling)
    cpu = _check(rt, dev, _plan(), frames, batch=2)
    assert 0.0 < cpu[0]["vif_scale1"] < 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth, w, h", [
    (8, 16, 16),     # the smallest picture: scale 3 is 2x2 (its filter's radius is 1)
    (8, 241, 33),    # one column past a 240-column segment, one row past 4 bands of 8
    (8, 480, 31),    # two whole segments wide, one row short of 4 bands
    (8, 243, 45),    # scale 1 (121 wide) one past a decimation run
    (10, 241, 40),
    (12, 97, 57),
    (16, 250, 18),   # scale 1 is 125 x 9: a segment of 248 columns, a band and a row
], ids=lambda v: str(v))
def test_tile_edges_equal_the_cpu_lane(gpu, bitdepth, w, h):
    rt, dev = gpu
    frames = _noise(bitdepth, w, h)
    cpu = _check(rt, dev, _plan(), frames, batch=2)
    assert len(cpu) == len(frames.refs)
    assert 0.0 < cpu[0]["vif_scale0"] < 1.0


@pytest.mark.gpu
@pytest.mark.parametrize("options, bitdepth, w, h", [
    ({"vif_skip_scale0": "true"}, 8, 243, 35),
    ({"vif_kernelscale": "0.5"}, 10, 249, 41),                 # 9 taps at scale 0: the any-width kernel
    ({"vif_kernelscale": "2.4000000953674316"}, 8, 250, 90),   # 41, 23, 13, 9 taps: any width everywhere
    ({"vif_kernelscale": "3.7113401889801025"}, 16, 200, 66),  # 65 taps at scale 0: 192-column segments
    ({"vif_kernelscale": "3.7113401889801025", "vif_skip_scale0": "true"}, 8, 385, 57),
], ids=lambda v: str(v))
def test_filter_widths_equal_the_cpu_lane(gpu, options, bitdepth, w, h):
    rt, dev = gpu
    frames = _noise(bitdepth, w, h, seed=1)
    _check(rt, dev, _plan(options), frames, batch=2)


# the emulator's prelude, changed to run a block's threads as threads (fvif_block_threads.cpp)
_THREADED_PRELUDE = (
    ("#define __shared__\n", "#define __shared__ static\n"),
    ("static constexpr vx_dim3 vx_emu_threadIdx = {0, 0, 0};", "static thread_local vx_dim3 vx_emu_threadIdx = {0, 0, 0};"),
    ("static constexpr vx_dim3 vx_emu_blockDim = {1, 1, 1};", "static vx_dim3 vx_emu_blockDim = {1, 1, 1};"),
    ("static inline void __syncthreads() {}", "void __syncthreads();"),
)


def test_blocks_of_threads_equal_the_one_thread_emulator(tmp_path):
    """The kernels' thread mapping on a GPU (blocks of 288 and 256 threads, barriers between the
    phases) gives the emulator's values; built with ThreadSanitizer where it runs here."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++")
    kernels = Path(float_vif_gpu.__file__).resolve().parents[2] / "features" / "kernels"
    prelude = (kernels / "vmafx_prelude.h").read_text()
    for old, new in _THREADED_PRELUDE:
        assert prelude.count(old) == 1, old
        prelude = prelude.replace(old, new)
    src = tmp_path / "fvif_block_threads.cpp"
    src.write_text("#define VX_EMULATE 1\n" + prelude + kernel_tables("float_vif.cu")
                   + (kernels / "float_vif.cu").read_text()
                   + (Path(__file__).parent / "fvif_block_threads.cpp").read_text())
    base = [cxx, "-O1", "-std=c++20", "-pthread", "-ffp-contract=off", "-w", str(src), "-o"]
    for sanitize in (["-fsanitize=thread"], []):
        exe = tmp_path / ("check_tsan" if sanitize else "check")
        if subprocess.run(base + [str(exe)] + sanitize, capture_output=True).returncode != 0:
            assert sanitize, "the threaded check did not build"
            continue  # no ThreadSanitizer here
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
        if sanitize and "FATAL: ThreadSanitizer" in run.stderr:
            continue  # ThreadSanitizer cannot run on this kernel's memory layout
        assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
        assert run.returncode == 0, run.stdout + run.stderr[-3000:]
        assert run.stdout.count("equal") == 24, run.stdout
        return
    pytest.fail("the threaded check did not run")
