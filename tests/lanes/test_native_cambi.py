"""The native CAMBI kernel (vmafxd/lanes/native/cambi.cpp) against its numpy twin.

Frame by frame and key by key, bit for bit: the options that change the
kernel's work (full-reference mode with its own source size, encode size and
bit depth, window, top-k, contrast range, EOTF, visibility threshold, the
high-resolution speed-up), 8 to 16-bit input, odd and extreme sizes (scales
narrower than the window, scales of one or two rows or columns), pictures with
many distinct values, thresholds that are not nested, the heatmap files; and
what it refuses as the twin does.  The twin is exact against
libvmaf (tests/features/test_cambi.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vmafx.formats import Subsampling
from vmafxd.core.picture import Picture
from vmafxd.features import cambi as twin_module
from vmafxd.features.cambi import DECLARATION

from ..features.harness import compare, run_feature
from ..reference import pair_params, vendored_pairs
from .conftest import load_runtime


@pytest.fixture(scope="module", autouse=True)
def _compiler():
    load_runtime("emu")  # skips without a host C++ compiler


def _both(options, width, height, bitdepth):
    from vmafxd.lanes.native.cambi import NativeCambi

    opts = DECLARATION.resolve_options(options)
    return DECLARATION.cpu(opts, width, height, bitdepth), NativeCambi(opts, width, height, bitdepth)


def _assert_same(options, width, height, bitdepth, refs, dists, positive=True):
    twin, native = _both(options, width, height, bitdepth)
    for i, (r, d) in enumerate(zip(refs, dists)):
        want, got = twin.extract(i, r, d), native.extract(i, r, d)
        assert got == want, (i, got, want)
        if positive:  # banding there: a kernel that found none would not pass
            assert want[0][1][next(iter(want[0][1]))] > 0
    assert list(native.flush()) == []
    native.close()
    native.close()
    with pytest.raises(ValueError, match="closed"):
        native.extract(0, refs[0], dists[0])
    return want


@pytest.mark.parametrize("pair", pair_params())
def test_equals_libvmaf_on_every_reference_pair(pair):
    # straight against libvmaf's per-frame scores, not only through the twin
    from vmafxd.lanes.native.cambi import NativeCambi

    ours = run_feature(dataclasses.replace(DECLARATION, cpu=NativeCambi), pair)
    assert compare(ours, pair, "vmaf_v0.6.1", ["cambi"], exact=True) == []


def _pair(prefix):
    return next(p for p in vendored_pairs() if p.id.startswith(prefix))


OPTION_SETS = [
    {"full_ref": True, "max_log_contrast": 3, "topk": 0.3},
    {"enc_width": 400, "enc_height": 300, "enc_bitdepth": 10},
    {"enc_width": 400, "enc_height": 300, "max_log_contrast": 0},
    {"eotf": "pq", "cambi_vis_lum_threshold": 10.0, "window_size": 40, "cambi_max_val": 0.5},
    {"full_ref": True, "src_width": 480, "src_height": 270, "tvi_threshold": 0.05, "max_log_contrast": 1},
    {"cambi_eotf": "pq", "max_log_contrast": 5, "window_size": 127, "cambi_topk": 0.01},
    {"topk": 1.0, "enc_bitdepth": 6, "tvi_threshold": 0.005},
    {"cambi_vis_lum_threshold": 100.0, "max_log_contrast": 4, "window_size": 15},
    # the band of counted values wraps around (libvmaf's uint16): every value from the
    # VLT up is counted, none takes a step, the score is 0
    {"cambi_vis_lum_threshold": 200.0, "max_log_contrast": 0},
]


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("prefix", ["p01", "p16"])
def test_options_on_the_vendored_pairs(prefix, options):
    pair = _pair(prefix)
    refs, dists = pair.pictures()
    wraps = options is OPTION_SETS[-1]
    got = _assert_same(options, pair.width, pair.height, pair.bitdepth, refs[:2], dists[:2],
                       positive=prefix == "p01" and not wraps)
    if options.get("full_ref"):
        assert "cambi_full_reference" in got[0][1]
    if wraps:
        assert got[0][1]["cambi"] == 0.0


def test_ten_bit_pair_with_an_eight_bit_encode_and_full_reference():
    pair = _pair("p15")  # 1280x720, 10 bits
    refs, dists = pair.pictures()
    _assert_same({"enc_bitdepth": 8, "full_ref": True, "src_width": 960, "src_height": 540},
                 pair.width, pair.height, pair.bitdepth, refs[:1], dists[:1])


def _banded(w, h, bitdepth, seed, noisy=False):
    """Smooth gradients quantised into bands, a noisy patch, flat areas: CAMBI's material;
    ``noisy``: fine noise over all of it too (many distinct values, short runs)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    peak = (1 << bitdepth) - 1
    img = peak * (0.15 + 0.25 * x / w + 0.1 * y / h)
    img = np.floor(img / (4 << (bitdepth - 8))) * (4 << (bitdepth - 8))  # bands
    img[h // 3: h // 2, w // 4: w // 2] += rng.normal(0, 0.03 * peak, (h // 2 - h // 3, w // 2 - w // 4))
    if noisy:
        img += (rng.random((h, w)) < 0.2) * rng.integers(-2, 3, (h, w)) * (1 << (bitdepth - 8))
    luma = np.clip(np.rint(img), 0, peak).astype(np.uint8 if bitdepth == 8 else np.uint16)
    cw, ch = (w + 1) // 2, (h + 1) // 2
    chroma = np.full((ch, cw), 1 << (bitdepth - 1), luma.dtype)
    return Picture((luma, chroma, chroma.copy()), bitdepth, Subsampling.S420)


@pytest.mark.parametrize("w,h,bitdepth,options", [
    (333, 217, 10, {}),
    (301, 240, 12, {"enc_bitdepth": 8}),
    (240, 219, 16, {"full_ref": True}),
    (250, 230, 9, {"max_log_contrast": 3}),
    (216, 160, 8, {"window_size": 127}),  # coarse scales smaller than the window
    (1200, 20, 8, {}),  # scales of 3 and 2 rows: the mode filter keeps the rows
    (20, 1000, 8, {}),  # and of 3 and 2 columns
    (3840, 216, 8, {}),  # the coarsest scale shorter than the window's half-width
    (1920, 1080, 8, {"cambi_high_res_speedup": 1080}),
], ids=["odd-10bit", "12bit-antidither", "16bit-fullref", "9bit", "small", "flat", "tall", "3840x216",
        "1080p-speedup"])
def test_synthetic_sizes_and_bit_depths(w, h, bitdepth, options):
    pics = [_banded(w, h, bitdepth, 0), _banded(w, h, bitdepth, 1, noisy=True)]
    _assert_same(options, w, h, bitdepth, pics, pics[::-1], positive=w * h > 30000)


@pytest.mark.parametrize("bitdepth", [12, 16])
def test_samples_that_round_up_to_1024(bitdepth):
    # above 10 bits the conversion rounds: the top samples become 1024, which the band
    # counts when the thresholds reach past 1023 (here up to 1027)
    w, h = 320, 240
    peak = (1 << bitdepth) - 1
    luma = np.full((h, w), peak, np.uint16)
    luma[:, w // 3:] = peak - (1 << (bitdepth - 10))  # 1023 after conversion
    luma[h // 2:, : w // 2] = peak - 3 * (1 << (bitdepth - 10))  # 1021
    pic = Picture((luma,), bitdepth, Subsampling.S400)
    got = _assert_same({"tvi_threshold": 0.005}, w, h, bitdepth, [pic], [pic])
    assert got[0][1]["cambi"] > 0


def test_thresholds_that_are_not_nested(monkeypatch):
    # tvi_for_diff not growing with d (no EOTF gives that; the kernel must not assume it)
    real = twin_module.contrast_tables

    def shuffled(*args):
        t = real(*args)
        return dataclasses.replace(t, tvi_for_diff=(t.tvi_for_diff[1], t.tvi_for_diff[0], t.tvi_for_diff[3],
                                                    t.tvi_for_diff[2]))

    monkeypatch.setattr(twin_module, "contrast_tables", shuffled)
    pair = _pair("p01")
    refs, dists = pair.pictures()
    _assert_same({}, pair.width, pair.height, pair.bitdepth, refs[:1], dists[:1])


def test_strided_planes_score_as_contiguous_ones():
    pic = _banded(333, 217, 10, 2)
    wide = np.zeros((217, 400), np.uint16)
    wide[:, :333] = pic.planes[0]
    strided = Picture((wide[:, :333],) + pic.planes[1:], 10, Subsampling.S420)
    twin, native = _both({}, 333, 217, 10)
    assert native.extract(0, strided, strided) == twin.extract(0, pic, pic)
    assert native.extract(0, strided, strided)[0][1]["cambi"] > 0


@pytest.mark.parametrize("options", [{}, {"enc_width": 400, "enc_height": 300, "full_ref": True}])
def test_heatmap_files_are_the_twins(tmp_path, options):
    pair = _pair("p01")
    refs, dists = pair.pictures()
    from vmafxd.lanes.native.cambi import NativeCambi

    twin = DECLARATION.cpu(DECLARATION.resolve_options({**options, "heatmaps_path": str(tmp_path / "twin")}),
                           pair.width, pair.height, 8)
    native = NativeCambi(DECLARATION.resolve_options({**options, "heatmaps_path": str(tmp_path / "native")}),
                         pair.width, pair.height, 8)
    for i in range(3):
        assert native.extract(i, refs[i], dists[i]) == twin.extract(i, refs[i], dists[i])
    list(twin.flush())
    list(native.flush())
    want = sorted((tmp_path / "twin").iterdir())
    assert len(want) == 5 and all(f.stat().st_size > 0 for f in want)
    for f in want:
        got = (tmp_path / "native" / f.name).read_bytes()
        assert got == f.read_bytes(), f.name
    assert np.frombuffer(want[0].read_bytes(), "<u2").any()  # some banding drawn


def test_the_auto_engine_picks_the_native_kernel():
    from vmafxd.lanes import native

    ext = native.extractor(DECLARATION, DECLARATION.resolve_options({"full_ref": True}), 576, 324, 8)
    assert type(ext).__module__ == "vmafxd.lanes.native.cambi"


def test_out_of_range_samples_are_refused_as_the_twin_does():
    a = np.full((324, 576), 1023, np.uint16)
    a[5, 7] = 1024
    pic = Picture((a,), 10, Subsampling.S400)
    _, native = _both({}, 576, 324, 10)
    with pytest.raises(ValueError):
        native.extract(0, pic, pic)
    small = Picture((np.zeros((300, 500), np.uint16),), 10, Subsampling.S400)
    with pytest.raises(ValueError, match="500x300 luma plane in a 576x324 session"):
        native.extract(0, small, small)
