"""CAMBI on the GPU lane (cambi.cu) against its CPU twin: equal bit for bit on every frame.

The vendored pairs (8 and 10 bits, odd sizes, 4:2:0/4:2:2/4:4:4) with the
default options, the options that change the device's work (full-reference
mode, contrast range, top-k, encode size and bit depth, EOTF and visibility
threshold, the high-resolution speed-up), on each runtime the `gpu` fixture
finds (the emulator always).
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.lanes.gpu.engine import GpuUnsupported
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from ..reference import full_pairs, vendored_pairs
from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu


def _plan(options=None):
    return ScoringPlan.build([], [FeatureRequest("cambi", options or {})])


def _assert_equal(cpu, gpu):
    assert set(gpu) == set(cpu)
    diffs = [(i, k, v, gpu[i].get(k)) for i, m in cpu.items() for k, v in m.items() if gpu[i].get(k) != v]
    assert not diffs, f"{len(diffs)} values differ, e.g. {diffs[:4]}"


@pytest.mark.parametrize("pair", vendored_pairs() + full_pairs(), ids=lambda p: p.id)
def test_gpu_cambi_equals_cpu_twin(gpu, pair):
    rt, dev = gpu
    if rt.name == "emu" and pair not in vendored_pairs():
        pytest.skip("the emulator runs the vendored pairs only")
    dev.make_current()
    plan = _plan()
    cpu = cpu_scores(plan, pair)
    if pair.id.startswith(("p01", "p15", "p16")):  # banding there: a zero kernel would not pass
        assert all(m["cambi"] > 0 for m in cpu.values())
    _assert_equal(cpu, gpu_scores(rt, dev, plan, pair, batch=3))


OPTION_SETS = [
    {"full_ref": True, "max_log_contrast": 3, "topk": 0.3},
    {"enc_width": 288, "enc_height": 162, "enc_bitdepth": 10, "max_log_contrast": 0},
    {"eotf": "pq", "cambi_vis_lum_threshold": 10.0, "window_size": 40, "cambi_max_val": 0.5},
    {"full_ref": True, "src_width": 480, "src_height": 270, "tvi_threshold": 0.05, "max_log_contrast": 1},
]


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_gpu_cambi_options(gpu, options):
    rt, dev = gpu
    dev.make_current()
    pair = next(p for p in vendored_pairs() if p.id.startswith("p13"))
    plan = _plan(options)
    cpu = cpu_scores(plan, pair)
    if options.get("full_ref"):
        assert all("cambi_full_reference" in m for m in cpu.values())
    _assert_equal(cpu, gpu_scores(rt, dev, plan, pair, batch=2))


class _Synthetic:
    """Just enough of tests.reference.Pair for gpu_scores / cpu_scores."""

    def __init__(self, width, height, bitdepth, pictures):
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self.pix_fmt = "yuv420p"  # planar; the bit depth travels separately
        self.id = f"synthetic{width}x{height}"
        self._pics = pictures

    def pictures(self):
        return self._pics, self._pics


def _banded(w, h, bitdepth, seed):
    """Smooth gradients quantised into bands, a noisy patch, flat areas: CAMBI's material."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    peak = (1 << bitdepth) - 1
    img = peak * (0.15 + 0.25 * x / w + 0.1 * y / h)
    img = np.floor(img / (4 << (bitdepth - 8))) * (4 << (bitdepth - 8))  # bands
    img[h // 3: h // 2, w // 4: w // 2] += rng.normal(0, 0.03 * peak, (h // 2 - h // 3, w // 2 - w // 4))
    luma = np.clip(np.rint(img), 0, peak).astype(np.uint8 if bitdepth == 8 else np.uint16)
    cw, ch = (w + 1) // 2, (h + 1) // 2
    chroma = np.full((ch, cw), 1 << (bitdepth - 1), luma.dtype)
    return Picture((luma, chroma, chroma.copy()), bitdepth, Subsampling.S420)


@pytest.mark.parametrize("w,h,bitdepth,options", [
    (333, 217, 10, {}),
    (301, 240, 12, {"enc_bitdepth": 8}),
    (240, 219, 16, {}),
    (1920, 1080, 8, {"cambi_high_res_speedup": 1080}),
], ids=["odd-10bit", "12bit-antidither", "16bit", "1080p-speedup"])
def test_gpu_cambi_synthetic(gpu, w, h, bitdepth, options):
    rt, dev = gpu
    dev.make_current()
    pair = _Synthetic(w, h, bitdepth, [_banded(w, h, bitdepth, s) for s in range(2)])
    plan = _plan(options)
    cpu = cpu_scores(plan, pair)
    name = plan.instances[0].names["cambi"]
    assert all(m[name] > 0 for m in cpu.values())
    _assert_equal(cpu, gpu_scores(rt, dev, plan, pair, batch=2))


def test_heatmaps_stay_on_the_cpu_lane(gpu, tmp_path):
    rt, dev = gpu
    dev.make_current()
    pair = next(p for p in vendored_pairs() if p.id.startswith("p13"))
    with pytest.raises(GpuUnsupported) as exc:
        gpu_scores(rt, dev, _plan({"heatmaps_path": str(tmp_path)}), pair)
    assert exc.value.field == "feature.cambi.heatmaps_path"
