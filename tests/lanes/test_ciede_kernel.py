"""ciede on the GPU lanes (ciede.cu + the host's raster-order sum) against its CPU twin, bit for bit.

Vendored pairs: 8/10-bit, 4:2:0 with an odd size (libvmaf's reads past the
chroma plane), 4:2:2 (reads past the row), 4:4:4, identical frames (+inf).
"""

from __future__ import annotations

import pytest

import numpy as np

from vmafxd.features._ciede_color import ciede2000_scalar, lab_scalar
from vmafxd.lanes.gpu import ciede as gpu_ciede
from vmafxd.core.scoring import FeatureRequest, ScoringPlan

from ..reference import full_pairs, vendored_pairs
from .test_gpu_engine import cpu_scores, gpu_scores

pytestmark = pytest.mark.gpu

_listed: list[int] = []
_exact: list[bool] = []


def _cut(pair, frames):
    refs, dists = pair.pictures()

    class Cut:
        width, height, bitdepth, pix_fmt, id = pair.width, pair.height, pair.bitdepth, pair.pix_fmt, pair.id

        def pictures(self):
            return refs[:frames], dists[:frames]

    return Cut()


@pytest.mark.parametrize("pair", vendored_pairs(), ids=lambda p: p.id)
def test_equals_the_cpu_twin_on_every_frame(gpu, pair, monkeypatch):
    """The fast path: the device's exact sum plus the listed doubtful pixels."""
    rt, dev = gpu
    dev.make_current()
    original = gpu_ciede.GpuCiede._exact_total

    def counting(self, rec, entries):
        _listed.append(int(rec[2]))
        got = original(self, rec, entries)
        _exact.append(got is not None)
        return got

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_exact_total", counting)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    want = cpu_scores(plan, cut)
    got = gpu_scores(rt, dev, plan, cut, batch=2)
    assert set(got) == set(want)
    for i in want:
        assert got[i] == want[i], i


def test_the_fast_path_was_taken_and_met_doubtful_pixels():
    """The pairs above: the exact sum served (nearly) every frame, and the
    device listed pixels it could not trust (about one in 10,000)."""
    if not _exact:
        pytest.skip("runs after the pair tests")
    assert sum(_exact) >= len(_exact) - 1
    assert sum(_listed) > 0


@pytest.mark.parametrize("pair", [p for p in vendored_pairs() if p.id.startswith(("p16", "p15"))],
                         ids=lambda p: p.id)
def test_without_the_gamma_table_equals_the_cpu_twin(gpu, pair, monkeypatch):
    """Red and blue computed a pixel (as for 12- and 16-bit pictures) instead of
    read from the session's table: the same scores (8 and 10 bits)."""
    rt, dev = gpu
    dev.make_current()
    monkeypatch.setattr(gpu_ciede, "_GAMMA_TABLE_MAX_BITS", 0)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)


@pytest.mark.parametrize("table", ["1", "0"])
@pytest.mark.parametrize("pair", [p for p in vendored_pairs() if p.id.startswith(("p01", "p16", "p17", "p18"))],
                         ids=lambda p: p.id)
def test_with_and_without_the_lab_table_equals_the_cpu_twin(gpu, pair, table, monkeypatch):
    """8-bit pictures with both conversions read from the device's L*a*b* table
    (vx_ciede_lab8: the default on a GPU, asked for on the emulator) and with both
    computed a pixel (the default on the emulator): the CPU twin's scores either way,
    4:2:0 (odd size too), 4:2:2 and 4:4:4."""
    rt, dev = gpu
    dev.make_current()
    monkeypatch.setenv(gpu_ciede.LAB_TABLE_ENV, table)
    builds = []
    original = gpu_ciede._build_lab8

    def counting(kernels, ptr, stream):
        builds.append(ptr)
        original(kernels, ptr, stream)

    monkeypatch.setattr(gpu_ciede, "_build_lab8", counting)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)
    assert len(builds) == (table == "1")


