"""CAMBI against libvmaf, its building blocks against plain loops, and its options."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.features import _cambi_core as core
from vmafxd.features.cambi import DECLARATION, cambi_setup, heatmap_file_name, heatmap_frame
from vmafxd.features._cambi_tables import contrast_tables, reciprocal_lut
from vmafxd.features.declaration import OptionError
from vmafxd.core.picture import Picture

from vmafx.io.scores import format_score

from ..reference import VENDORED, pair_params, vendored_pairs
from .harness import compare, run_feature

#: libvmaf's CAMBI with non-default options and its heatmap digests (scripts/cambi_libvmaf_vectors.py)
LIBVMAF = json.loads((VENDORED / "scores" / "cambi_libvmaf.json").read_text())

TABLES = contrast_tables(2, 0.019, "bt1886", 0.0)


def extractor(options=None, width=576, height=324, bitdepth=8):
    return DECLARATION.cpu(DECLARATION.resolve_options(options), width, height, bitdepth)


def one(ext, ref, dist, index=0):
    ((i, metrics),) = ext.extract(index, ref, dist)
    assert i == index
    return metrics


@pytest.fixture(scope="module")
def p01():
    pair = next(p for p in vendored_pairs() if p.id.startswith("p01"))
    refs, dists = pair.pictures()
    return pair, refs, dists


# --- exactness against libvmaf ------------------------------------------------


@pytest.mark.parametrize("pair", pair_params())
def test_matches_libvmaf(pair):
    ours = run_feature(DECLARATION, pair)
    assert compare(ours, pair, "vmaf_v0.6.1", ["cambi"], exact=True) == []


def _options(spec):
    return dict(kv.split("=", 1) for kv in spec.split(":")) if spec else {}


@pytest.mark.parametrize("case", LIBVMAF["cases"], ids=lambda c: f"{c['pair'][:3]}-{c['options']}")
def test_options_match_libvmaf(case):
    pair = next(p for p in vendored_pairs() if p.id == case["pair"])
    ours = run_feature(DECLARATION, pair, _options(case["options"]), frames=len(case["frames"]))
    for i, want in enumerate(case["frames"]):
        # the same names (suffixes, unsuffixed full-reference outputs) and the printed values
        assert sorted(ours[i]) == sorted(want)
        assert {k: float(format_score(v)) for k, v in ours[i].items()} == want


@pytest.mark.parametrize("case", LIBVMAF["heatmaps"], ids=lambda c: f"{c['pair'][:3]}-{c['options'] or 'default'}")
def test_heatmap_files_are_libvmafs(case, tmp_path):
    pair = next(p for p in vendored_pairs() if p.id == case["pair"])
    opts = {**_options(case["options"]), "heatmaps_path": str(tmp_path)}
    ours = run_feature(DECLARATION, pair, opts, frames=len(case["frames"]))
    assert [{k: float(format_score(v)) for k, v in ours[i].items()} for i in range(len(case["frames"]))] == \
        case["frames"]
    got = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(tmp_path.iterdir())}
    assert got == case["files"]


# --- building blocks against plain loops ----------------------------------------


def _loop_mode_filter(img):
    h, w = img.shape
    hz = img.copy()
    for i in range(h):
        for j in range(1, w - 1):
            a, b, c = int(img[i, j - 1]), int(img[i, j]), int(img[i, j + 1])
            hz[i, j] = a if a in (b, c) else (b if b == c else min(a, b, c))
    out = img.copy()
    for i in range(1, h - 1):
        for j in range(w):
            a, b, c = int(hz[i - 1, j]), int(hz[i, j]), int(hz[i + 1, j])
            out[i, j] = a if a in (b, c) else (b if b == c else min(a, b, c))
    return out


def _loop_c_values(img, mask, window, tables, lut):
    """Per pixel, the histogram of the masked in-band window, then cambi.c's c_value_pixel."""
    h, w = img.shape
    pad = window >> 1
    nd = tables.num_diffs
    lo, hi = tables.band_base, tables.band_base + tables.band_size
    out = np.zeros((h, w), np.float32)
    for i in range(h):
        for j in range(w):
            v = int(img[i, j])
            if not mask[i, j] or not lo <= v < hi:
                continue
            hist = {}
            for r in range(max(0, i - pad), min(h, i + pad + 1)):
                for c in range(max(0, j - pad), min(w, j + pad + 1)):
                    u = int(img[r, c])
                    if mask[r, c] and lo <= u < hi:
                        hist[u] = hist.get(u, 0) + 1
            p0 = hist.get(v, 0)
            best = np.float32(0)
            for d in range(nd):
                if v + nd <= tables.tvi_for_diff[d] and v + nd + d + 1 > tables.vlt_luma:
                    pm = max(hist.get(v + d + 1, 0), hist.get(v - d - 1, 0))
                    val = np.float32(tables.weights[d] * p0 * pm) * lut[pm + p0]
                    if val > best:
                        best = val
            out[i, j] = best
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_c_values_match_a_plain_histogram(seed):
    rng = np.random.default_rng(seed)
    # blocky few-level content so the mask and the histograms are busy; some values
    # above the band (which count for nothing)
    base = rng.integers(100, 112, (7, 9)).repeat(5, 0).repeat(6, 1)[:33, :47]
    img = (base + (rng.random(base.shape) < 0.15) * rng.integers(-3, 4, base.shape)).astype(np.uint16)
    img[:4, :10] = 900
    mask = rng.random(img.shape) < 0.8
    lut = reciprocal_lut()
    got = core.c_values(img, mask, 9, TABLES, lut)
    want = _loop_c_values(img, mask, 9, TABLES, lut)
    assert np.count_nonzero(want) > 100
    assert np.array_equal(got, want)


