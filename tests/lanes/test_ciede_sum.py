"""ciede's slow-path sum on the GPU lanes (ciede.cu's ``vx_ciede_scatter`` and
``vx_ciede_seqsum``) against libvmaf's order: one double, s = s + x in raster order.

The device adds a chunk of floats at a time on the grid of the sum's binade; these
frames are made to hit every case of that arithmetic: ties rounded to even (the
parity carried across threads), floats below half the grid, the sum leaving its
binade mid-chunk, zeros before the first float, floats that are not finite numbers
>= 0, a marker left in place, subnormals and floats far above the sum.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.lanes.gpu import ciede as gpu_ciede
from vmafxd.lanes.gpu.engine import KernelSet
from vmafxd.lanes.gpu.launch import I32, I64, U64

pytestmark = pytest.mark.gpu

PIXELS = 60_001  # not a multiple of any chunk


def _in_order(x: np.ndarray) -> float:
    """libvmaf's sum: a double, the floats added one after another (``add.accumulate``
    adds in order)."""
    return float(np.add.accumulate(x.astype(np.float64))[-1]) if len(x) else 0.0


def _device_sums(rt, dev, frames: np.ndarray, targets: np.ndarray, values: np.ndarray) -> list[float]:
    """The scatter of ``values`` at ``targets``, then each frame's sum, on a device."""
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    n, pixels = frames.shape
    order = np.arange(n, dtype=np.int64)[::-1].copy()  # frames summed out of slot order
    floats = frames.reshape(-1).view(np.uint8)
    pad = np.zeros(-len(floats) % 8, np.uint8)  # the 64-bit words after the floats 8-byte aligned
    blob = np.concatenate([floats, pad, order.view(np.uint8), targets.astype(np.int64).view(np.uint8),
                           values.astype(np.float32).view(np.uint8)])
    host = dev.alloc_host(blob.nbytes + 8 * n)
    buf = dev.alloc(blob.nbytes + 8 * n + 8)
    try:
        host[:blob.nbytes] = blob
        dev.copy_htod_async(buf, host, blob.nbytes, stream)
        d_frames, d_order = buf, buf + len(floats) + len(pad)
        d_targets = d_order + order.nbytes
        d_values = d_targets + 8 * len(targets)
        d_sums = buf + (blob.nbytes + 7) // 8 * 8
        if len(targets):
            scatter = ks.launcher("ciede.cu", "vx_ciede_scatter", [U64, U64, U64, I64])
            scatter(((len(targets) + 255) // 256,), (256,), stream, d_frames, d_targets, d_values, len(targets))
        seqsum = ks.launcher("ciede.cu", "vx_ciede_seqsum", [U64, I64, U64, U64, I32])
        seqsum((n,), (gpu_ciede._SEQ_THREADS,), stream, d_frames, pixels, d_order, d_sums, n)
        dev.copy_dtoh_async(host[blob.nbytes:], d_sums, 8 * n, stream)
        stream.synchronize()
        return host[blob.nbytes:blob.nbytes + 8 * n].view(np.float64)[::-1].tolist()
    finally:
        dev.free(buf)
        dev.free_host(host)
        stream.close()
        ks.close()


def _frames(rng) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Frames of PIXELS floats (as the kernel reads them, markers included), the
    scatter's targets and values, and each frame's name."""
    names, rows = [], []

    def add(name, x):
        names.append(name)
        rows.append(np.asarray(x, np.float32))

    de = (rng.gamma(1.5, 2.0, PIXELS) * (rng.random(PIXELS) > 0.05)).astype(np.float32)
    add("differences", de)
    # the sum parked in [2^20, 2^21), whose grid is 2^-32: ties at odd multiples of 2^-33,
    # integers of the grid (odd and even: the parity), floats below and just above half of it
    g = 2.0**-32
    kinds = rng.integers(0, 5, PIXELS)
    n = rng.integers(0, 4, PIXELS).astype(np.float64)
    x = np.choose(kinds, [(n + 0.5) * g, n * g, 0.25 * g, (0.5 + 2.0**-12) * g, (n + 0.5) * g])
    x[0] = 2.0**20
    x[PIXELS // 2] = 2.0**20 - 2.0**-4  # the sum leaves its binade mid-frame, ties go on at 2^-31
    add("ties", x)
    add("ties_first_parity_odd", np.concatenate(([2.0**20 + g], x[1:])))
    lead = de.copy()
    lead[:20_000] = 0.0
    add("zeros_first", lead)
    add("all_zeros", np.zeros(PIXELS))
    odd = de.copy()
    odd[[7, 30_000]] = [1e30, 2.0**-149]  # far above the sum (q >= 2^53); a subnormal
    odd[100:200] = 2.0**-140
    add("far_apart", odd)
    powers = de.copy()
    powers[[10, 20_000]] = [2.0**60, 2.0**100]  # far above the grid, significands of one bit
    add("powers_far_above", powers)
    growing = (2.0 ** rng.uniform(-20, 20, PIXELS)).astype(np.float32)
    growing.sort()
    add("growing", growing)  # a new binade every few floats at first
    # the sum leaves a binade forty times (adding 2^k to 2^k and a little), each time
    # followed by floats at and around half of the new grid, whose rounding the old grid
    # would get wrong
    cross = [1.0]
    for k in range(40):
        g = 2.0 ** (k + 1 - 52)
        cross += [2.0**k] + rng.choice([0.5 * g, 1.5 * g, 0.25 * g, g], 60).tolist()
    add("binades", np.concatenate((cross, np.zeros(PIXELS - len(cross)))))
    marked = de.copy()
    add("markers", marked)
    left = de.copy()
    left[30_000] = -1.0  # a marker with no redone float: added as it is
    add("marker_left", left)
    bad = de.copy()
    bad[40_000] = np.nan
    add("nan", bad)
    inf = de.copy()
    inf[50_000] = np.inf
    add("inf", inf)
    frames = np.stack(rows)
    # the markers' frame: 5,000 floats go back through the scatter
    m = names.index("markers")
    idx = np.sort(rng.choice(PIXELS, 5_000, replace=False))
    values = frames[m, idx] * np.float32(1.5) + np.float32(0.125)
    frames[m, idx] = -1.0
    return frames, idx + m * PIXELS, values, names


def test_the_device_sum_is_libvmafs_in_order_sum(gpu):
    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(11)
    frames, targets, values, names = _frames(rng)
    want_frames = frames.copy()
    want_frames.reshape(-1)[targets] = values
    want = [_in_order(row) for row in want_frames]
    got = _device_sums(rt, dev, frames, targets, values)
    for name, a, b in zip(names, got, want):
        assert a == b or (np.isnan(a) and np.isnan(b)), (name, a, b, a - b)
    assert np.isnan(got[names.index("nan")]) and got[names.index("inf")] == np.inf
    assert got[names.index("all_zeros")] == 0.0
    # the ties decide: rounding them up (or the parity dropped) gives another sum
    ties = want_frames[names.index("ties")].astype(np.float64)
    assert _in_order(ties) != float(np.sum(ties[1:]) + ties[0])