def test_the_lab_table_holds_the_c_librarys_conversion_of_every_triple(gpu, monkeypatch):
    """Every one of the table's 2^24 entries: the CPU twin's L*a*b* floats of its
    (Y, U, V) where neither flags the triple as doubtful, the scalar C-library
    transcription's where only the twin does; the device's own doubtful entries are
    few (their pixels go to the host whole)."""
    from vmafxd.features._ciede_color import lab_from_yuv
    from vmafxd.lanes.gpu.engine import KernelSet

    rt, dev = gpu
    dev.make_current()
    ks = KernelSet(rt, dev)
    st = dev.create_stream()
    host = dev.alloc_host(gpu_ciede.LAB8_BYTES)
    try:
        table = gpu_ciede.lab8_table(ks, st)
        assert gpu_ciede.lab8_table(ks, st) == table  # built once a device
        dev.copy_dtoh_async(host, table, gpu_ciede.LAB8_BYTES, st)
        st.synchronize()
        got = host.view(np.float32).reshape(-1, 4).copy()
    finally:
        dev.free_host(host)
        ks.close()
    device_doubt = got[:, 3] != 0
    assert set(np.unique(got[:, 3]).tolist()) <= {0.0, 1.0}
    assert 0 < device_doubt.sum() < 2**24 * 1e-5
    step = 1 << 20
    only_twin = []
    for start in range(0, 1 << 24, step):
        k = np.arange(start, start + step)
        doubt = np.zeros(step, bool)
        want = np.stack(lab_from_yuv(k >> 16, (k >> 8) & 255, k & 255, 8, doubt), axis=1)
        plain = ~doubt & ~device_doubt[k]
        assert np.array_equal(got[k[plain], :3], want[plain]), start
        only_twin += k[doubt & ~device_doubt[k]].tolist()
    assert only_twin  # the twin's window is ten times the device's
    for k in only_twin[:2000]:
        assert tuple(got[k, :3].tolist()) == lab_scalar(float(k >> 16), float((k >> 8) & 255), float(k & 255), 8), k


@pytest.mark.parametrize("how", ["device_sum", "list_full", "no_exact_sum"])
@pytest.mark.parametrize("pair", [p for p in vendored_pairs() if p.id.startswith(("p16", "p18"))],
                         ids=lambda p: p.id)
def test_slow_path_equals_the_cpu_twin(gpu, pair, how, monkeypatch):
    """Every frame through the slow path: libvmaf's sequential sum on the device with the
    listed pixels' redone floats in place (the exact sum refused, or not tried: frames of
    2^23 pixels and more), or on the host with the samples back (the list ran out of
    room)."""
    rt, dev = gpu
    dev.make_current()
    if how == "device_sum":
        monkeypatch.setattr(gpu_ciede.GpuCiede, "_exact_total", lambda self, rec, entries: None)
    original_init = gpu_ciede.GpuCiede.__init__

    def init(self, instance, scorer):
        original_init(self, instance, scorer)
        if how == "list_full":
            self.capacity = 8
            assert self.head == 8  # the head copied with the records is no longer than the list
        if how == "no_exact_sum":
            self.exact_sum = False

    monkeypatch.setattr(gpu_ciede.GpuCiede, "__init__", init)
    if how == "list_full":
        monkeypatch.setattr(gpu_ciede, "_HEAD", 8)
    # hundreds of listed pixels a frame, whose redone floats the sums must take in place
    monkeypatch.setattr(rt, "compile_options", (*rt.compile_options, "-DCIEDE_DEVICE_DOUBT=1e-4"))
    paths = {"device": 0, "host": 0}
    seq, slow = gpu_ciede.GpuCiede._sequential_totals, gpu_ciede.GpuCiede._slow_total

    def on_device(self, diffs, frames, listed):
        paths["device"] += len(frames)
        return seq(self, diffs, frames, listed)

    def on_host(self, diffs, kept, frame):
        paths["host"] += 1
        return slow(self, diffs, kept, frame)

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_sequential_totals", on_device)
    monkeypatch.setattr(gpu_ciede.GpuCiede, "_slow_total", on_host)
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)
    assert paths == ({"device": 0, "host": 2} if how == "list_full" else {"device": 2, "host": 0})


