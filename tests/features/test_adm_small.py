"""Integer ADM's scalar path for a few frames (``_adm_small``) gives the whole-array path's bits.

Both paths score int64 sums (what the CPU twin and the GPU kernels give); the
sums here are real ones of synthetic pictures and random ones over the whole
range the C arithmetic sees (0, small, large; past 2**53 some whose int64 ->
float conversion rounds otherwise than int64 -> double -> float would), under
every option that changes the arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

from .test_adm import synthetic_pair
from vmafxd.features import _adm_small, adm
from vmafxd.features.adm import DECLARATION, compute_stats

_OPTIONS = [
    {},
    {"debug": True},
    {"adm_skip_scale0": True, "debug": True},
    {"adm_skip_aim": True},
    {"adm_skip_aim": True, "adm_skip_scale0": True, "debug": True},
    {"adm_enhn_gain_limit": 1.0, "adm_min_val": 0.7, "adm_dlm_weight": 0.3},
    {"adm_csf_mode": 1, "adm_noise_weight": 1400.0},
    {"adm_noise_weight": 0.0, "debug": True},  # a zero sum per scale: the scalar path declines
]


def _random_sums(rng, n: int) -> np.ndarray:
    """int64[n, 36]: magnitudes spread over the int64 range, zeros and a few negatives among them."""
    exp = rng.integers(0, 63, (n, 36))
    x = (rng.random((n, 36)) * 2.0 ** exp).astype(np.int64)
    x[rng.random((n, 36)) < 0.1] = 0
    x[rng.random((n, 36)) < 0.03] *= -1
    # 2**k + 2**(k - 24) + 1 (k >= 54): to float it rounds up; through double it would first
    # round to the float midpoint 2**k + 2**(k - 24), then to even, down to 2**k
    near = rng.random((n, 36)) < 0.15
    k = rng.integers(54, 63, int(near.sum()))
    x[near] = [(1 << int(e)) + (1 << int(e - 24)) + 1 for e in k]
    return x


def _real_sums(opts) -> np.ndarray:
    frames = []
    for seed in range(4):
        ref, dist = synthetic_pair(160, 90, 8)
        if seed:
            dist = np.clip(dist.astype(np.int32) + seed * 3 - 6, 0, 255).astype(np.uint8)
        frames.append(compute_stats(ref, dist, 8, opts))
    flat = np.zeros((90, 160), np.uint8)
    frames.append(compute_stats(flat, flat, 8, opts))  # only the noise floors
    return np.stack([np.concatenate([f.num.ravel(), f.den.ravel(), f.aim.ravel()]) for f in frames])


def _same_bits(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for k in want:
        g, w = np.asarray(got[k], np.float64), np.asarray(want[k], np.float64)
        assert g.shape == w.shape, k
        assert g.tobytes() == w.tobytes(), (k, g, w)


@pytest.mark.parametrize("over", _OPTIONS)
@pytest.mark.parametrize("code_path", ["avx512", "c"])
def test_scalar_path_gives_the_array_paths_bits(over, code_path):
    opts = DECLARATION.resolve_options(over)
    rng = np.random.default_rng(5)
    w, h = 160, 90
    c = adm._consts(w, h, opts)
    tables = _adm_small.tables_for(c, opts, code_path)
    batches = [_real_sums(opts)] + [_random_sums(rng, n) for n in (1, 2, 3, 4, 1, 1, 7)]
    declined = 0
    for sums in batches:
        for lo in range(len(sums)):
            for n in (1, 2, 4):
                part = sums[lo:lo + n]
                got = _adm_small.columns(tables, w, h, part, opts)
                want = adm._array_columns(c, w, h, part[:, :12].reshape(-1, 4, 3), part[:, 12:24].reshape(-1, 4, 3),
                                          part[:, 24:].reshape(-1, 4, 3), opts, code_path)
                if got is None:  # a zero per-scale denominator: only without a noise floor
                    assert over.get("adm_noise_weight") == 0.0
                    declined += 1
                    continue
                _same_bits(got, want)
    if over.get("adm_noise_weight") == 0.0:
        assert declined  # the zero sums reached the fallback


@pytest.mark.parametrize("over", [{}, {"adm_noise_weight": 0.0, "debug": True}])
def test_batch_scorer_and_columns_pick_a_path_and_agree(over):
    """``BatchScorer.records`` and ``columns_from_sums`` at every batch size around SMALL_BATCH
    (and through the fallback) give what the array path gives."""
    opts = DECLARATION.resolve_options(over)
    rng = np.random.default_rng(9)
    w, h = 177, 95
    scorer = adm.BatchScorer(w, h, opts)
    c = adm._consts(w, h, opts)
    for n in range(1, adm.SMALL_BATCH + 3):
        sums = _random_sums(rng, n)
        sums[:, 12:24] = np.abs(sums[:, 12:24])
        if over:
            sums[0, 12:15] = 0  # scale 0's den bands: 0 with no noise floor
        num, den, aim = (sums[:, 12 * k:12 * k + 12].reshape(n, 4, 3) for k in range(3))
        want = adm._array_columns(c, w, h, num, den, aim, opts, "avx512")
        _same_bits(scorer.records(sums.reshape(n, 3, 4, 3)), want)
        _same_bits(adm.columns_from_sums(w, h, num, den, aim, opts), want)
