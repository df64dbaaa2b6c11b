"""Float ADM against libvmaf (every frame, full precision), its reciprocal estimate, and its options."""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.features import get
from vmafxd.features import _float_adm_core as core
from vmafxd.features._float_common import to_float_plane
from vmafxd.features._rcp import RCP_MANTISSA, divs, rcp_estimate
from vmafxd.features.declaration import OptionError
from vmafxd.features.float_adm import (
    DECLARATION,
    FloatAdm,
    compute_stats,
    metrics_from_scale_sums,
    metrics_from_stats,
    scale_sums,
    scale_sums_batch,
)

from ..reference import pair_params
from .harness import compare, compare_pooled, run_feature

ALL_NAMES = list(DECLARATION.provides) + list(DECLARATION.debug_provides)
F32 = np.float32


@pytest.mark.parametrize("pair", pair_params())
def test_debug_run_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair, {"debug": True})
    errors = compare(ours, pair, "vmaf_v0.6.1", ALL_NAMES, exact=True)
    errors += compare_pooled(ours, pair, "vmaf_v0.6.1", ALL_NAMES)
    assert not errors, "\n".join(errors[:20])


# --- the SSE reciprocal estimate ---------------------------------------------------


def test_rcp_estimate_known_values():
    # read off _mm_rcp_ss on an Intel Xeon
    x = np.array([1.0, 1.5, -1.5, 2.0, 0.0, 1e-40, 3e38], dtype=F32)
    got = rcp_estimate(x).view(np.uint32)
    assert got[0] == 0x3F7FF000
    assert got[1] == 0x3F2AA000 and got[2] == 0xBF2AA000  # +-0x1.554p-1
    assert got[3] == 0x3EFFF000
    assert got[4] == 0x7F800000 and got[5] == 0x7F800000  # zero and subnormal: +inf
    assert got[6] == 0                                      # underflow flushes to zero
    assert RCP_MANTISSA.size == 2048 and int(RCP_MANTISSA.max()) < 4096


def test_divs_is_close_to_division_but_not_division():
    rng = np.random.default_rng(0)
    n = rng.standard_normal(10000).astype(F32)
    d = (rng.standard_normal(10000) * 100).astype(F32)
    q = divs(n, d)
    rel = np.abs(q.astype(np.float64) / (n.astype(np.float64) / d) - 1)
    assert rel.max() < 1e-6
    assert np.any(q != n / d)  # one Newton step: not the correctly rounded quotient


# --- the DWT against direct loops ----------------------------------------------------


def _slow_dwt(src):
    h, w = src.shape
    lo = [F32(v) for v in (0.482962913144690, 0.836516303737469, 0.224143868041857, -0.129409522550921)]
    hi = [F32(v) for v in (-0.129409522550921, -0.224143868041857, 0.836516303737469, -0.482962913144690)]

    def idx(n, i):
        out = []
        for k in (2 * i - 1, 2 * i, 2 * i + 1, 2 * i + 2):
            k = -k if k < 0 else k
            out.append(2 * n - k - 1 if k >= n else k)
        return out

    def fir(vals, taps):
        acc = F32(0.0)
        for t, v in zip(taps, vals):
            acc = acc + t * v
        return acc

    oh, ow = (h + 1) // 2, (w + 1) // 2
    bands = {k: np.zeros((oh, ow), F32) for k in "avhd"}
    for i in range(oh):
        rows = idx(h, i)
        tlo = [fir([src[r, j] for r in rows], lo) for j in range(w)]
        thi = [fir([src[r, j] for r in rows], hi) for j in range(w)]
        for j in range(ow):
            cols = idx(w, j)
            bands["a"][i, j] = fir([tlo[c] for c in cols], lo)
            bands["v"][i, j] = fir([tlo[c] for c in cols], hi)
            bands["h"][i, j] = fir([thi[c] for c in cols], lo)
            bands["d"][i, j] = fir([thi[c] for c in cols], hi)
    return bands["a"], bands["v"], bands["h"], bands["d"]


@pytest.mark.parametrize("shape", [(9, 12), (10, 13)])
def test_dwt_matches_c_loops(shape):
    rng = np.random.default_rng(sum(shape))
    src = to_float_plane(rng.integers(0, 256, shape, dtype=np.uint8), 8)
    for ours, slow in zip(core.dwt2(src), _slow_dwt(src)):
        assert np.array_equal(ours, slow)


# --- scores and options ----------------------------------------------------------------


def _pictures(seed, shape=(72, 88)):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    noise = rng.integers(-6, 7, shape)
    b = np.clip(a.astype(int) + noise, 0, 255).astype(np.uint8)
    return to_float_plane(a, 8), to_float_plane(b, 8)


