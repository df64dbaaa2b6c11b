"""SpEED (``speed_chroma``, ``speed_temporal``) against libvmaf, and its exact arithmetic's pieces.

The vectors (``tests/data/scores/speed_libvmaf.json``, made by
``scripts/speed_libvmaf_vectors.py`` with a ``%.17g`` build of libvmaf
f85a8536 on an AVX-512 host) hold libvmaf's full doubles; every frame and
every key is compared for equality.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import json
import math

import numpy as np
import pytest

from vmafxd.core.scoring import parse_feature_spec
from vmafxd.features import get
from vmafxd.features import _speed_core as core
from vmafxd.features._speed_linalg import solve_linear_system, symmetric_eigenvalues
from vmafxd.features.declaration import OptionError
from vmafxd.features.speed_chroma import metrics_from_scores

from ..reference import VENDORED, full_pairs, vendored_pairs
from .harness import run_feature

VECTORS = json.loads((VENDORED / "scores" / "speed_libvmaf.json").read_text())
#: every pair of the full reference set, first 3 frames (run when ../shared/reference is here)
FULL_VECTORS = json.loads((VENDORED / "scores" / "speed_libvmaf_full.json").read_text())
PAIRS = {p.id: p for p in vendored_pairs()}
FULL_PAIRS = {p.id: p for p in full_pairs()}


def _feature_params():
    for case in VECTORS["features"]:
        for spec in case["features"]:
            yield pytest.param(case, spec, PAIRS[case["pair"]], id=f"{case['pair']}-{spec}")
    for case in FULL_VECTORS["features"] if FULL_PAIRS else ():
        for spec in case["features"]:
            yield pytest.param(case, spec, FULL_PAIRS[case["pair"]], id=f"full-{case['pair']}-{spec}",
                               marks=pytest.mark.reference)


@pytest.mark.parametrize("case, spec, pair", list(_feature_params()))
def test_every_frame_and_key_equals_libvmaf(case, spec, pair):
    req = parse_feature_spec(spec)
    decl = get(req.name)
    values = decl.resolve_options(req.options)
    ours = run_feature(decl, pair, req.options, frames=len(case["frames"]))
    names = list(decl.metric_names(values).values())
    checked = 0
    for i, theirs in enumerate(case["frames"]):
        for name in names:
            assert ours[i][name] == theirs[name], (i, name, ours[i][name], theirs[name])
            checked += 1
    assert checked == len(names) * len(case["frames"])


def test_the_vectors_cover_8_and_10_bit_odd_sizes_all_subsamplings_and_singular_matrices():
    pairs = {c["pair"] for c in VECTORS["features"]}
    assert {"p15_coffee720_10bit_x264crf35", "p16_chelsea641x361_x264crf35", "p17_colorwheel444_x264crf35",
            "p18_immuno422_x264crf30"} <= pairs
    # the static identical pair: equal pictures, zero temporal differences, singular matrices
    static = next(c for c in VECTORS["features"] if c["pair"] == "p11_camera_identical")
    assert all(f["speed_temporal"] == 0 for f in static["frames"])
    # non-trivial values, not only zeros
    assert any(f["speed_temporal"] > 1 for c in VECTORS["features"] for f in c["frames"] if "speed_temporal" in f)


# --- the pieces -----------------------------------------------------------------------------------

_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.fma.restype = ctypes.c_double
_LIBM.fma.argtypes = [ctypes.c_double] * 3


def test_the_emulated_fma_rounds_once_like_the_c_library():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(4000) * 10.0 ** rng.integers(-8, 8, 4000)
    b = rng.standard_normal(4000) * 10.0 ** rng.integers(-8, 8, 4000)
    # c close to -a*b: the cancellations where a separate product and sum round twice
    c = np.where(np.arange(4000) % 2 == 0, -(a * b) * (1 + 2.0 ** -40), rng.standard_normal(4000))
    ours = core.fma(a, b, c)
    theirs = np.array([_LIBM.fma(x, y, z) for x, y, z in zip(a, b, c)])
    assert np.array_equal(ours, theirs)
    # and a plain multiply-add differs somewhere, so the test can tell them apart
    assert not np.array_equal(a * b + c, theirs)


def _avx512_cov_loop(x: np.ndarray, y: np.ndarray) -> float:
    """compute_cov_kernel_avx512 written lane by lane with the C library's fma."""
    rows, cols = x.shape
    acc0, acc1, tail = [0.0] * 8, [0.0] * 8, 0.0
    for i in range(rows):
        j = 0
        while j + 15 < cols:
            for lane in range(8):
                acc0[lane] = _LIBM.fma(x[i, j + lane], y[i, j + lane], acc0[lane])
                acc1[lane] = _LIBM.fma(x[i, j + 8 + lane], y[i, j + 8 + lane], acc1[lane])
            j += 16
        while j + 7 < cols:
            for lane in range(8):
                acc0[lane] = _LIBM.fma(x[i, j + lane], y[i, j + lane], acc0[lane])
            j += 8
        while j < cols:
            tail += x[i, j] * y[i, j]
            j += 1
    acc = [p + q for p, q in zip(acc0, acc1)]
    t3 = [acc[k + 4] + acc[k] for k in range(4)]
    t6 = [t3[k + 2] + t3[k] for k in range(2)]
    return (t6[0] + t6[1]) + tail


