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


def test_kernel_tables_are_the_cpu_twins():
    """The CSF table is generated into the kernel's source from the CPU twin's (no copy in the .cu),
    every value written so that it reads back as the same float32."""
    assert "hvs_csf[3][64] =" not in resources.files("vmafxd.features").joinpath("kernels", "psnr_hvs.cu").read_text()
    text = kernels.source("psnr_hvs.cu")
    body = text[text.index("__constant__ float hvs_csf[3][64] = {"):]
    body = body[: body.index("};")]
    values = [float(v) for v in re.findall(r"[0-9]+\.[0-9]+(?:e[-+]?[0-9]+)?", body)]
    want = np.concatenate([tables.CSF_Y.ravel(), tables.CSF_CB.ravel(), tables.CSF_CR.ravel()])
    assert values == want.astype(np.float64).tolist()  # exactly: no rounding left to the compiler
    assert body.count("{") == 4  # one brace per plane inside the outer one


# -- the scan's arithmetic with many threads (the emulator runs one) ------------------


def _step_map(t: float, u: float) -> tuple[int, int]:
    x = float(t) / u
    q = np.floor(x)
    if q >= 2.0**40:
        return 2**40, 2**40
    r, qi = x - q, int(q)
    if r < 0.5:
        return qi, qi
    if r > 0.5:
        return qi + 1, qi + 1
    return qi + (qi & 1), qi + ((qi + 1) & 1)


def _compose(a, c):
    return a[0] + c[a[0] & 1], a[1] + c[(1 + a[1]) & 1]


def _scan_sum(terms: np.ndarray, threads: int) -> np.float32:
    """psnr_hvs.cu's hvs_plane, step for step, with ``threads`` threads of 64 errors each."""
    f32 = np.float32
    state = f32(0)
    per = terms.reshape(-1, 64)
    for base in range(0, len(per), threads):
        chunk = per[base:base + threads]
        cnt, start = len(chunk), 0
        while start < cnt:
            s = state
            if s < f32(1.17549435e-38):
                u, top = 2.0**-149, 2.0**-126
            else:
                e = int(np.frexp(float(s))[1])
                u, top = 2.0 ** (e - 24), 2.0**e
            parity = int(float(s) / u) & 1
            maps = []
            for t in range(threads):
                m = (0, 0)
                if start <= t < cnt:
                    for v in chunk[t]:
                        m = _compose(m, _step_map(v, u))
                maps.append(m)
            prefix, acc = [], (0, 0)
            for m in maps:  # the inclusive scan's result (associative, so any tree gives it)
                acc = _compose(acc, m)
                prefix.append(acc)
            reached = [float(s) + prefix[t][parity] * u for t in range(threads)]
            j = start + sum(1 for t in range(start, cnt) if reached[t] < top)
            v = f32(reached[j - 1]) if j > start else s
            if j < cnt:
                for x in chunk[j]:
                    v = f32(v + x)
            state = v
            start = j + 1 if j < cnt else cnt
    return state


@pytest.mark.parametrize("threads", [1, 4, 128])
def test_scan_arithmetic_equals_the_sequential_float_sum(threads):
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
    assert _scan_sum(terms, threads) == want
    # and with a tie-heavy prefix of equal powers of two
    terms2 = np.full(64 * 40, np.float32(0.5))
    assert _scan_sum(terms2, threads) == np.cumsum(terms2, dtype=np.float32)[-1]
