"""SpEED's stacked linear algebra (``_speed_linalg_batched``) against the scalar routines, bit for bit.

The scalar ``_speed_linalg`` is libvmaf's arithmetic op for op (tests/features/test_speed.py checks the
scores it leads to against libvmaf); the stacked routines must give each matrix exactly its values, on
ordinary matrices and on the degenerate ones where the branches and iteration counts differ between
the matrices of one stack.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.features import _speed_core as core
from vmafxd.features._speed_linalg import solve_linear_system, symmetric_eigenvalues
from vmafxd.features._speed_linalg_batched import (SCALAR_BELOW, eigenvalues_of, solve_linear_system_batch,
                                                   symmetric_eigenvalues_batch)


def _bits(a: np.ndarray) -> np.ndarray:
    """The float32 bit patterns, every NaN as one (a NaN's sign and payload differ between numpy's
    array and scalar paths, and reach no score: it fails every test and prints as nan)."""
    a = np.asarray(a, np.float32)
    return np.where(np.isnan(a), np.uint32(0x7FC00000), a.view(np.uint32))


def _matrices(n: int, seed: int) -> np.ndarray:
    """Covariance-like matrices mixed with degenerate ones, in one stack."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(6):  # positive definite, conditioning from mild to poor
        x = rng.normal(size=(n, n + 3 + 10 * k)).astype(np.float32)
        x[0] *= np.float32(10.0 ** (k - 2))
        out.append((x @ x.T / x.shape[1]).astype(np.float32))
    x = rng.normal(size=(n, max(1, n // 3))).astype(np.float32)
    out.append((x @ x.T).astype(np.float32))                      # singular (low rank)
    out.append(np.zeros((n, n), np.float32))                      # zero
    out.append(np.eye(n, dtype=np.float32) * np.float32(3.0))     # one eigenvalue, repeated
    reps = np.repeat(np.float32([1.0, 2.0, 2.0, 5.0, 5.0]), -(-n // 5))[:n]
    out.append(np.diag(reps).astype(np.float32))                  # repeated eigenvalues, already diagonal
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    out.append((q @ np.diag(reps) @ q.T).astype(np.float32))      # repeated eigenvalues, rotated
    s = rng.normal(size=(n, n)).astype(np.float32)
    out.append(((s + s.T) / 2).astype(np.float32))                # indefinite (negative eigenvalues)
    blk = np.zeros((n, n), np.float32)                            # block diagonal: the QR splits early
    h = n // 2
    blk[:h, :h] = out[0][:h, :h]
    blk[h:, h:] = out[1][h:, h:]
    out.append(blk)
    one = np.zeros((n, n), np.float32)
    one[0, 0] = np.float32(1.0)                                   # a single non-zero entry
    out.append(one)
    if n <= 5:
        bad = out[0].copy()
        bad[n - 1, 0] = bad[0, n - 1] = np.float32(np.nan)        # never converges: the 500-step cap
        out.append(bad)
    return np.stack(out)


@pytest.mark.parametrize("n", [2, 3, 5, 25])
def test_the_stacked_eigenvalues_are_the_scalar_ones_bit_for_bit(n):
    mats = _matrices(n, seed=n)
    stacked = symmetric_eigenvalues_batch(mats)
    with np.errstate(all="ignore"):
        for i, m in enumerate(mats):
            assert np.array_equal(_bits(stacked[i]), _bits(symmetric_eigenvalues(m))), i
    # each matrix alone in its stack gives the same row too (nothing leaks between matrices)
    assert np.array_equal(_bits(symmetric_eigenvalues_batch(mats[3:4])[0]), _bits(stacked[3]))
    # the dispatcher takes either route and gives the same values
    assert np.array_equal(_bits(eigenvalues_of(mats[:SCALAR_BELOW - 1])), _bits(stacked[:SCALAR_BELOW - 1]))
    assert np.array_equal(_bits(eigenvalues_of(mats)), _bits(stacked))


@pytest.mark.parametrize("n", [2, 5, 25])
def test_the_stacked_solve_is_the_scalar_one_bit_for_bit(n):
    mats = _matrices(n, seed=100 + n)
    rng = np.random.default_rng(n)
    rhs = rng.normal(0, 20, size=(len(mats), n, 37)).astype(np.float32)
    x, ok = solve_linear_system_batch(mats, rhs)
    refused = 0
    with np.errstate(all="ignore"):
        for i in range(len(mats)):
            want = solve_linear_system(mats[i], rhs[i])
            assert ok[i] == (want is not None), i
            if want is None:
                refused += 1
            else:
                assert np.array_equal(_bits(x[i]), _bits(want)), i
    assert refused >= 1  # the low-rank matrix: the early return is exercised (the zero one gives NaNs)
    assert ok.sum() >= 6
    # a stack of finite values only takes the products' shortcuts (the stack above, with the zero
    # matrix's NaNs, takes the full products): the same values again
    finite = [0, 1, 2, 3, 4, 5, 8, 9, 10]
    x2, ok2 = solve_linear_system_batch(mats[finite], rhs[finite])
    assert np.array_equal(ok2, ok[finite])
    assert np.array_equal(_bits(x2[ok2]), _bits(x[finite][ok2]))


def test_est_params_of_a_stack_is_each_picture_alone():
    """The entropies, variances and singular flags of pictures whose matrices take different paths."""
    g = core.geometry(16 * 5 * 3, 16 * 5 * 2, 1.0)
    th, tw = g.truncated
    rng = np.random.default_rng(7)
    pictures = [rng.normal(0, 10, size=(th, tw)).astype(np.float32) for _ in range(SCALAR_BELOW + 2)]
    pictures[2] = np.zeros((th, tw), np.float32)  # a singular matrix
    covs = core.covariance_matrices(pictures, g)
    snn = np.float32(0.29)
    with np.errstate(all="ignore"):
        stacked = core.est_params_many(pictures, covs, g, snn)
        alone = [core.est_params(p, c, g, snn) for p, c in zip(pictures, covs)]
    assert stacked[2].singular and not stacked[0].singular
    for s, a in zip(stacked, alone):
        assert s.singular == a.singular
        assert np.array_equal(_bits(s.entropies), _bits(a.entropies))
        assert np.array_equal(_bits(s.variances), _bits(a.variances))
