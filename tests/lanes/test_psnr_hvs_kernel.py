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
from vmafxd.picture import Picture
from vmafxd.scoring import FeatureRequest, ScoringPlan

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
    text = resources.files("vmafxd.features").joinpath("kernels", "psnr_hvs.cu").read_text()
    body = text[text.index("hvs_csf[3][64] = {"):]
    body = body[: body.index("};")]
    values = [float(v) for v in re.findall(r"[0-9]+\.[0-9]+", body)]
    want = np.concatenate([tables.CSF_Y.ravel(), tables.CSF_CB.ravel(), tables.CSF_CR.ravel()])
    assert np.array(values, np.float32).tolist() == want.tolist()
