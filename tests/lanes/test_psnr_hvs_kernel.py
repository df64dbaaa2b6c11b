"""psnr_hvs on the GPU lanes (psnr_hvs.cu) against its CPU twin, bit for bit.

The kernel reproduces libvmaf's one-float sequential error sum with a scan
over the threads (see the kernel's header); equality of the doubles on every
frame of the vendored pairs (8/10-bit, odd size, 4:2:2, 4:4:4, identical
frames) is the contract.  The emulator runs each block with one thread, so
there the scan degenerates to the serial path plus one-thread maps; the
synthetic test below runs the scan's binade logic on long chains too.
"""

from __future__ import annotations

import re
from importlib import resources

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.features import _psnr_hvs_dct as tables
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.gpu import kernels

from ..reference import vendored_pairs
from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu


def _cut(pair, frames):
    refs, dists = pair.pictures()

    class Cut:
        width, height, bitdepth, pix_fmt, id = pair.width, pair.height, pair.bitdepth, pair.pix_fmt, pair.id

        def pictures(self):
            return refs[:frames], dists[:frames]

    return Cut()


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_equals_the_cpu_twin_on_every_frame(gpu, pair):
    rt, dev = gpu
    dev.make_current()
    plan = ScoringPlan.build([], [FeatureRequest("psnr_hvs")])
    cut = _cut(pair, 3)
    want = cpu_scores(plan, cut)
    got = gpu_scores(rt, dev, plan, cut, batch=2)
    assert set(got) == set(want)
    for i in want:
        assert got[i] == want[i], i


def _picture(planes, bitdepth, subsampling):
    return Picture(tuple(planes), bitdepth, subsampling)