def test_mode_of_three_on_every_pattern_of_ties():
    # every ordering and tie pattern of three samples, up to the type's largest value
    vals = np.array([0, 1, 2, 1023, 65535], dtype=np.uint16)
    a, b, c = (x.ravel() for x in np.meshgrid(vals, vals, vals, indexing="ij"))
    want = [x if x in (y, z) else (y if y == z else min(x, y, z))
            for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    assert core._mode3(a, b, c).tolist() == want


def test_mode_filter_and_mask_match_loops():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 4, (13, 17)).astype(np.uint16)
    assert np.array_equal(core.mode_filter(img), _loop_mode_filter(img))
    flat = np.zeros(img.shape, bool)
    h, w = img.shape
    for i in range(h):
        for j in range(w):
            flat[i, j] = (j == w - 1 or img[i, j] == img[i, j + 1]) and (i == h - 1 or img[i, j] == img[i + 1, j])
    want = np.zeros(img.shape, bool)
    for i in range(h):
        for j in range(w):
            want[i, j] = flat[max(0, i - 3):i + 4, max(0, j - 3):j + 4].sum() > core.mask_index(w, h)
    assert core.mask_index(w, h) == 7
    assert np.array_equal(core.spatial_mask(img), want)


def test_preprocess_bit_depths_and_anti_dithering():
    x = np.array([[1, 2], [3, 5]], np.uint16)
    # 8-bit: << 2, then the 2x2 average (last row/column: pairs)
    assert core.preprocess(x.astype(np.uint8), 8, 2, 2, 8).tolist() == [[11, 14], [16, 20]]
    assert core.preprocess(x, 10, 2, 2, 10).tolist() == x.tolist()
    # 12-bit: rounded shift by 2
    y = np.array([[5, 6], [4095, 2]], np.uint16)
    assert core.preprocess(y, 12, 2, 2, 12).tolist() == [[1, 2], [1024, 1]]


def test_nearest_positions_follow_float_stepping():
    assert core.nearest_positions(576, 288).tolist() == list(range(1, 576, 2))
    assert core.nearest_positions(10, 10).tolist() == list(range(10))
    pos = core.nearest_positions(1920, 1280)
    assert pos[:4].tolist() == [0, 2, 3, 5] and pos[-1] == 1919 and np.all(np.diff(pos) >= 1)


def test_pooling_is_the_exact_top_k_mean():
    c = np.array([0.0, 0.5, 3.25, 1.0, 7.0], np.float32)
    assert core.spatial_pooling(c, 0.6) == (7.0 + 3.25 + 1.0) / 3
    assert core.spatial_pooling(c, 0.0001) == 7.0


