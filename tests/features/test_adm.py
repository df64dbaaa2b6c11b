"""Integer ADM against libvmaf: reference pairs, recorded libvmaf values for options, and the two layers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vmafx.io.scores import format_score
from vmafxd.features.adm import DECLARATION, AdmStats, IntegerAdm, compute_stats, metrics_from_stats
from vmafxd.features.declaration import OptionError
from vmafxd.core.picture import Picture

from ..reference import full_pairs, pair_params
from .harness import run_feature

ALL_NAMES = list(DECLARATION.provides + DECLARATION.debug_provides)

_runs: dict = {}


def _run(pair, options: dict):
    """run_feature, cached per pair and option set (several tests read the same run)."""
    key = (pair.root, pair.id, tuple(sorted(options.items())))
    if key not in _runs:
        _runs[key] = run_feature(DECLARATION, pair, options)
    return _runs[key]


def _mismatches(ours, pair, model: str, names) -> list[str]:
    """Our values against libvmaf's: the full-precision double where there is one, and as printed.

    (Like harness.compare(exact=True), except that the printed check compares
    our printed value with libvmaf's printed *value*: re-printing the parsed
    6-decimal number can change its format, e.g. 1.000001 has seven zeros
    after the point only once rounded, and then prints as 1.0000009999999999.)
    """
    printed, full = pair.scores(model), pair.fullprec(model)
    errors, checked = [], 0
    for fi in range(pair.scored_frames):
        theirs = printed["frames"][fi]["metrics"]
        theirs_full = full["frames"][fi]["metrics"] if full else {}
        for name in names:
            if name not in theirs:
                continue
            checked += 1
            mine = ours.get(fi, {}).get(name)
            if mine is None:
                errors.append(f"frame {fi} {name}: missing")
            elif float(format_score(mine)) != theirs[name]:
                errors.append(f"frame {fi} {name}: prints {format_score(mine)}, libvmaf {theirs[name]!r}")
            elif name in theirs_full and mine != theirs_full[name]:
                errors.append(f"frame {fi} {name}: {mine!r} != full precision {theirs_full[name]!r}")
    if checked == 0:
        errors.append(f"no metric of {names} in {pair.id}.{model}")
    return errors


# --- exactness on the reference pairs ----------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_default_options_match_libvmaf(pair):
    """adm.debug=true in the vmaf_v0.6.1 runs: all 18 keys; the other models read the same 7."""
    ours = _run(pair, {"debug": True})
    assert _mismatches(ours, pair, "vmaf_v0.6.1", ALL_NAMES) == []
    for model in ("vmaf_4k_v0.6.1", "vmaf_b_v0.6.3"):
        assert _mismatches(ours, pair, model, list(DECLARATION.provides)) == []


@pytest.mark.parametrize("pair", pair_params())
def test_enhancement_gain_limit_1_matches_libvmaf(pair):
    """vmaf_v0.6.1neg sets adm_enhn_gain_limit=1: keys carry _egl_1."""
    options = {"adm_enhn_gain_limit": 1.0}
    names = list(DECLARATION.metric_names(DECLARATION.resolve_options(options)).values())
    assert "integer_adm2_egl_1" in names
    assert _mismatches(_run(pair, options), pair, "vmaf_v0.6.1neg", names) == []


def _full_pair(pair_id: str):
    for p in full_pairs():
        if p.id == pair_id:
            return p
    pytest.skip("full reference set not present")


@pytest.mark.reference
def test_avx512_and_c_paths_differ_where_libvmaf_does():
    """p13 frame 8: libvmaf's plain C path gives another integer_aim than its AVX-512 path.

    The reference was made with AVX-512; 0.024828804181217877 is what libvmaf
    prints with --cpumask 63 (plain C) for the same frame.
    """
    pair = _full_pair("p13_astronaut_sharpen")
    refs, dists = pair.pictures()
    opts = DECLARATION.resolve_options({})
    simd = metrics_from_stats(compute_stats(refs[8].luma, dists[8].luma, 8, opts), opts)
    plain = metrics_from_stats(compute_stats(refs[8].luma, dists[8].luma, 8, opts, code_path="c"), opts)
    assert simd["integer_aim"] == pair.fullprec("vmaf_v0.6.1")["frames"][8]["metrics"]["integer_aim"]
    assert plain["integer_aim"] == 0.024828804181217877
    assert simd["integer_adm2"] == plain["integer_adm2"]


# --- options libvmaf's reference runs do not cover: values recorded from libvmaf ---------


def synthetic_pair(w: int, h: int, bpc: int):
    """Deterministic content: edges and texture, distorted by an unsharp mask (left half) and blur + quantisation."""
    y, x = np.mgrid[0:h, 0:w].astype(np.int64)
    mx = (1 << bpc) - 1
    base = (x * 7 + y * 3) % 97 * 2 + ((x // 9 + y // 7) % 2) * 60 + ((x * x + 3 * y * y) * 2654435761 % 4099) % 23
    ref = base * mx // 300
    blur = (ref + np.roll(ref, 1, 0) + np.roll(ref, -1, 0) + np.roll(ref, 1, 1) + np.roll(ref, -1, 1)) // 5
    sharp = ref + 2 * (ref - blur)
    quant = (blur // 8) * 8
    noise = ((x * 40503 + y * 9973) * 2654435761 % 65521) % 9 - 4
    dist = np.where(x < w // 2, sharp, quant) + noise * (mx // 255)
    dtype = np.uint8 if bpc == 8 else np.uint16
    return np.clip(ref, 0, mx).astype(dtype), np.clip(dist, 0, mx).astype(dtype)


# (size, options, libvmaf's adm2, aim, num, den, num/den per scale) from libvmaf's
# integer_compute_adm, AVX-512 build, on synthetic_pair(): run through a small C harness.
RECORDED = [
    ((160, 90, 8), {}, (0.9226072685515011, 0.039131917365683146, 296.1951370239258, 321.04140853881836, 27.421951293945312, 33.1999397277832, 49.3367919921875, 56.89186096191406, 120.92205810546875, 127.47603607177734, 98.51433563232422, 103.47357177734375)),
    ((160, 90, 8), {'adm_enhn_gain_limit': 1.0}, (0.8990109551935567, 0.04249181481655711, 288.61974334716797, 321.04140853881836, 24.57324981689453, 33.1999397277832, 47.379859924316406, 56.89186096191406, 118.90802001953125, 127.47603607177734, 97.75861358642578, 103.47357177734375)),
    ((160, 90, 8), {'adm_enhn_gain_limit': 1.7}, (0.9184583638326175, 0.039441944819762105, 294.86316680908203, 321.04140853881836, 26.147796630859375, 33.1999397277832, 49.305419921875, 56.89186096191406, 120.90164184570312, 127.47603607177734, 98.50830841064453, 103.47357177734375)),
    ((160, 90, 8), {'adm_norm_view_dist': 5.0, 'adm_ref_display_height': 2160}, (0.9551289903493461, 0.01589951119458547, 80.01249313354492, 83.77140045166016, 14.077035903930664, 14.590192794799805, 13.688762664794922, 14.630184173583984, 26.060789108276367, 27.185253143310547, 26.18590545654297, 27.36577033996582)),
    ((160, 90, 8), {'adm_csf_mode': 1}, (math.nan, 0.0019482720785765817, math.nan, 123755.4443359375, 32.09276580810547, 1735.228515625, math.nan, 8667.7470703125, math.nan, 46065.8984375, 1704.6024169921875, 67286.5703125)),
    ((160, 90, 8), {'adm_csf_mode': 2}, (0.9308991983473187, 0.02758565618655376, 304.3781681060791, 326.9722099304199, 22.781465530395508, 26.768840789794922, 40.59770202636719, 46.56786346435547, 119.62791442871094, 126.1012954711914, 121.37108612060547, 127.53421020507812)),
    ((160, 90, 8), {'adm_csf_mode': 3, 'adm_ref_display_height': 720}, (0.921635135279997, 0.039169917637480574, 299.43609619140625, 324.8965721130371, 27.688453674316406, 33.74437713623047, 48.69102478027344, 56.268680572509766, 120.73212432861328, 127.40095520019531, 102.32449340820312, 107.48255920410156)),
    ((160, 90, 8), {'adm_noise_weight': 0.5, 'adm_skip_aim': True}, (0.9323831316738466, 0.0, 342.6104316711426, 367.45670318603516, 46.76173782348633, 52.53972625732422, 62.1729736328125, 69.72804260253906, 129.53900146484375, 136.09298706054688, 104.13671875, 109.095947265625)),
    ((160, 90, 8), {'adm_skip_scale0': True}, (0.9337542183900327, 0.014248510395084825, 268.77318572998047, 287.84146881113514, 0.0, 1.000000013351432e-10, 49.3367919921875, 56.89186096191406, 120.92205810546875, 127.47603607177734, 98.51433563232422, 103.47357177734375)),
    ((192, 108, 10), {}, (0.9228394030655345, 0.03984486658558857, 332.57435417175293, 360.3816146850586, 31.07197380065918, 37.90848922729492, 53.304443359375, 61.82267379760742, 132.42787170410156, 139.14524841308594, 115.77006530761719, 121.50520324707031)),
    ((192, 108, 12), {'adm_enhn_gain_limit': 2.5}, (0.9213944827897869, 0.03992923215181328, 332.2653865814209, 360.61143493652344, 30.951627731323242, 37.92681884765625, 53.225730895996094, 61.8599853515625, 132.27809143066406, 139.2408905029297, 115.8099365234375, 121.583740234375)),
]
RECORDED_KEYS = ["integer_adm2", "integer_aim", "integer_adm_num", "integer_adm_den"] + [
    f"integer_adm_{kind}_scale{s}" for s in range(4) for kind in ("num", "den")
]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("size, options, expected", RECORDED, ids=[f"{s[2]}bit-{o}" for s, o, _ in RECORDED])
def test_options_match_recorded_libvmaf_values(size, options, expected):
    w, h, bpc = size
    ref, dist = synthetic_pair(w, h, bpc)
    # the recorded probes called libvmaf's ADM pipeline directly, below the
    # extractor's view-distance refusal, so the options are not validated here
    opts = {o.name: o.default for o in DECLARATION.options}
    opts.update(options, debug=True)
    ours = metrics_from_stats(compute_stats(ref, dist, bpc, opts), opts)
    got = [ours[k] for k in RECORDED_KEYS]
    assert all(_same(a, b) for a, b in zip(got, expected)), list(zip(RECORDED_KEYS, got, expected))
    # adm3 is libvmaf's MAX(adm2 * w + (1 - aim) * (1 - w), min_val)
    adm3 = expected[0] * 0.5 + (1 - expected[1]) * 0.5
    assert _same(ours["integer_adm3"], adm3 if adm3 > 0.0 else 0.0)


# --- options: declaration and refusals ------------------------------------------------


def test_option_table_mirrors_libvmaf():
    table = {o.name: (o.type, o.default, o.alias, o.min, o.max, o.feature_param) for o in DECLARATION.options}
    assert table == {
        "debug": (bool, False, None, None, None, False),
        "adm_csf_scale": (float, 1.0, "scf", 0.0, 50.0, True),
        "adm_csf_diag_scale": (float, 1.0, "scfd", 0.0, 50.0, True),
        "adm_dlm_weight": (float, 0.5, "dlmw", 0.0, 1.0, True),
        "adm_enhn_gain_limit": (float, 100.0, "egl", 1.0, 100.0, True),
        "adm_norm_view_dist": (float, 3.0, "nvd", 0.75, 24.0, True),
        "adm_ref_display_height": (int, 1080, "rdh", 1, 4320, True),
        "adm_csf_mode": (int, 0, "csf", 0, 3, True),
        "adm_noise_weight": (float, 0.03125, "nw", 0.0, 1500.0, True),
        "adm_skip_aim": (bool, False, None, None, None, False),
        "adm_skip_scale0": (bool, False, "ssz", None, None, True),
        "adm_min_val": (float, 0.0, "min", 0.0, 1.0, True),
    }
    assert DECLARATION.name == "adm" and not DECLARATION.temporal and DECLARATION.kernel == "adm.cu"
    assert DECLARATION.provides[:3] == ("integer_adm2", "integer_aim", "integer_adm3")


@pytest.mark.parametrize(
    "given, field",
    [
        ({"adm_enhn_gain_limit": 0.5}, "adm.adm_enhn_gain_limit"),
        ({"egl": 101}, "adm.adm_enhn_gain_limit"),
        ({"adm_csf_mode": 4}, "adm.adm_csf_mode"),
        ({"adm_norm_view_dist": 0.5}, "adm.adm_norm_view_dist"),
    ],
)
def test_option_bounds(given, field):
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options(given)
    assert e.value.field == field


@pytest.mark.parametrize(
    "given, field",
    [
        ({"adm_norm_view_dist": 2.0}, "adm.adm_norm_view_dist"),
        ({"adm_ref_display_height": 720}, "adm.adm_ref_display_height"),
        ({"adm_csf_mode": 2, "adm_norm_view_dist": 4.0}, "adm.adm_csf_mode"),
    ],
)
def test_refused_option_combinations(given, field):
    """libvmaf refuses a view distance x display height below 3 x 1080 (and has blend tables for a few only).

    The declaration checks it when options are resolved (so every lane refuses
    at session open), and the CPU twin again when built from raw values."""
    with pytest.raises(OptionError) as e:
        DECLARATION.resolve_options(given)
    assert e.value.field == field
    values = {o.name: o.default for o in DECLARATION.options}
    values.update(given)
    with pytest.raises(OptionError) as e:
        DECLARATION.cpu(values, 576, 324, 8)
    assert e.value.field == field


def test_same_angular_resolution_is_accepted():
    DECLARATION.cpu(DECLARATION.resolve_options({"nvd": 1.5, "rdh": 2160}), 576, 324, 8)


def test_tiny_frames_are_refused():
    with pytest.raises(ValueError):
        DECLARATION.cpu(DECLARATION.resolve_options({}), 32, 100, 8)


# --- the two layers ----------------------------------------------------------------------


def test_stats_are_integers_and_layers_compose():
    ref, dist = synthetic_pair(160, 90, 8)
    opts = DECLARATION.resolve_options({"debug": True})
    stats = compute_stats(ref, dist, 8, opts)
    assert isinstance(stats, AdmStats)
    for a in (stats.num, stats.den, stats.aim):
        assert a.dtype == np.int64 and a.shape == (4, 3) and (a >= 0).all()
    assert (stats.den > 0).all()
    pic = lambda y: Picture((y,), 8, None)  # noqa: E731 - luma is all ADM reads
    ((index, metrics),) = IntegerAdm(opts, 160, 90, 8).extract(7, pic(ref), pic(dist))
    assert index == 7 and metrics == metrics_from_stats(stats, opts)
    assert set(metrics) == set(ALL_NAMES)


def test_strided_views_give_the_same_stats():
    ref, dist = synthetic_pair(192, 108, 8)
    big_r = np.zeros((120, 400), np.uint8)
    big_d = np.zeros((120, 400), np.uint8)
    big_r[5:113, 3:387:2] = ref
    big_d[5:113, 3:387:2] = dist
    opts = DECLARATION.resolve_options({})
    a = compute_stats(ref, dist, 8, opts)
    b = compute_stats(big_r[5:113, 3:387:2], big_d[5:113, 3:387:2], 8, opts)
    assert (a.num == b.num).all() and (a.den == b.den).all() and (a.aim == b.aim).all()


def test_debug_keys_only_with_debug():
    ref, dist = synthetic_pair(160, 90, 8)
    opts = DECLARATION.resolve_options({})
    metrics = metrics_from_stats(compute_stats(ref, dist, 8, opts), opts)
    assert set(metrics) == set(DECLARATION.provides)


def test_identical_frames_score_slightly_above_one():
    """As libvmaf: the numerator's masking and noise floor differ from the denominator's."""
    ref, _ = synthetic_pair(160, 90, 8)
    opts = DECLARATION.resolve_options({})
    m = metrics_from_stats(compute_stats(ref, ref, 8, opts), opts)
    assert 1.0 < m["integer_adm2"] < 1.001 and m["integer_aim"] == 0.0


@pytest.mark.parametrize("over", [{}, {"debug": True}, {"adm_skip_scale0": True, "debug": True}, {"adm_skip_aim": True}])
def test_frames_scored_together_equal_frames_scored_alone(over):
    """metrics_from_sums over N frames gives each frame exactly its own numbers (the GPU lane
    scores a batch at once; the CPU twin one frame at a time); a flat frame among them too."""
    from vmafxd.features.adm import metrics_from_sums

    opts = DECLARATION.resolve_options(over)
    frames = []
    for seed, (w, h) in enumerate([(160, 90)] * 5):
        ref, dist = synthetic_pair(w, h, 8)
        if seed:
            dist = np.clip(dist.astype(np.int32) + seed * 3 - 6, 0, 255).astype(np.uint8)
        frames.append(compute_stats(ref, dist, 8, opts))
    flat = np.zeros(90 * 160, np.uint8).reshape(90, 160)
    frames.append(compute_stats(flat, flat, 8, opts))  # only the noise floors
    batch = metrics_from_sums(160, 90, np.stack([f.num for f in frames]), np.stack([f.den for f in frames]),
                              np.stack([f.aim for f in frames]), opts)
    alone = [metrics_from_stats(f, opts) for f in frames]
    assert len({b["integer_adm2"] for b in batch}) > 2
    for b, a in zip(batch, alone):
        assert b.keys() == a.keys()
        assert all(b[k] == a[k] or (math.isnan(b[k]) and math.isnan(a[k])) for k in a)


def test_powf_array_is_c_powf_element_by_element():
    """The batch path's powf is glibc's powf exactly (numpy's array power differs in about one
    element in five here), including zeros, denormals, huge values and infinities."""
    from vmafxd.features._adm_csf import _POWF, ONE_THIRD_F, powf_array

    if _POWF is None:
        pytest.skip("no C library powf through ctypes on this platform")
    rng = np.random.default_rng(11)
    x = (rng.random(20000) * 10.0 ** rng.integers(-40, 38, 20000)).astype(np.float32)
    x = np.concatenate([x, np.array([0.0, 1e-45, 1.0, 3.4e38, np.inf], np.float32)])
    for y in (ONE_THIRD_F, np.float32(0.5)):
        want = np.array([_POWF(float(v), float(y)) for v in x], np.float32)
        got = powf_array(x, y)
        assert got.dtype == np.float32 and (got.view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("w, h, bpc", [(160, 90, 8), (177, 95, 12)])
@pytest.mark.parametrize("code_path", ["avx512", "c"])
def test_strips_of_one_row_give_the_same_sums(monkeypatch, w, h, bpc, code_path):
    """The DWT and the scoring stages run in strips of rows; strips of a single
    row (every strip edge a band edge or a neighbour row) give the same integers
    as one strip for the whole band."""
    from vmafxd.features import _adm_dwt, adm

    ref, dist = synthetic_pair(w, h, bpc)
    opts = DECLARATION.resolve_options({})
    whole = compute_stats(ref, dist, bpc, opts, code_path)
    monkeypatch.setattr(adm, "_STRIP_SAMPLES", 1)
    monkeypatch.setattr(_adm_dwt, "_STRIP_SAMPLES", 1)
    rows = compute_stats(ref, dist, bpc, opts, code_path)
    for k in ("num", "den", "aim"):
        assert (getattr(rows, k) == getattr(whole, k)).all(), k