@pytest.mark.parametrize("bitdepth", [8, 12])
def test_long_chains_with_ties_equal_the_cpu_twin(gpu, bitdepth):
    """Coarse noise on a large flat-ish picture: big coefficient errors (so
    exact ties on the sum's grid happen) and many binade crossings."""
    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(bitdepth)
    top = (1 << bitdepth) - 1
    h, w = 120, 200
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    refs, dists = [], []
    for k in range(2):
        base = (np.add.outer(np.arange(h), np.arange(w)) * (top // 400)).astype(np.int64) % (top + 1)
        noise = rng.integers(-(top // 4), top // 4, (h, w)) * (rng.random((h, w)) < 0.2)
        planes_r = [base.astype(dtype), base[:h // 2, :w // 2].astype(dtype), base[:h // 2, :w // 2].astype(dtype)]
        dist = np.clip(base + noise, 0, top).astype(dtype)
        planes_d = [dist, planes_r[1].copy(), np.clip(planes_r[2].astype(np.int64) + k * 3, 0, top).astype(dtype)]
        refs.append(_picture(planes_r, bitdepth, Subsampling.S420))
        dists.append(_picture(planes_d, bitdepth, Subsampling.S420))

    class Pair:
        width, height, pix_fmt, id = w, h, "yuv420p", "synthetic"

        def pictures(self):
            return refs, dists

    Pair.bitdepth = bitdepth
    plan = ScoringPlan.build([], [FeatureRequest("psnr_hvs")])
    want = cpu_scores(plan, Pair())
    got = gpu_scores(rt, dev, plan, Pair(), batch=2)
    assert got == want


@pytest.mark.parametrize("size", [(14, 14), (9, 30), (30, 18)])
def test_planes_with_few_or_no_blocks_equal_the_cpu_twin(gpu, size):
    """Chroma under 8 samples (no block: a plane of 0 errors, NaN scores on both lanes) or with 2,
    and Y with one row or column of blocks: the terms kernel's grid edges."""
    rt, dev = gpu
    dev.make_current()
    w, h = size
    rng = np.random.default_rng(w * h)
    pics = []
    for _ in range(4):
        planes = [rng.integers(0, 256, (h, w)).astype(np.uint8)] + \
            [rng.integers(0, 256, (h // 2, w // 2)).astype(np.uint8) for _ in range(2)]
        pics.append(_picture(planes, 8, Subsampling.S420))

    class Pair:
        width, height, bitdepth, pix_fmt, id = w, h, 8, "yuv420p", "tiny"

        def pictures(self):
            return pics[:2], pics[2:]

    plan = ScoringPlan.build([], [FeatureRequest("psnr_hvs")])
    want = cpu_scores(plan, Pair())
    got = gpu_scores(rt, dev, plan, Pair(), batch=2)
    assert repr(got) == repr(want)  # NaN where a plane has no block, on both lanes


@pytest.mark.parametrize("name,want", [("hvs_csf", tables.CSF), ("hvs_mask", tables.MASK)])
def test_kernel_tables_are_the_cpu_twins(name, want):
    """The CSF and masking tables are generated into the kernel's source from the CPU twin's
    (no copy in the .cu), every value written so that it reads back as the same float32."""
    assert f"{name}[3][64] =" not in resources.files("vmafxd.features").joinpath("kernels", "psnr_hvs.cu").read_text()
    text = kernels.source("psnr_hvs.cu")
    body = text[text.index(f"__constant__ float {name}[3][64] = {{"):]
    body = body[: body.index("};")]
    values = [float(v) for v in re.findall(r"[0-9]+\.[0-9]+(?:e[-+]?[0-9]+)?", body)]
    assert values == want.ravel().astype(np.float64).tolist()  # exactly: no rounding left to the compiler
    assert body.count("{") == 4  # one brace per plane inside the outer one


# -- the sum kernel's arithmetic with many threads (the emulator runs one) ------------

_CAP = 1 << 30  # HVS_CAP


def _split(x: np.ndarray):
    """hvs_split, element-wise: float32 x >= 0 as (m, k), x = m * 2^k."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    ex = b >> 23
    k = np.where(ex > 0, ex, 1) - 150
    m = np.where(ex > 0, (b & 0x7FFFFF) | 0x800000, b)
    return m, k


def _steps(t: np.ndarray, ku: int):
    """hvs_steps, element-wise: (b0, b1) for adding t to a sum on the grid 2^ku."""
    m, kt = _split(t)
    sh = kt - ku
    left = np.minimum(m << np.clip(sh, 0, 6), _CAP)
    whole = np.where(sh > 6, _CAP, left)
    r = np.clip(-sh, 1, 24)
    q = m >> r
    rem = m & ((1 << r) - 1)
    half = 1 << (r - 1)
    up, tie = rem > half, rem == half
    b0 = q + (up | (tie & (q & 1 == 1)))
    b1 = q + (up | (tie & (q & 1 == 0)))
    small = -sh >= 25
    b0 = np.where(sh >= 0, whole, np.where(small, 0, b0))
    b1 = np.where(sh >= 0, whole, np.where(small, 0, b1))
    return b0, b1


def _compose(a, c):
    """hvs_compose: A then C, saturating (vectorised over threads)."""
    a0, a1 = a
    c0, c1 = c
    x0 = a0 + np.where(a0 & 1 == 1, c1, c0)
    x1 = a1 + np.where(a1 & 1 == 1, c0, c1)
    return np.minimum(x0, _CAP), np.minimum(x1, _CAP)


def _scan_sum(terms: np.ndarray, threads: int, chunk: int) -> np.float32:
    """psnr_hvs.cu's hvs_sum, step for step, with ``threads`` threads of ``chunk`` errors."""
    f32 = np.float32
    state = f32(0)
    window = threads * chunk
    for base in range(0, len(terms), window):
        part = np.zeros(window, f32)
        got = terms[base:base + window]
        part[:len(got)] = got
        per = part.reshape(threads, chunk)
        start = 0
        while start < threads:
            s = state
            at_, ku_ = _split(np.array([s]))
            at, ku = int(at_[0]), int(ku_[0])  # s = at * 2^ku
            room = (1 << 24) - at
            m = (np.zeros(threads, np.int64), np.zeros(threads, np.int64))
            for c in range(chunk):
                m = _compose(m, _steps(per[:, c], ku))
            active = np.arange(threads) >= start
            m = (np.where(active, m[0], 0), np.where(active, m[1], 0))
            incl, excl, acc = [], [], (0, 0)
            for t in range(threads):  # the block scan's result (associative: any tree gives it)
                excl.append(acc[at & 1])
                acc = tuple(int(v) for v in _compose((np.int64(acc[0]), np.int64(acc[1])), (m[0][t], m[1][t])))
                incl.append(acc[at & 1])
            hits = [t for t in range(start, threads) if excl[t] < room <= incl[t]]
            assert len(hits) <= 1
            if not hits:
                state = f32(float(s) + incl[-1] * 2.0**ku)
                break
            j = hits[0]
            x = f32(float(s) + excl[j] * 2.0**ku)
            for v in per[j]:
                x = f32(x + v)
            state = x
            start = j + 1
    return state


@pytest.mark.parametrize("threads,chunk", [(1, 16), (4, 4), (1024, 16), (256, 32)])
def test_scan_arithmetic_equals_the_sequential_float_sum(threads, chunk):
    rng = np.random.default_rng(threads)
    # errors like the kernel's: many zeros, small values, a few huge ones, and
    # values with few significant bits (exact ties on the sum's grid)
    n = 64 * 300
    terms = (rng.random(n) * 3e3).astype(np.float32)
    terms[rng.random(n) < 0.3] = 0
    terms[rng.random(n) < 0.05] *= np.float32(1e3)
    coarse = rng.random(n) < 0.2
    terms[coarse] = np.float32(2.0) ** rng.integers(-3, 12, coarse.sum()).astype(np.float32)
    terms[:64] = 0  # the sum starts at zero for a while
    want = np.cumsum(terms, dtype=np.float32)[-1]
    # the data must exercise what the scan is about: ties and many binades
    assert want > 2**24 and want != np.float32(terms.astype(np.float64).sum())
    assert _scan_sum(terms, threads, chunk) == want
    # a tie-heavy run of equal powers of two
    terms2 = np.full(64 * 40, np.float32(0.5))
    assert _scan_sum(terms2, threads, chunk) == np.cumsum(terms2, dtype=np.float32)[-1]
    # subnormal and tiny errors first (the 2^-149 grid, then the binades above it)
    terms3 = np.concatenate([np.float32(2.0**-149) * rng.integers(0, 5, 64 * 20).astype(np.float32),
                             (rng.random(64 * 20) * 1e-30).astype(np.float32), terms[:64 * 40]])
    assert _scan_sum(terms3, threads, chunk) == np.cumsum(terms3, dtype=np.float32)[-1]