def test_reciprocal_table_is_libvmafs():
    lut = reciprocal_lut()
    assert lut[0] == 0 and lut[1] == 1 and lut[3] == np.float32(0.333333333)
    # entries where the 9-digit literal is not the float quotient 1.0f / i
    assert lut[82] == np.float32(0.012195122) and lut[82] != np.float32(1) / np.float32(82)


# --- options ----------------------------------------------------------------------


def test_defaults_and_windows():
    s = cambi_setup(DECLARATION.resolve_options({}), 576, 324, 8)
    assert (s.enc_width, s.enc_height, s.enc_bitdepth, s.window, s.topk) == (576, 324, 8, 9, 0.6)
    assert cambi_setup({}, 1920, 1080, 8).window == 33
    assert cambi_setup({}, 3840, 2160, 10).window == 65
    assert cambi_setup({"cambi_high_res_speedup": 1080}, 1920, 1080, 8).window == 17
    assert not cambi_setup({"cambi_high_res_speedup": 1080}, 1280, 720, 8).high_res_speedup
    assert TABLES.tvi_for_diff == (182, 309, 436, 563)


def test_names_follow_libvmafs_suffix_rules():
    names = DECLARATION.metric_names(DECLARATION.resolve_options({"ws": 30, "full_ref": True, "topk": 0.5}))
    assert names == {"cambi": "cambi_topk_0.5_ws_30", "cambi_source": "cambi_source",
                     "cambi_full_reference": "cambi_full_reference"}
    assert DECLARATION.metric_names(DECLARATION.resolve_options({"eotf": "pq", "encw": 1280, "ench": 720})) == {
        "cambi": "cambi_ench_720_encw_1280_eotf_pq"}
    assert DECLARATION.metric_names(DECLARATION.resolve_options({"heatmaps_path": "/tmp/x"})) == {"cambi": "cambi"}


@pytest.mark.parametrize("key,value", [("eotf", "hlg"), ("cambi_eotf", "srgb"), ("topk", 0.0), ("window_size", 200),
                                       ("enc_width", 100), ("max_log_contrast", 6), ("full_ref", "maybe"),
                                       ("nonsense", 1)])
def test_option_errors_name_the_field(key, value):
    with pytest.raises(OptionError) as exc:
        DECLARATION.resolve_options({key: value})
    assert exc.value.field == f"cambi.{key}"


def test_size_errors_name_the_field():
    with pytest.raises(OptionError) as exc:
        extractor({"enc_width": 200, "enc_height": 200})
    assert exc.value.field == "cambi.enc_width"
    with pytest.raises(OptionError) as exc:
        cambi_setup(DECLARATION.resolve_options({"window_size": 127}), 3840, 2160, 10)
    assert exc.value.field == "cambi.window_size"


def test_full_ref_scores_the_reference_too(p01):
    _, refs, dists = p01
    plain = one(extractor(), refs[0], dists[0])
    got = one(extractor({"full_ref": True}), refs[0], dists[0])
    src_alone = one(extractor(), refs[0], refs[0])["cambi"]
    assert got["cambi"] == plain["cambi"]
    assert got["cambi_source"] == src_alone != plain["cambi"]
    assert got["cambi_full_reference"] == max(0.0, plain["cambi"] - src_alone)
    same = one(extractor({"full_ref": True}), dists[0], dists[0])
    assert same["cambi_full_reference"] == 0.0 and same["cambi_source"] == same["cambi"]


def test_topk_and_its_alias(p01):
    _, refs, dists = p01
    base = one(extractor(), refs[0], dists[0])["cambi"]
    all_px = one(extractor({"topk": 1.0}), refs[0], dists[0])["cambi"]
    assert all_px < base  # the mean over every pixel, zeros included, is lower
    assert one(extractor({"cambi_topk": 1.0}), refs[0], dists[0])["cambi"] == all_px
    # topk wins over cambi_topk when both are set
    assert one(extractor({"topk": 1.0, "cambi_topk": 0.1}), refs[0], dists[0])["cambi"] == all_px