@pytest.mark.parametrize("cols", [5, 8, 13, 16, 29, 40])
def test_covariance_sums_add_in_the_avx512_kernels_order(cols):
    rng = np.random.default_rng(cols)
    values = rng.standard_normal((4, 3, cols)) * 50
    px, py = np.array([0, 1, 3, 2]), np.array([0, 2, 1, 2])
    ours = core.covariance_sums(values, px, py)
    for p in range(4):
        assert ours[p] == _avx512_cov_loop(values[px[p]], values[py[p]])


def test_eigenvalues_and_solution_are_those_of_the_matrix():
    """The float routines agree with numpy's double ones to float accuracy (their exact bits are
    checked end to end above)."""
    rng = np.random.default_rng(3)
    m = rng.standard_normal((25, 60)).astype(np.float32)
    k = (m @ m.T / 60).astype(np.float32)
    eig = np.sort(symmetric_eigenvalues(k).astype(np.float64))
    assert np.allclose(eig, np.linalg.eigvalsh(k.astype(np.float64)), rtol=1e-4, atol=1e-5)
    b = rng.standard_normal((25, 7)).astype(np.float32)
    x = solve_linear_system(k, b)
    assert np.allclose(x, np.linalg.solve(k.astype(np.float64), b.astype(np.float64)), rtol=1e-3, atol=1e-3)


def test_chroma_scores_impute_a_singular_channel_and_clip_like_libvmafs_min():
    f32 = np.float32
    assert metrics_from_scores(f32(2.0), True, f32(3.0), False, 1000.0)["speed_chroma_uv"] == 3.0
    assert metrics_from_scores(f32(2.0), False, f32(3.0), True, 1000.0)["speed_chroma_uv"] == 2.0
    assert metrics_from_scores(f32(2.0), False, f32(3.0), False, 1000.0)["speed_chroma_uv"] == 2.5
    out = metrics_from_scores(f32(50.0), False, f32(math.nan), False, 45.0)
    assert out == {"speed_chroma_u": 45.0, "speed_chroma_v": 45.0, "speed_chroma_uv": 45.0}


# --- options --------------------------------------------------------------------------------------

def test_names_follow_libvmafs_option_suffixes():
    decl = get("speed_chroma")
    values = decl.resolve_options({"speed_sigma_nn": "0.19", "speed_nn_floor": "0.1", "speed_weight_var_mode": "5",
                                   "speed_max_val": "45", "speed_prescale": "0.5",
                                   "speed_prescale_method": "bilinear", "speed_kernelscale": "1.0"})
    assert decl.metric_names(values)["speed_chroma_uv"] == \
        "speed_chroma_uv_mxv_45_nnf_0.1_ps_0.5_psm_bilinear_snn_0.19_wvm_5"
    t = get("speed_temporal")
    assert t.metric_names(t.resolve_options({"urd": "true"})) == {"speed_temporal": "speed_temporal_urd"}


@pytest.mark.parametrize("feature, options, field", [
    ("speed_chroma", {"speed_prescale_method": "bicubic"}, "speed_chroma.speed_prescale_method"),
    ("speed_chroma", {"speed_prescale_method": "area"}, "speed_chroma.speed_prescale_method"),
    ("speed_chroma", {"speed_kernelscale": "1.9"}, "speed_chroma.speed_kernelscale"),
    ("speed_chroma", {"speed_weight_var_mode": "7"}, "speed_chroma.speed_weight_var_mode"),
    ("speed_temporal", {"speed_sigma_nn": "0.05"}, "speed_temporal.speed_sigma_nn"),
    ("speed_temporal", {"speed_prescale": "2"}, "speed_temporal.speed_prescale"),
    ("speed_temporal", {"speed_weight_var_mode": "1"}, "speed_temporal.speed_weight_var_mode"),
])
def test_bad_options_name_the_field(feature, options, field):
    with pytest.raises(OptionError) as e:
        get(feature).resolve_options(options)
    assert e.value.field == field


def test_too_small_and_grey_pictures_are_refused():
    pair = PAIRS["p01_testsrc2_x264crf35"]
    refs, dists = pair.pictures()
    with pytest.raises(ValueError, match="too small"):
        get("speed_temporal").cpu(get("speed_temporal").resolve_options(), 64, 64, 8)
    chroma = get("speed_chroma").cpu(get("speed_chroma").resolve_options(), pair.width, pair.height, 8)
    with pytest.raises(ValueError, match="chroma"):
        chroma.extract(0, _grey(refs[0]), _grey(dists[0]))


def _grey(picture):
    return dataclasses.replace(picture, planes=picture.planes[:1])