def test_many_doubtful_pixels_redone_as_the_scalar_c_transcription(gpu, monkeypatch):
    """The device's doubt window widened 100-fold (a -D build knob of ciede.cu):
    hundreds of listed pixels per frame (more than the head copied with the
    records), redone in one call for the batch, each
    equal to the scalar C-library transcription of its samples; the scores
    equal the CPU twin's."""
    rt, dev = gpu
    dev.make_current()
    monkeypatch.setattr(rt, "compile_options", (*rt.compile_options, "-DCIEDE_DEVICE_DOUBT=1e-4"))
    listed, redone = [], []
    original_listed, original_libm = gpu_ciede.GpuCiede._redo_listed, gpu_ciede.ciede2000_libm

    def listing(self, recs, entries):
        listed.extend(int(r[2]) for r in recs)
        return original_listed(self, recs, entries)

    def redoing(samples, bitdepth):
        got = original_libm(samples, bitdepth)
        redone.append((np.array(samples, np.float64), got.copy()))
        return got

    monkeypatch.setattr(gpu_ciede.GpuCiede, "_redo_listed", listing)
    monkeypatch.setattr(gpu_ciede, "ciede2000_libm", redoing)
    pair = next(p for p in vendored_pairs() if p.id.startswith("p16"))
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    cut = _cut(pair, 2)
    assert gpu_scores(rt, dev, plan, cut, batch=2) == cpu_scores(plan, cut)
    assert len(listed) == 2 and all(300 < c <= 1024 for c in listed)
    assert len(redone) == 1  # one call for the batch
    samples, de = redone[0]
    assert samples.shape == (sum(listed), 6)
    assert sum(listed) > 2 * gpu_ciede._HEAD  # so the list's rest (beyond the head) was copied too
    want = [ciede2000_scalar(lab_scalar(*r[:3], pair.bitdepth), lab_scalar(*r[3:], pair.bitdepth))
            for r in samples.tolist()]
    assert np.array_equal(de, np.array(want, np.float32))


@pytest.mark.reference
@pytest.mark.parametrize("pair", full_pairs(), ids=lambda p: p.id)
def test_every_frame_of_the_reference_pairs_equals_the_cpu_twin(gpu, pair):
    """On a device (not the emulator, whose libm is glibc itself): every frame of
    every reference pair, so the device's doubt window (ciede.cu's CIEDE_DOUBT,
    sized to the CUDA/HIP libm's documented errors) is checked on real content."""
    rt, dev = gpu
    if rt.name == "emu":
        pytest.skip("the emulator's libm is glibc: nothing to check beyond the vendored pairs")
    dev.make_current()
    plan = ScoringPlan.build([], [FeatureRequest("ciede")])
    assert gpu_scores(rt, dev, plan, pair, batch=8) == cpu_scores(plan, pair)


def _fabricated_twin():
    """A GpuCiede with just what its host step reads (no device)."""
    from types import SimpleNamespace

    twin = object.__new__(gpu_ciede.GpuCiede)
    twin.scorer = SimpleNamespace(staging=SimpleNamespace(bitdepth=8))
    return twin


def _scalar_total(rec, entries):
    """The host step one pixel at a time, with the scalar C transcription (the reference)."""
    if rec[1] or rec[2] != len(entries):
        return None
    total = int(rec[0])
    lows = [k for k in range(13) if rec[3 + k]]
    low = lows[0] - 32 if lows else 64
    for e in entries.tolist():
        de = ciede2000_scalar(lab_scalar(*map(float, e[1:4]), 8), lab_scalar(*map(float, e[4:7]), 8))
        if de == 0.0:
            continue
        units = de * 2.0**32
        if units != int(units) or units >= 2.0**40:
            return None
        total += int(units)
        low = min(low, (int(units) & -int(units)).bit_length() - 1 - 32)
    if total == 0:
        return 0.0
    return None if low < total.bit_length() - 1 - 32 - 52 else total / 2**32


