"""SpEED's kernels (speed.cu) against the CPU twins: equal on every frame, bit for bit.

Runs on every GPU runtime with a device and on the emulator (the same kernel
source compiled by g++).  The pairs cover 8 and 10 bits, the odd 641x361
size, 4:2:0, 4:2:2 and 4:4:4 and the identical static pair (singular
matrices); batches of 3 frames make ``speed_temporal``'s previous frame cross
batch boundaries.  The CPU twins equal libvmaf (tests/features/test_speed.py),
so equality here is equality with libvmaf.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.gpu.engine import GpuScorer, GpuUnsupported, KernelSet
from vmafxd.model import load_model

from ..reference import vendored_pairs
from .test_float_kernels import _check

PAIRS = {p.id: p for p in vendored_pairs()}


@pytest.mark.gpu
@pytest.mark.parametrize("pair_id", ["p16_chelsea641x361_x264crf35", "p15_coffee720_10bit_x264crf35",
                                     "p17_colorwheel444_x264crf35", "p18_immuno422_x264crf30",
                                     "p11_camera_identical"])
def test_speed_features_equal_the_cpu_lane(gpu, pair_id):
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest("speed_chroma"), FeatureRequest("speed_temporal")])
    cpu = _check(rt, dev, plan, PAIRS[pair_id])
    assert {"speed_chroma_uv", "speed_temporal"} <= set(cpu[min(cpu)])


@pytest.mark.gpu
@pytest.mark.parametrize("requests", [
    [("speed_chroma", {"speed_prescale": "0.7", "speed_kernelscale": "0.5", "speed_weight_var_mode": "3"}),
     ("speed_temporal", {"speed_use_ref_diff": "true", "speed_prescale": "0.6",
                         "speed_prescale_method": "bilinear"})],
    [("speed_chroma", {"speed_prescale": "1.5", "speed_prescale_method": "bilinear", "speed_kernelscale": "2"}),
     ("speed_temporal", {"speed_kernelscale": "1.5", "speed_nn_floor": "0.3"})],
], ids=["nearest-down-bilinear-down", "bilinear-up-kernelscales"])
def test_options_on_the_gpu_equal_the_cpu_lane(gpu, requests):
    rt, dev = gpu
    plan = ScoringPlan.build([], [FeatureRequest(n, o) for n, o in requests])
    _check(rt, dev, plan, PAIRS["p15_coffee720_10bit_x264crf35"])


@pytest.mark.gpu
def test_a_v1_0_16_model_on_the_gpu_equals_the_cpu_lane(gpu):
    rt, dev = gpu
    plan = ScoringPlan.build([load_model("version=vmaf_v1.0.16_5d0h")], [])
    cpu = _check(rt, dev, plan, PAIRS["p15_coffee720_10bit_x264crf35"], batch=2)
    assert "vmaf" in cpu[0]


@pytest.mark.gpu
def test_grey_pictures_are_refused_naming_the_format(gpu):
    rt, dev = gpu
    dev.make_current()
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    try:
        plan = ScoringPlan.build([], [FeatureRequest("speed_chroma")])
        with pytest.raises(GpuUnsupported) as e:
            GpuScorer(dev, ks, stream, plan, 576, 324, 8, Subsampling.S400, max_batch=2)
        assert e.value.field == "format.pixel_format"
    finally:
        ks.close()


@pytest.mark.gpu
@pytest.mark.parametrize("pair_id", ["p15_coffee720_10bit_x264crf35", "p16_chelsea641x361_x264crf35"])
def test_the_statistics_are_the_cpu_twins_bit_for_bit(gpu, pair_id):
    """Stricter than the scores: each picture at the operating size and each of its 325
    covariance sums (where a plain multiply-add instead of libvmaf's fused one would show)."""
    from vmafx.formats import PixelFormat
    from vmafxd.features import _speed_core as core
    from vmafxd.features._float_common import to_float_plane
    from vmafxd.lanes.gpu.engine import GpuFrame, HostUploads

    rt, dev = gpu
    dev.make_current()
    pair = PAIRS[pair_id]
    refs, dists = pair.pictures()
    n = min(3, len(refs))
    refs, dists = refs[:n], dists[:n]
    plan = ScoringPlan.build([], [FeatureRequest("speed_chroma"), FeatureRequest("speed_temporal")])
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    sc = GpuScorer(dev, ks, stream, plan, pair.width, pair.height, pair.bitdepth, refs[0].subsampling, max_batch=3)
    try:
        fmt = PixelFormat(pair.pix_fmt)
        with HostUploads(dev, stream) as up:
            batch = sc.enqueue([GpuFrame(up.source(r.planes, fmt), up.source(d.planes, fmt))
                                for r, d in zip(refs, dists)])
            batch.done.synchronize()
            stats = batch.stats.copy()
            sc.complete(batch)
        for twin in sc.twins:
            g = twin.geometry
            th, tw = g.truncated
            for f in range(1 if twin.is_temporal else 0, n):
                if twin.is_temporal:
                    def fl(p):
                        return to_float_plane(p.luma, pair.bitdepth)
                    cur_dis = fl(refs[f]) if twin.values["speed_use_ref_diff"] else fl(dists[f])
                    planes = [fl(refs[f - 1]) - fl(refs[f]), fl(dists[f - 1]) - cur_dis]
                else:
                    planes = [to_float_plane(pic.planes[c], pair.bitdepth) for c in (1, 2)
                              for pic in (refs[f], dists[f])]
                with np.errstate(all="ignore"):
                    small = [core.downscale(p, g, twin.values) for p in planes]
                    sums = core.picture_sums(small, g)
                rec = stats[f, twin.stats_offset:twin.stats_offset + twin.stats_bytes]
                pics = rec[:twin.pics * th * tw * 4].view(np.float32).reshape(twin.pics, th, tw)
                assert np.array_equal(pics, np.stack([s[:th, :tw] for s in small])), (twin.is_temporal, f)
                got = rec[twin.pic_bytes:].view(np.float64).reshape(twin.pics, core.PAIRS)
                assert np.array_equal(got, sums), (twin.is_temporal, f)
    finally:
        sc.close()
        ks.close()
