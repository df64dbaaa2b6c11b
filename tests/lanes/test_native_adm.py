"""The native ADM sums (vmafxd/lanes/native/adm.cpp) against the numpy twin.

The 36 integer sums are compared with the twin's :func:`compute_stats` on the
ADM kernel test's corner cases (full-range noise and two-level pictures at 8 to
16 bits, odd and minimal sizes, options where libvmaf's AVX-512 routines and
its C leftovers differ), and the extractor's metrics with the twin's for the
options that only change the float arithmetic, on a vendored pair.
"""

import numpy as np
import pytest

from vmafxd.features import adm as cpu

from ..reference import vendored_pairs
from .conftest import load_runtime
from .test_adm_kernel import CASES, _case_id, _pictures


@pytest.fixture(scope="module")
def native_adm():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import adm

    return adm


@pytest.fixture
def isas(native_adm):
    """The instruction sets the CPU has (the best one in use again afterwards)."""
    best = native_adm.use_isa("avx512")
    yield native_adm.ISAS[: native_adm.ISAS.index(best) + 1]
    native_adm.use_isa("avx512")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_sums_equal_the_twins(native_adm, isas, case):
    """Every instruction set's build the CPU has (adm.cpp's AVX-512, AVX2 and SSE2 clones)."""
    w, h, bpc, kind, options = case
    options = cpu.DECLARATION.with_defaults(options)
    for seed in (0, 1):
        ref, dist = _pictures(w, h, bpc, kind, seed)
        want = cpu.compute_stats(ref, dist, bpc, options)
        for isa in isas:
            assert native_adm.use_isa(isa) == isa
            got = native_adm.compute_sums(ref, dist, bpc, options)
            for field in ("num", "den", "aim"):
                assert np.array_equal(getattr(got, field), getattr(want, field)), (isa, seed, field)
    assert want.den.any() and (want.aim.any() or options["adm_skip_aim"])


def test_a_large_picture_equals_the_twin_on_every_instruction_set(native_adm, isas):
    """A 1080p pair (vectorised loops' main bodies and tails at every scale), 8 and 10 bits."""
    refs, dists = vendored_pairs()[0].pictures()
    r, d = refs[0].planes[0], dists[0].planes[0]
    ref = np.kron(r, np.ones((4, 4), np.uint8))[:1080, :1920]
    dist = np.kron(d, np.ones((4, 4), np.uint8))[:1080, :1920]
    options = cpu.DECLARATION.with_defaults({})
    for bpc, (a, b) in ((8, (ref, dist)), (10, (ref.astype(np.uint16) * 4 + 3, dist.astype(np.uint16) * 4))):
        want = cpu.compute_stats(a, b, bpc, options)
        for isa in isas:
            native_adm.use_isa(isa)
            got = native_adm.compute_sums(a, b, bpc, options)
            assert all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("num", "den", "aim")), (isa, bpc)


def test_sums_read_strided_planes(native_adm):
    ref, dist = _pictures(240, 150, 10, "noise", 3)
    view_r, view_d = ref[7:140, 3:201], dist[::1, ::1][5:138, 9:207]
    options = cpu.DECLARATION.with_defaults({})
    want = cpu.compute_stats(np.ascontiguousarray(view_r), np.ascontiguousarray(view_d), 10, options)
    got = native_adm.compute_sums(view_r, view_d, 10, options)
    assert np.array_equal(got.num, want.num) and np.array_equal(got.aim, want.aim)


def _run(extractor, refs, dists):
    out = []
    for i, (r, d) in enumerate(zip(refs, dists)):
        out += extractor.extract(i, r, d)
    return out + list(extractor.flush())


@pytest.mark.parametrize("options", [
    {"debug": True},
    {"adm_dlm_weight": 0.8, "adm_min_val": 0.5, "adm_noise_weight": 0.2},
    {"adm_skip_scale0": True, "debug": True},
], ids=lambda o: ",".join(o))
def test_extractor_equals_the_twin(native_adm, options):
    pair = vendored_pairs()[0]
    refs, dists = pair.pictures()
    options = cpu.DECLARATION.with_defaults(options)
    args = (options, pair.width, pair.height, pair.bitdepth)
    want = _run(cpu.IntegerAdm(*args), refs[:3], dists[:3])
    got = _run(native_adm.NativeAdm(*args), refs[:3], dists[:3])
    assert got == want and len(got) == 3


def test_what_the_twin_refuses_is_left_to_it(native_adm):
    from vmafxd.lanes.native import NativeUnsupported

    defaults = cpu.DECLARATION.with_defaults({})
    for options, size in ((defaults, (32, 64)), (defaults, (64, 20)), (dict(defaults, adm_csf_mode=2,
                                                                           adm_ref_display_height=1000), (64, 64))):
        with pytest.raises(NativeUnsupported):
            native_adm.NativeAdm(options, *size, 8)
    with pytest.raises(NativeUnsupported):
        native_adm.NativeAdm(defaults, 64, 64, 7)
