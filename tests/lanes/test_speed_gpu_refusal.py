"""SpEED has no GPU kernel yet: the GPU engine refuses it, and the v1.0.16 models that need it,
with a typed error naming the feature (the daemon answers E_NOTSUP/E_INVAL naming it)."""

import pytest

from vmafx.formats import Subsampling
from vmafxd.core.scoring import FeatureRequest, ScoringPlan
from vmafxd.lanes.gpu.engine import GpuScorer, GpuUnsupported, KernelSet
from vmafxd.model import load_model


@pytest.mark.parametrize("models, requests, field", [
    ([], [FeatureRequest("speed_chroma")], "feature.speed_chroma"),
    ([], [FeatureRequest("speed_temporal", {"speed_use_ref_diff": "true"})], "feature.speed_temporal"),
    (["vmaf_v1.0.16_3d0h"], [], "feature.speed_chroma"),
])
def test_the_gpu_engine_names_the_feature_it_lacks(gpu, models, requests, field):
    rt, dev = gpu
    dev.make_current()
    plan = ScoringPlan.build([load_model(f"version={v}") for v in models], requests)
    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    try:
        with pytest.raises(GpuUnsupported) as e:
            GpuScorer(dev, ks, stream, plan, 576, 324, 8, Subsampling.S420, max_batch=2)
        assert e.value.field == field
        assert "has no GPU kernel" in e.value.reason
    finally:
        ks.close()
