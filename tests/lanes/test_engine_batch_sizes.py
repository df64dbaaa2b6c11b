"""Batches of every size in one session give the numbers one size gives, and the CPU lane's.

The engine prepares each feature's launches once per batch size (their
arguments relative to the batch's one allocation: staging, then a scratch
region the features share), keeps a ``done`` event per host slot, and scores
batches of up to four frames by ADM's scalar path: a session whose batches
change size (1, 3, 2, 1 ...) exercises every cached layout against the others,
with the allocation at a different address each time.  Runs on the emulator
here and on every GPU runtime with a device (the ``gpu`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import PixelFormat, Subsampling
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.model import load_model

from .test_gpu_engine import _differences, cpu_scores


class _Pair:
    """Noisy pictures of an odd size, the distortion changing frame by frame."""

    def __init__(self, width: int, height: int, bitdepth: int, subsampling: Subsampling, frames: int):
        self.width, self.height, self.bitdepth, self.frames = width, height, bitdepth, frames
        self.subsampling = subsampling
        self.pix_fmt = "yuv420p" if subsampling is Subsampling.S420 else "yuv444p"
        self.id = f"{width}x{height}-{bitdepth}bit-{self.pix_fmt}"

    def pictures(self):
        rng = np.random.default_rng(self.bitdepth)
        mx = (1 << self.bitdepth) - 1
        dt = np.uint8 if self.bitdepth == 8 else np.uint16
        w, h = self.width, self.height
        cw, ch = ((w + 1) // 2, (h + 1) // 2) if self.subsampling is Subsampling.S420 else (w, h)
        y, x = np.mgrid[0:h, 0:w]
        refs, dists = [], []
        for i in range(self.frames):
            ref = ((x * 5 + y * 3 + i * 17) % (mx + 1) + rng.integers(0, mx // 32 + 1, (h, w))).clip(0, mx)
            dist = (ref + rng.integers(-(i + 1) * (mx // 64), (i + 1) * (mx // 64) + 1, (h, w))).clip(0, mx)
            planes = [rng.integers(0, mx + 1, (ch, cw)).astype(dt) for _ in range(2)]
            refs.append(Picture((ref.astype(dt), *planes), self.bitdepth, self.subsampling))
            dists.append(Picture((dist.astype(dt), *[p.copy() for p in planes]), self.bitdepth, self.subsampling))
        return refs, dists


def _plan():
    return ScoringPlan.build(
        [load_model("version=vmaf_v0.6.1:vif.debug=true:adm.debug=true:motion.debug=true")],
        [FeatureRequest(f) for f in ("psnr", "float_ssim", "float_ms_ssim")])


def _scores(rt, dev, plan, pair, sizes, max_batch):
    """The engine's frames, batches of ``sizes`` (cycled) on one scorer."""
    from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, HostUploads, KernelSet

    refs, dists = pair.pictures()
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, pair.width, pair.height, pair.bitdepth, pair.subsampling,
                   max_batch=max_batch)
    fmt = PixelFormat(pair.pix_fmt)
    out = []
    try:
        with HostUploads(dev, stream) as up:
            frames = [GpuFrame(up.source(r.planes, fmt), up.source(d.planes, fmt)) for r, d in zip(refs, dists)]
            i, k = 0, 0
            while i < len(frames):
                n = sizes[k % len(sizes)]
                b = sc.enqueue(frames[i:i + n])
                b.done.synchronize()
                out += sc.complete(b)
                i, k = i + n, k + 1
            out += sc.finish()
    finally:
        sc.close()
        ks.close()
    return dict(out)


@pytest.mark.gpu
@pytest.mark.parametrize("bitdepth,subsampling", [(8, Subsampling.S420), (10, Subsampling.S444)])
def test_batches_of_changing_sizes_equal_one_size_and_the_cpu_lane(gpu, bitdepth, subsampling):
    rt, dev = gpu
    dev.make_current()
    plan = _plan()
    pair = _Pair(181, 177, bitdepth, subsampling, 9)  # float_ms_ssim's five scales need 176
    mixed = _scores(rt, dev, plan, pair, [1, 3, 2, 1, 2], max_batch=3)
    whole = _scores(rt, dev, plan, pair, [5], max_batch=5)
    ones = _scores(rt, dev, plan, pair, [1], max_batch=1)
    assert set(mixed) == set(whole) == set(ones) == set(range(pair.frames))
    for idx in mixed:
        for got in (whole[idx], ones[idx]):
            assert list(got) == list(mixed[idx])
            assert all(np.float64(got[k]).tobytes() == np.float64(v).tobytes() for k, v in mixed[idx].items()), idx
    assert not _differences(cpu_scores(plan, pair), mixed)
    assert len({m["integer_adm2"] for m in mixed.values()}) > 3 and len({m["psnr_y"] for m in mixed.values()}) > 3


@pytest.mark.gpu
def test_a_luma_only_plan_stages_and_gathers_luma_alone(gpu):
    """vmaf_v0.6.1's features read luma alone: the staging holds one plane a role and a batch
    gathers one plane a source (a third less of a 4:2:0 frame), with the scores unchanged (the
    test above scores the same model with chroma features beside it); a plan with a chroma
    feature keeps all three."""
    rt, dev = gpu
    dev.make_current()
    from vmafxd.lanes.gpu.engine import GpuScorer, KernelSet

    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    luma = ScoringPlan.build([load_model("version=vmaf_v0.6.1")], [])
    chroma = ScoringPlan.build([load_model("version=vmaf_v0.6.1")], [FeatureRequest("psnr")])
    assert luma.luma_only and not chroma.luma_only
    try:
        for plan, planes in ((luma, 1), (chroma, 3)):
            sc = GpuScorer(dev, ks, stream, plan, 181, 177, 8, Subsampling.S420, max_batch=2)
            try:
                assert len(sc.staging.shapes) == planes
                assert sc.staging.shapes[0] == (181, 177)
            finally:
                sc.close()
        pair = _Pair(181, 177, 8, Subsampling.S420, 4)
        got = _scores(rt, dev, luma, pair, [2], 2)
        assert set(got) == set(range(pair.frames))
        assert not _differences(cpu_scores(luma, pair), got)
    finally:
        stream.close()
        ks.close()