def test_window_size_changes_the_score(p01):
    _, refs, dists = p01
    base = one(extractor(), refs[0], dists[0])["cambi"]
    wide = extractor({"window_size": 127})
    assert wide.setup.window == 19
    assert one(wide, refs[0], dists[0])["cambi"] != base


def test_enc_size_scores_the_resampled_luma(p01):
    _, refs, dists = p01
    half = one(extractor({"enc_width": 288, "enc_height": 162}), refs[0], dists[0])["cambi"]
    base = one(extractor(), refs[0], dists[0])["cambi"]
    # 576 -> 288: the nearest-neighbour positions are the odd rows and columns
    small = Picture((np.ascontiguousarray(dists[0].planes[0][1::2, 1::2]),), 8, Subsampling.S400)
    assert one(extractor({}, 288, 162), small, small)["cambi"] == half != base
    # an encode larger than the input is scored at the input size
    assert one(extractor({"enc_width": 1920, "enc_height": 1080}), refs[0], dists[0])["cambi"] == base


def test_other_options_change_the_score(p01):
    _, refs, dists = p01
    base = one(extractor(), refs[0], dists[0])["cambi"]
    for opts in ({"enc_bitdepth": 10}, {"eotf": "pq"}, {"cambi_eotf": "pq"}, {"max_log_contrast": 3},
                 {"tvi_threshold": 0.05}, {"cambi_vis_lum_threshold": 10.0}):
        assert one(extractor(opts), refs[0], dists[0])["cambi"] != base, opts
    assert one(extractor({"cambi_max_val": 0.1}), refs[0], dists[0])["cambi"] == 0.1 < base


def test_ten_bit_input_needs_no_conversion():
    pair = next(p for p in vendored_pairs() if p.bitdepth == 10)
    _, dists = pair.pictures()
    luma = dists[0].planes[0]
    ext = extractor({}, pair.width, pair.height, 10)
    want = core.cambi_score(luma.astype(np.uint16), ext.setup.window, 0.6, TABLES, reciprocal_lut())
    assert one(ext, dists[0], dists[0])["cambi"] == want


def test_out_of_range_samples_are_refused():
    a = np.full((324, 576), 1023, np.uint16)
    a[0, 0] = 1024
    pic = Picture((a,), 10, Subsampling.S400)
    with pytest.raises(ValueError):
        one(extractor({}, bitdepth=10), pic, pic)


# --- heatmaps ---------------------------------------------------------------------


def test_heatmaps_are_written_as_libvmaf_does(p01, tmp_path):
    _, refs, dists = p01
    out = tmp_path / "maps" / "deeper"
    ext = extractor({"heatmaps_path": str(out)})
    scores = [one(ext, refs[i], dists[i], i)["cambi"] for i in range(2)]
    list(ext.flush())
    dims = [(576, 324), (288, 162), (144, 81), (72, 41), (36, 21)]
    window = ext.setup.window
    scaling = 65535 / (4 * window * window // 4)
    for frame in range(2):
        per_scale = []
        for scale, (w, h) in enumerate(dims):
            f = out / heatmap_file_name(scale, w, h)
            raw = np.fromfile(f, dtype="<u2")
            assert raw.size == 2 * w * h
            m = raw[frame * w * h:(frame + 1) * w * h].reshape(h, w)
            assert scale > 0 or m.max() > 0
            # the top-k mean of the dequantised heatmap is the scale's score, to quantisation
            c = m.astype(np.float64) / scaling
            k = int(0.6 * c.size)
            per_scale.append(np.sort(c.ravel())[::-1][:k].mean())
        approx = sum(s * wt for s, wt in zip(per_scale, (16, 8, 4, 2, 1))) / window ** 2
        assert math.isclose(approx, scores[frame], rel_tol=0, abs_tol=31 / scaling / window ** 2)
    # bit-exact: the finest scale of frame 1 from the core pipeline
    img = core.preprocess(dists[1].planes[0], 8, 576, 324, 8)
    c0 = core.c_values(core.mode_filter(img), core.spatial_mask(img), window, TABLES, reciprocal_lut())
    raw = np.fromfile(out / heatmap_file_name(0, 576, 324), dtype="<u2")[576 * 324:]
    assert np.array_equal(raw.reshape(324, 576), heatmap_frame(c0, window, TABLES))