def test_batched_host_step_equals_the_scalar_one_on_fabricated_records():
    """Fabricated records and a batch list in no order (frames with many, few and
    no listed pixels, identical pixels, a frame the list had no room for, a frame
    with bits below 2^-32, device sums that leave the listed pixels' low bits
    decisive either way): the batched redo and sum equal the one-pixel-at-a-time
    reference per frame."""
    rng = np.random.default_rng(5)
    counts = [400, 0, 37, 1, 250, 401, 120, 40]
    n = len(counts)
    recs = np.zeros((n, 16), np.int64)
    per_frame = []
    for i, c in enumerate(counts):
        k = min(c, 400)  # frame 5: one doubtful pixel missing from the list
        e = np.zeros((k, 8), np.int32)
        e[:, 0] = rng.permutation(100_000)[:k]  # distinct pixels of the frame
        e[:, 1:7] = rng.integers(0, 256, (k, 6))
        e[: k // 4, 4:7] = e[: k // 4, 1:4]  # identical pixels: difference 0
        e[:, 7] = i
        per_frame.append(e)
        recs[i, 2] = c
        recs[i, 0] = int(rng.integers(1, 1 << 40)) << int(rng.integers(0, 20))
        recs[i, 3 + int(rng.integers(0, 13))] = 1
    recs[6, 1] = 3  # differences below 2^-32 on the device: no fast path
    # near-identical pixels (differences below 1, bits down to 2^-25) under a total of 2^29:
    # a partial sum would round off their low bits, so the slow path
    e = per_frame[7]
    e[:40, 4:7] = e[:40, 1:4]
    e[:40, 4] = np.minimum(e[:40, 1] + 1, 255)
    recs[7, 0] = 1 << 61
    recs[7, 3:16] = 0
    recs[7, 3 + 12] = 1
    entries = np.concatenate(per_frame)
    entries = entries[rng.permutation(len(entries))]  # the device lists in any order
    twin = _fabricated_twin()
    listed, floats = twin._redo_listed(recs, entries)
    got = [None if x is None else twin._exact_total(r, x) for r, x in zip(recs, listed)]
    want = [_scalar_total(r, e) for r, e in zip(recs, per_frame)]
    assert got == want
    assert got[1] is not None and got[5] is None and got[6] is None and got[7] is None
    assert sum(g is not None for g in got) == 5
    # the redone floats, frame by frame in raster order, for the sequential sum
    for i, e in enumerate(per_frame):
        ordered = e[np.argsort(e[:, 0], kind="stable")].tolist()
        want_floats = [ciede2000_scalar(lab_scalar(*map(float, r[1:4]), 8), lab_scalar(*map(float, r[4:7]), 8))
                       for r in ordered]
        assert floats.values[floats.starts[i]:floats.ends[i]].tolist() == want_floats, i
    # the first frames of a batch alone (a short final batch): the other frames' entries ignored
    assert twin._redo_listed(recs[:3], entries)[0] == listed[:3]


def _device_values(rt, dev, which: int, x: np.ndarray) -> np.ndarray:
    """``vx_ciede_functions`` (ciede.cu's replacements of libvmaf's calls) at ``x`` on a device."""
    from vmafxd.lanes.gpu.engine import KernelSet
    from vmafxd.lanes.gpu.launch import I32, U64

    ks = KernelSet(rt, dev)
    stream = dev.create_stream()
    x = np.ascontiguousarray(x, np.float64)
    host = dev.alloc_host(x.nbytes)
    out = dev.alloc_host(x.nbytes)
    d_in, d_out = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    try:
        host[:] = x.view(np.uint8)
        dev.copy_htod_async(d_in, host, x.nbytes, stream)
        launch = ks.launcher("ciede.cu", "vx_ciede_functions", [U64, U64, I32, I32])
        launch(((x.size + 255) // 256,), (256,), stream, d_in, d_out, x.size, which)
        dev.copy_dtoh_async(out, d_out, x.nbytes, stream)
        stream.synchronize()
        return out.view(np.float64).copy()
    finally:
        dev.free(d_in)
        dev.free(d_out)
        dev.free_host(host)
        dev.free_host(out)
        stream.close()
        ks.close()


@pytest.mark.parametrize("which", [0, 1, 2, 3], ids=["gamma", "cube_root", "T", "pow7"])
def test_device_replacements_of_libm_calls_stay_within_their_bounds(gpu, which):
    """ciede.cu replaces libvmaf's pow (gamma, cube root, x^7) and T's four cos calls
    by cheaper forms whose difference from glibc's result its header bounds; the
    device's values against glibc's (Python's math) at 20,000 points of each input
    range, within those bounds (on the emulator the device functions are glibc's
    too, so this checks the forms; on a GPU, its libm as well)."""
    import math

    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(11 + which)
    n = 20000
    eps = 2.0**-52
    if which == 0:  # the sRGB gamma, c > 10/255 (x = (c + 0.055) / 1.055 in (0.089, 2.3))
        x = rng.uniform(10 / 255 + 1e-9, 2.298, n)
        want = np.array([math.pow((c + 0.055) * (1.0 / 1.055), 2.4) for c in x.tolist()])
        bound = 4.9 * eps * np.abs(want)
    elif which == 1:  # the cube root, c > 216/24389
        x = rng.uniform(216 / 24389, 8.0, n)
        want = np.array([math.pow(c, 1.0 / 3.0) for c in x.tolist()])
        bound = 6.4 * eps * np.abs(want)
    elif which == 2:  # T at float hues in [0, 3 pi)
        x = rng.uniform(0.0, 3 * math.pi, n).astype(np.float32).astype(np.float64)
        pi = 3.141592653589793
        want = np.array([1.0 - 0.17 * math.cos(h - pi / 6.0) + 0.24 * math.cos(2.0 * h)
                         + 0.32 * math.cos(3.0 * h + pi / 30.0) - 0.20 * math.cos(4.0 * h - 7.0 * pi / 20.0)
                         for h in x.tolist()])
        bound = np.full(n, 28.1 * eps)
    else:  # pow(x, 7) of floats
        x = rng.uniform(0.0, 200.0, n).astype(np.float32).astype(np.float64)
        want = np.array([math.pow(v, 7.0) for v in x.tolist()])
        bound = 3.5 * eps * np.abs(want)
    got = _device_values(rt, dev, which, x)
    err = np.abs(got - want)
    assert np.all(err <= bound), (which, float(np.max(err / np.maximum(bound, 1e-300))))
    # and not trivially: the forms are not glibc's calls, so some values differ
    assert np.count_nonzero(got != want) > 0


def test_the_doubt_test_at_a_rounding_equals_its_general_form(gpu):
    """ciede_round decides whether a double lies within 1e-6 float ulps of the midpoint
    of the floats around it from the double's 29 low bits (where the float is normal);
    the general form steps to both neighbours with nextafterf.  Both, at doubles placed
    just inside and just outside the window (2^29 * 1e-6 = 536.9 units of 2^-29 ulps)
    in many binades and both signs, at binade edges, subnormal, zero and huge values,
    equal Python's answer from the float grid."""
    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(5)
    floats = np.concatenate([
        rng.uniform(-3.0, 3.0, 300), rng.uniform(0.0, 400.0, 300) * 10.0 ** rng.integers(-30, 30, 300),
        [1.0, 2.0, 0.5, -1.0, 2.0**-126, 2.0**-125, 2.0**126, 2.0**127 - 2.0**103, 6103515648.0],
    ]).astype(np.float32)
    floats = floats[np.isfinite(floats)]
    ulp = np.spacing(np.abs(floats)).astype(np.float64)
    units = np.array([0, 1, 200, 535, 536, 537, 538, 2**27, 2**28 - 537, 2**28 - 536, 2**28 - 1, 2**28])
    x = np.concatenate([floats.astype(np.float64)[:, None] + sign * ulp[:, None] * ((2**28 - units) / 2.0**29)
                        for sign in (1.0, -1.0)], axis=1).ravel()
    x = np.concatenate([x, [0.0, -0.0, 1e-40, -3e-39, 2.0**-127 * 1.5, 1.8e38, -2.0**127 * 1.5, 1e-300]])
    x = x[np.isfinite(x)]
    lo = np.where(x.astype(np.float32).astype(np.float64) <= x, x.astype(np.float32),
                  np.nextafter(x.astype(np.float32), np.float32(-np.inf))).astype(np.float32)
    hi = np.nextafter(lo, np.float32(np.inf))
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    want = (np.abs(x - (lo64 + hi64) * 0.5) < 1e-6 * (hi64 - lo64)).astype(np.float64)
    fast = _device_values(rt, dev, 4, x)
    general = _device_values(rt, dev, 5, x)
    assert np.array_equal(general, want)
    assert np.array_equal(fast, want)
    assert 0 < want.sum() < want.size / 2


@pytest.mark.parametrize("which", [6, 7], ids=["atan2_y_1", "atan2_1_x"])
def test_the_hue_angle_stays_within_its_bound(gpu, which):
    """ciede.cu's atan2 (a table of atan(k/64) and a short series, its header's bound: 6
    ulps) against glibc's (Python's math) at 40,000 floats of every magnitude and sign,
    with either argument 1 (so every quotient in [0, 1] and its inverse, every quadrant),
    and exactly at 0, -0, +-1 and the table's own points."""
    import math

    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(29 + which)
    mags = 10.0 ** rng.uniform(-12.0, 12.0, 30000)
    x = np.concatenate([mags * rng.choice([-1.0, 1.0], mags.size), rng.uniform(-2.0, 2.0, 10000),
                        [0.0, -0.0, 1.0, -1.0], np.arange(65) / 64.0, -np.arange(65) / 64.0,
                        64.0 / np.arange(1, 65)])
    x = x.astype(np.float32).astype(np.float64)
    want = np.array([math.atan2(v, 1.0) if which == 6 else math.atan2(1.0, v) for v in x.tolist()])
    got = _device_values(rt, dev, which, x)
    ulp = np.spacing(np.abs(want))
    err = np.abs(got - want)
    assert np.all(err <= 6 * ulp), float(np.max(err / ulp))
    assert np.array_equal(np.signbit(got), np.signbit(want))
    # exact where glibc's is: the table's points and the axes
    exact = np.isin(np.abs(x), [0.0, 1.0])
    assert np.array_equal(got[exact], want[exact])


@pytest.mark.parametrize("which", [8, 9, 10], ids=["sin", "sincos_sin", "sincos_cos"])
def test_the_short_sines_stay_within_their_bounds(gpu, which):
    """ciede.cu's sine for |x| <= 1.6 (the hue difference's half, R_T's angle: 2.5 ulps)
    and its sine and cosine of T's hue in [0, 3 pi) (2^-52 each, the bound T's takes),
    against glibc's (Python's math) at 40,000 floats, and past their ranges (where
    CUDA's general functions take over, the C library's on the emulator)."""
    import math

    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(41 + which)
    if which == 8:
        x = np.concatenate([rng.uniform(-1.6, 1.6, 30000), rng.uniform(-1.6, 1.6, 10000) * 2.0 ** -rng.integers(0, 40, 10000),
                            [0.0, -0.0, 1.6, -1.6, math.pi / 2, math.pi / 3]])
    else:
        x = np.concatenate([rng.uniform(0.0, 3 * math.pi, 40000), np.arange(13) * math.pi / 4])
    x = np.concatenate([x.astype(np.float32).astype(np.float64), [12.5, -3.0, 1.7, 100.0]])
    fn = math.cos if which == 10 else math.sin
    want = np.array([fn(v) for v in x.tolist()])
    got = _device_values(rt, dev, which, x)
    err = np.abs(got - want)
    if which == 8:
        assert np.all(err <= 2.5 * np.spacing(np.abs(want))), float(np.max(err / np.spacing(np.abs(want))))
        assert np.array_equal(np.signbit(got), np.signbit(want))
    else:
        assert np.all(err <= 2.0**-52), float(np.max(err))
    assert np.count_nonzero(got != want) > 0


def test_the_hue_weights_exp_stays_within_its_bound(gpu):
    """ciede.cu's exp for -128 <= x <= 0 (exp(-deg2) of R_T's hue weight: 1.5 ulps)
    against glibc's at 40,000 floats (as -deg2 is: minus a float's square), at 0 and
    the range's ends, and past it (CUDA's general exp there, the C library's on the
    emulator)."""
    import math

    rt, dev = gpu
    dev.make_current()
    rng = np.random.default_rng(53)
    deg = rng.uniform(-11.2, 11.2, 40000).astype(np.float32)
    x = np.concatenate([-(deg * deg).astype(np.float64), -rng.uniform(0.0, 1e-3, 1000).astype(np.float32),
                        [0.0, -0.0, -128.0, -0.34657359, -0.34657360, -121.0, -130.0, 0.5]])
    x = x.astype(np.float32).astype(np.float64)
    want = np.array([math.exp(v) for v in x.tolist()])
    got = _device_values(rt, dev, 11, x)
    err = np.abs(got - want)
    assert np.all(err <= 1.5 * np.spacing(want)), float(np.max(err / np.spacing(want)))
    assert np.count_nonzero(got != want) > 0
