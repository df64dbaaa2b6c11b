"""Native SpEED (vmafxd/lanes/native/speed.cpp) against libvmaf's vectors and the numpy twins.

Every case of tests/data/scores/speed_libvmaf.json (the weighting modes 1-6,
nearest and bilinear prescales up and down, kernel scales, sigma and floor,
``speed_use_ref_diff``, 8 and 10 bits, 4:2:0/4:2:2/4:4:4, the identical static
pair's singular matrices) runs through the native extractors and must equal
libvmaf's doubles on every frame and key; synthetic pictures (the smallest
planes, odd sizes, 12 and 16 bits, strided planes, one singular channel,
constant pictures) must give the twins' metrics cell by cell.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.core.scoring import parse_feature_spec
from vmafxd.features import _speed_core as core
from vmafxd.features import get

from ..features.harness import run_feature
from ..reference import VENDORED, vendored_pairs
from .conftest import load_runtime

VECTORS = json.loads((VENDORED / "scores" / "speed_libvmaf.json").read_text())
PAIRS = {p.id: p for p in vendored_pairs()}


@pytest.fixture(scope="module")
def native():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import speed

    return {"speed_chroma": speed.SpeedChroma, "speed_temporal": speed.SpeedTemporal}


def _cases():
    for case in VECTORS["features"]:
        for spec in case["features"]:
            yield pytest.param(case, spec, id=f"{case['pair']}-{spec}")


@pytest.mark.parametrize("case, spec", list(_cases()))
def test_every_libvmaf_vector_frame_and_key(native, case, spec):
    req = parse_feature_spec(spec)
    decl = get(req.name)
    values = decl.resolve_options(req.options)
    ours = run_feature(dataclasses.replace(decl, cpu=native[req.name]), PAIRS[case["pair"]], req.options,
                       frames=len(case["frames"]))
    names = list(decl.metric_names(values).values())
    for i, theirs in enumerate(case["frames"]):
        for name in names:
            assert ours[i][name] == theirs[name], (i, name, ours[i][name], theirs[name])


@pytest.mark.parametrize("size, options", [
    ((651, 333), {}),  # 40 x 20 at 1/16: 36 columns a row (two blocks of 16, a tail of 4)
    ((1000, 300), {"speed_prescale": "0.6", "speed_prescale_method": "bilinear"}),  # 31: 16, 8, tail 7
    ((1040, 420), {"speed_kernelscale": "0.5"}),  # 65 x 26: 61 columns (three of 16, one of 8, tail 5)
    ((555, 500), {"speed_prescale": "0.5"}),  # nearest: 17 x 15, 11 columns (one of 8, tail 3)
])
def test_the_covariance_sums_are_the_twins_to_the_last_bit(native, size, options):
    """The double sums themselves (the float covariances hide most last-bit differences of the fused
    multiply-adds' order), on float pictures with many distinct values."""
    from vmafxd.lanes.native.speed import _Context

    w, h = size
    values = get("speed_chroma").resolve_options(options)
    g = core.geometry(w, h, float(values["speed_prescale"]))
    ctx = _Context(g, values, 0)
    rng = np.random.default_rng(w)
    for _ in range(3):
        pic = (rng.standard_normal((h, w)) * 40).astype(np.float32)
        want = core.picture_sums([core.downscale(pic, g, values)], g)[0]
        assert np.array_equal(ctx.picture_sums(pic), want)


# --- synthetic pictures against the twins ----------------------------------------------------------

def _plane(rng, h, w, bitdepth, kind):
    top = (1 << bitdepth) - 1
    dtype = np.uint8 if bitdepth == 8 else np.uint16
    if kind == "flat":
        return np.full((h, w), top // 3, dtype)
    # random tiles of 9 x 11 samples plus noise: structure that survives the decimation by 16
    tiles = rng.random((h // 9 + 1, w // 11 + 1))
    base = np.repeat(np.repeat(tiles, 9, axis=0), 11, axis=1)[:h, :w]
    noise = rng.random((h, w)) * 0.2
    return np.clip((base * 0.8 + noise) * top, 0, top).astype(dtype)


def _picture(rng, w, h, bitdepth, sub, kinds=("noise", "noise", "noise"), strided=False):
    sx, sy = sub.value
    shapes = [(h, w), (h >> sy, w >> sx), (h >> sy, w >> sx)]
    planes = []
    for (ph, pw), kind in zip(shapes, kinds):
        p = _plane(rng, ph, pw, bitdepth, kind)
        if strided:  # a view into wider rows, as a mapped buffer gives
            wide = np.zeros((ph, pw + 13), p.dtype)
            wide[:, 3:3 + pw] = p
            p = wide[:, 3:3 + pw]
        planes.append(p)
    return Picture(tuple(planes), bitdepth, sub)


def _both(native, feature, options, w, h, bitdepth, refs, dists):
    decl = get(feature)
    values = decl.resolve_options(options)
    twin = decl.cpu(values, w, h, bitdepth)
    nat = native[feature](values, w, h, bitdepth)
    want, got = [], []
    for i, (r, d) in enumerate(zip(refs, dists)):
        want += twin.extract(i, r, d)
        got += nat.extract(i, r, d)
    return want, got


_CHROMA = [
    # (luma size, subsampling, bit depth, options); a 25 x 25 covariance needs 3 x 3 blocks (chroma
    # planes of 240 x 240 after the prescale) to be regular
    ((176, 160), Subsampling.S420, 8, {}),  # chroma 88x80: one 5x5 block, 1 x 1 sums: singular
    ((251, 243), Subsampling.S444, 10, {"speed_weight_var_mode": "3"}),
    ((490, 250), Subsampling.S422, 12, {"speed_weight_var_mode": "4", "speed_kernelscale": "3.7113401889801025"}),
    ((500, 490), Subsampling.S420, 16, {"speed_weight_var_mode": "6", "speed_sigma_nn": "1.3"}),
    ((700, 700), Subsampling.S420, 8, {"speed_prescale": "0.7", "speed_kernelscale": "0.5",
                                       "speed_weight_var_mode": "1"}),
    ((300, 300), Subsampling.S420, 10, {"speed_prescale": "1.7", "speed_prescale_method": "bilinear",
                                        "speed_weight_var_mode": "2", "speed_nn_floor": "0.4"}),
    ((445, 440), Subsampling.S444, 8, {"speed_prescale": "0.55", "speed_prescale_method": "bilinear",
                                       "speed_weight_var_mode": "5", "speed_max_val": "3"}),
]


@pytest.mark.parametrize("size, sub, bitdepth, options", _CHROMA,
                         ids=[f"{s[0]}x{s[1]}-{b}bit-{o}" for s, _, b, o in _CHROMA])
def test_chroma_equals_the_twin(native, size, sub, bitdepth, options):
    rng = np.random.default_rng(sum(size) + bitdepth)
    w, h = size
    refs = [_picture(rng, w, h, bitdepth, sub, strided=i == 1) for i in range(2)]
    dists = [_picture(rng, w, h, bitdepth, sub) for _ in range(2)]
    want, got = _both(native, "speed_chroma", options, w, h, bitdepth, refs, dists)
    assert got == want
    assert all(m["speed_chroma_uv"] != 0 for _, m in got) or size == (176, 160)


def test_a_singular_channel_is_imputed_and_flat_pictures_score_like_the_twin(native):
    rng = np.random.default_rng(7)
    w, h, sub = 496, 480, Subsampling.S420
    # frame 0: the reference's Cb is flat (singular) and the distorted one is not: u scores 0, uv is v;
    # frame 1: both Cr flat (both singular); frame 2: everything flat
    refs = [_picture(rng, w, h, 8, sub, ("noise", "flat", "noise")),
            _picture(rng, w, h, 8, sub, ("noise", "noise", "flat")),
            _picture(rng, w, h, 8, sub, ("flat", "flat", "flat"))]
    dists = [_picture(rng, w, h, 8, sub),
             _picture(rng, w, h, 8, sub, ("noise", "noise", "flat")),
             _picture(rng, w, h, 8, sub, ("flat", "flat", "flat"))]
    want, got = _both(native, "speed_chroma", {}, w, h, 8, refs, dists)
    assert got == want
    first = got[0][1]
    assert first["speed_chroma_u"] == 0 and first["speed_chroma_uv"] == first["speed_chroma_v"] != 0


_TEMPORAL = [
    ((160, 96), 8, {}),  # 10 x 6 at 1/16: two blocks, singular
    ((333, 250), 10, {"speed_use_ref_diff": "true", "speed_sigma_nn": "0.5"}),
    ((410, 400), 12, {"speed_prescale": "0.6", "speed_prescale_method": "bilinear", "speed_nn_floor": "0.3"}),
    ((320, 300), 16, {"speed_kernelscale": "1.5", "speed_prescale": "0.8"}),
]


@pytest.mark.parametrize("size, bitdepth, options", _TEMPORAL,
                         ids=[f"{s[0]}x{s[1]}-{b}bit-{o}" for s, b, o in _TEMPORAL])
def test_temporal_equals_the_twin(native, size, bitdepth, options):
    rng = np.random.default_rng(size[0] + bitdepth)
    w, h = size
    refs = [_picture(rng, w, h, bitdepth, Subsampling.S420, strided=i == 2) for i in range(4)]
    dists = [_picture(rng, w, h, bitdepth, Subsampling.S420) for _ in range(4)]
    refs[3] = refs[2]  # a static reference: zero differences, a singular matrix
    want, got = _both(native, "speed_temporal", options, w, h, bitdepth, refs, dists)
    assert got == want
    assert got[0][1]["speed_temporal"] == 0 and (got[1][1]["speed_temporal"] > 0 or size == (160, 96))


def test_errors_are_the_twins_or_name_the_plane(native):
    decl = get("speed_temporal")
    with pytest.raises(ValueError, match="too small"):
        native["speed_temporal"](decl.resolve_options(), 64, 64, 8)
    rng = np.random.default_rng(1)
    pic = _picture(rng, 176, 160, 8, Subsampling.S420)
    chroma = native["speed_chroma"](get("speed_chroma").resolve_options(), 176, 160, 8)
    with pytest.raises(ValueError, match="chroma"):
        chroma.extract(0, dataclasses.replace(pic, planes=pic.planes[:1]), pic)
    temporal = native["speed_temporal"](decl.resolve_options(), 176, 160, 8)
    bad = dataclasses.replace(pic, planes=(pic.planes[0].astype(np.int32),) + pic.planes[1:])
    with pytest.raises(TypeError, match="reference's luma"):
        temporal.extract(0, bad, pic)
