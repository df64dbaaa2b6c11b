"""Native integer VIF (vmafxd/lanes/native/vif.cpp) against libvmaf's scores and the numpy twin.

Every vendored pair runs through the native extractor with ``debug`` (every
scale's num and den) and with ``vif_enhn_gain_limit=1`` and must equal libvmaf's
full-precision values as the twin does (tests/features/test_vif.py); synthetic
pictures (the smallest and odd sizes, 8-16 bits, full-range extremes that reach
the 32-bit bounds of the sums, flat and enhanced pictures, strided planes, every
option) must give the twin's integer statistics cell by cell.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.features import vif as twin
from vmafxd.features import get

from ..features.harness import compare, run_feature
from ..features.test_vif import _synthetic
from ..reference import vendored_pairs
from .conftest import load_runtime

DECL = get("vif")
ALL_NAMES = list(DECL.provides) + list(DECL.debug_provides)


@pytest.fixture(scope="module")
def native():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import vif

    return vif


@pytest.fixture
def isas(native):
    """The instruction sets the CPU has (the best one in use again afterwards)."""
    best = native.use_isa("avx512")
    yield native.ISAS[: native.ISAS.index(best) + 1]
    native.use_isa("avx512")


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_every_vendored_pair_matches_libvmaf(native, pair):
    decl = dataclasses.replace(DECL, cpu=native.Vif)
    ours = run_feature(decl, pair, {"debug": True})
    errors = compare(ours, pair, "vmaf_v0.6.1", ALL_NAMES, exact=True)
    assert not errors, "\n".join(errors[:20])
    ours = run_feature(decl, pair, {"vif_enhn_gain_limit": 1.0})
    errors = compare(ours, pair, "vmaf_v0.6.1neg", [n + "_egl_1" for n in DECL.provides], exact=True)
    assert not errors, "\n".join(errors[:20])


_OPTIONS = [
    {},
    {"vif_enhn_gain_limit": 1.0},
    {"vif_enhn_gain_limit": 1.7, "vif_skip_scale0": True},
]


@pytest.mark.parametrize("kind, h, w, bitdepth", [
    ("noise", 16, 16, 8),  # the smallest picture: 2 x 2 at scale 3
    ("noise", 37, 45, 8),
    ("smooth", 48, 41, 8),  # an enhanced contrast: gains above 1
    ("extremes", 35, 34, 8),  # full-range checkerboards: the largest moments
    ("flat", 24, 33, 8),
    ("noise", 33, 40, 9),
    ("noise", 33, 40, 10),
    ("smooth", 40, 35, 12),
    ("extremes", 32, 27, 16),
    ("extremes", 17, 19, 12),
    ("noise", 20, 18, 16),
    ("smooth", 67, 131, 16),
])
def test_statistics_equal_the_twins(native, isas, kind, h, w, bitdepth):
    """On every instruction set of vif.cpp the CPU has (the vector loops of 8 or 16 lanes, their
    scalar tails: widths on both sides of a multiple of 16)."""
    ref, dist = _synthetic(kind, h, w, bitdepth, seed=h * w)
    for options in _OPTIONS:
        ctx = native._Context(w, h, bitdepth, float(options.get("vif_enhn_gain_limit", 100.0)),
                              bool(options.get("vif_skip_scale0", False)))
        want = twin.compute_stats(ref, dist, bitdepth, options).to_array()
        for isa in isas:
            native.use_isa(isa)
            got = ctx.frame((ref, w), (dist, w))
            assert np.array_equal(got, want), (isa, options, got, want)
        assert got[:, :2].any() or kind in ("flat", "extremes")  # some scale in the log branch


@pytest.mark.parametrize("bitdepth", [8, 10])
def test_a_large_picture_equals_the_twin(native, isas, bitdepth):
    """Rows of many vector blocks, all four scales many rows tall, on every instruction set."""
    ref, dist = _synthetic("smooth", 270, 487, bitdepth, seed=5)
    want = twin.compute_stats(ref, dist, bitdepth, {}).to_array()
    ctx = native._Context(487, 270, bitdepth, 100.0, False)
    for isa in isas:
        native.use_isa(isa)
        assert np.array_equal(ctx.frame((ref, 487), (dist, 487)), want), isa


def _picture(luma: np.ndarray, bitdepth: int) -> Picture:
    h, w = luma.shape
    chroma = np.zeros((h // 2, w // 2), luma.dtype)
    return Picture((luma, chroma, chroma), bitdepth, Subsampling.S420)


@pytest.mark.parametrize("options", [{"debug": True}, {"debug": True, "vif_skip_scale0": True}])
def test_metrics_and_strided_planes_equal_the_twins(native, options):
    ref, dist = _synthetic("smooth", 70, 90, 10, seed=3)
    wide = np.zeros((70, 200), np.uint16)
    wide[:, 7:97] = ref
    values = DECL.resolve_options(options)
    tw, nat = DECL.cpu(values, 90, 70, 10), native.Vif(values, 90, 70, 10)
    frames = [(_picture(wide[:, 7:97], 10), _picture(dist, 10)), (_picture(dist, 10), _picture(ref, 10))]
    for i, (r, d) in enumerate(frames):
        assert nat.extract(i, r, d) == tw.extract(i, r, d)
    assert nat.flush() == []


def test_errors_are_the_twins_or_name_the_plane(native):
    values = DECL.resolve_options({})
    with pytest.raises(ValueError, match="too small"):
        native.Vif(values, 15, 64, 8)
    with pytest.raises(ValueError, match="bit depth"):
        native.Vif(values, 64, 64, 17)
    ref, dist = _synthetic("noise", 32, 32, 8)
    nat = native.Vif(values, 32, 32, 8)
    with pytest.raises(TypeError, match="reference's luma"):
        nat.extract(0, _picture(ref.astype(np.int32), 8), _picture(dist, 8))
    with pytest.raises(ValueError, match="distorted luma"):
        nat.extract(0, _picture(ref, 8), _picture(dist[:, :31], 8))
    with pytest.raises(TypeError, match="differ in type"):
        nat.extract(0, _picture(ref, 8), _picture(dist.astype(np.uint16), 8))