def test_identical_pictures():
    a, _ = _pictures(1)
    opts = DECLARATION.resolve_options()
    m = metrics_from_stats(compute_stats(a, a.copy(), opts), 88, 72, opts)
    assert m["adm2"] == pytest.approx(1.0, abs=1e-6)
    assert m["aim"] == 0.0
    assert m["adm3"] == pytest.approx(0.5 * m["adm2"] + 0.5, abs=1e-12)


def test_options_change_the_arithmetic():
    a, b = _pictures(2)
    base = DECLARATION.resolve_options()
    m0 = metrics_from_stats(compute_stats(a, b, base), 88, 72, base)
    hm = DECLARATION.resolve_options({"adm_adm3_apply_hm": True})
    m1 = metrics_from_stats(compute_stats(a, b, hm), 88, 72, hm)
    assert m1["adm2"] == m0["adm2"]
    assert m1["adm3"] == pytest.approx(2 * m0["adm2"] * m0["aim"] / (m0["adm2"] + m0["aim"]))
    skip = DECLARATION.resolve_options({"adm_skip_scale0": True})
    m2 = metrics_from_stats(compute_stats(a, b, skip), 88, 72, skip)
    assert m2["adm_scale0"] == 0.0 and m2["adm_num_scale0"] == 0.0
    assert m2["adm_den_scale0"] == float(F32(1e-10))
    assert m2["adm_scale1"] == m0["adm_scale1"]
    egl = DECLARATION.resolve_options({"adm_enhn_gain_limit": 1.0})
    m3 = metrics_from_stats(compute_stats(a, b, egl), 88, 72, egl)
    assert m3["adm2"] <= m0["adm2"]
    f1 = DECLARATION.resolve_options({"adm_f1s0": 0.5, "adm_f2s0": 0.25})
    assert core.rfactors(0, f1) == (F32(0.5), F32(0.5), F32(0.25))
    native = DECLARATION.resolve_options({"adm_csf_mode": 2})
    h, _, d = core.rfactors(0, native)
    assert h != core.rfactors(0, base)[0] and d < h  # the oblique effect lowers the diagonal weight


def test_skip_aim_scale_leaves_that_scale_out_of_aim():
    a, b = _pictures(3)
    opts = DECLARATION.resolve_options({"adm_skip_aim_scale": 0})
    acc = compute_stats(a, b, opts)
    m = metrics_from_stats(acc, 88, 72, opts)
    stats = scale_sums(acc, 88, 72, opts)
    expect = min(stats[1:, 2].sum() / stats[1:, 1].sum(), 1.0)
    assert m["aim"] == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize(
    "key, value, field",
    [
        ("adm_enhn_gain_limit", 0.5, "float_adm.adm_enhn_gain_limit"),
        ("adm_csf_mode", 10, "float_adm.adm_csf_mode"),
        ("adm_skip_aim_scale", 4, "float_adm.adm_skip_aim_scale"),
        ("adm_f1s2", 11, "float_adm.adm_f1s2"),
        ("bogus", 1, "float_adm.bogus"),
    ],
)
def test_option_errors_name_the_field(key, value, field):
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options({key: value})
    assert e.value.field == field


def test_names_and_registration():
    assert get("float_adm") is DECLARATION
    values = DECLARATION.resolve_options({"egl": 1})
    assert DECLARATION.metric_names(values)["adm2"] == "adm2_egl_1"
    assert "adm_num" not in DECLARATION.metric_names(DECLARATION.resolve_options())


def test_tiny_frames_are_refused():
    with pytest.raises(ValueError, match="at least"):
        FloatAdm(DECLARATION.resolve_options(), 16, 40, 8)


@pytest.mark.parametrize("overrides", [{}, {"adm_skip_scale0": True, "adm_noise_weight": 0.1}])
def test_scale_sums_of_a_batch_equal_each_frames_finish(overrides):
    """scale_sums_batch (the GPU twin's host step for a whole batch) against
    core.finish frame by frame: accumulators over ten decades and zeros, bit for bit."""
    opts = DECLARATION.with_defaults(overrides)
    rng = np.random.default_rng(9)
    accs = (np.abs(rng.normal(size=(12, 4, 9))) * 10.0 ** rng.uniform(-4, 6, (12, 4, 9))).astype(np.float32)
    accs[3] = 0.0
    got = scale_sums_batch(accs, 200, 120, opts)
    nw, p = float(opts["adm_noise_weight"]), float(opts["adm_p_norm"])
    for i in range(12):
        for s, (w, h) in enumerate(core.band_sizes(200, 120)):
            if s == 0 and overrides:
                want = (0.0, float(np.float32(1e-10)), 0.0)
            else:
                a = accs[i, s]
                want = (float(core.finish(a[0:3], w, h, nw, p)), float(core.finish(a[3:6], w, h, nw, p)),
                        float(core.finish(a[6:9], w, h, 0.0, p)))
            assert tuple(got[i, s]) == want, (i, s)
        assert metrics_from_stats(accs[i], 200, 120, opts) == metrics_from_scale_sums(got[i], 200, 120, opts)
