"""The small dense linear algebra of libvmaf's SpEED (``speed.c``), op for op in C ``float``.

SpEED needs, per picture, the eigenvalues of a 25 x 25 covariance matrix
and the solution of ``K X = Y`` for that matrix.  libvmaf writes its own
routines for both (a GSL-style Householder tridiagonalisation and implicit
symmetric QR for the eigenvalues; a Householder QR decomposition with full
matrices and back substitution for the system), every value a C ``float``.
Each reordering changes the last bits, so the code below follows those loops
exactly: scalar ``np.float32`` arithmetic where libvmaf is scalar, numpy
vector operations only where every element still sees the same operations in
the same order (a product per element, or an accumulation whose index runs
in the same direction as libvmaf's innermost loop).  Where C promotes to
``double`` (a ``double`` literal or a ``sqrt``), the value is widened with
``float()`` at the same point and rounded back with ``F32`` where C assigns
to a ``float``.

numpy 2's scalar rules (NEP 50) keep ``np.float32 * 0.5`` in float32, while
C computes ``float * 0.5`` in double: every double literal below is applied
to a Python ``float`` on purpose.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["symmetric_eigenvalues", "solve_linear_system", "EIGENVALUE_EPS"]

F32 = np.float32
_ZERO = F32(0.0)
_ONE = F32(1.0)

#: speed.c's EIGENVALUE_EPS (a double) and EIGENVALUE_MAX_ITERS
EIGENVALUE_EPS = 1e-6
_MAX_ITERS = 500


def _sign(x: np.float32) -> int:
    return 1 if x >= 0 else -1


def _sqrt(x: np.float32) -> np.float32:
    """C ``sqrt(float)`` assigned to a float: the double square root rounded once more, which is
    the float square root (53 >= 2 * 24 + 2 bits, so the double rounding is harmless)."""
    return F32(math.sqrt(float(x)))


def _pythagoras(x: np.float32, y: np.float32) -> np.float32:
    return _sqrt(x * x + y * y)


def _seq_sum(values: np.ndarray) -> np.float32:
    """``float s = 0; for (...) s += v[i];`` (np.add.accumulate is strictly sequential)."""
    if values.size == 0:
        return _ZERO
    return np.add.accumulate(values, dtype=np.float32)[-1]


def _householder(a: np.ndarray, col: int, start: int, size: int) -> np.float32:
    """``compute_householder_transform``: tau, with the column scaled in place."""
    if size - start == 1:
        return _ZERO
    tail = a[start + 1:size, col]
    xnorm = _sqrt(_seq_sum(tail * tail))
    if xnorm == 0:
        return _ZERO
    alpha = a[start, col]
    beta = F32(-_sign(alpha)) * _pythagoras(alpha, xnorm)
    tau = (beta - alpha) / beta
    s = alpha - beta
    if s != 0:
        a[start:size, col] /= s
        a[start, col] = beta
    return tau


def _tridiagonalise(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``convert_to_tridiagonal`` (an adapted gsl_linalg_symmtd_decomp) of ``a`` in place: (d, sd)."""
    n = a.shape[0]
    v = np.zeros(n, np.float32)
    for i in range(n - 2):
        lo = i + 1
        tau = _householder(a, i, lo, n)
        v[lo:] = a[lo:, i]
        if tau != 0:
            a[lo, i] = v[lo]
            v[lo] = _ONE
            blk = a[lo:, lo:]
            vv = v[lo:]
            # x[r] = sum_j tau * A[r, j] * v[j], j ascending, as (tau * A) * v
            x = _row_sums((tau * blk) * vv)
            xv = _seq_sum(x * vv)
            alpha = F32(-0.5 * float(tau) * float(xv))  # a double expression assigned to a float
            x += alpha * vv
            # A -= x v' + v x' (each term a float product, summed, then subtracted)
            blk -= np.outer(x, vv) + np.outer(vv, x)
    d = np.diagonal(a).copy()
    sd = np.diagonal(a, offset=-1).copy()
    return d, sd


def _chop_small(d: np.ndarray, sd: np.ndarray, a: int, n: int) -> None:
    for i in range(a, a + n - 1):
        if abs(float(sd[i])) < EIGENVALUE_EPS * float(abs(d[i]) + abs(d[i + 1])):
            sd[i] = _ZERO


def _trailing_eigenvalue(d: np.ndarray, sd: np.ndarray, a: int, n: int) -> np.float32:
    ta = d[a + n - 2]
    tb = d[a + n - 1]
    tab = sd[a + n - 2]
    dt = F32(float(ta - tb) / 2.0)
    if dt > 0:
        return tb - tab * (tab / (dt + _pythagoras(dt, tab)))
    if dt == 0:
        return tb - abs(tab)
    return tb + tab * (tab / (-dt + _pythagoras(dt, tab)))


def _givens(x: np.float32, z: np.float32) -> tuple[np.float32, np.float32]:
    """``create_givens``: (c, s); ``1.0 / sqrt(...)`` is a double rounded to float."""
    if z == 0:
        return _ONE, _ZERO
    if abs(z) > abs(x):
        t = -x / z
        s1 = F32(1.0 / math.sqrt(float(_ONE + t * t)))
        return s1 * t, s1
    t = -z / x
    c1 = F32(1.0 / math.sqrt(float(_ONE + t * t)))
    return c1, c1 * t


def _qr_step(d: np.ndarray, sd: np.ndarray, a: int, n: int) -> None:
    """``qr_step``: one implicit symmetric QR step on the block ``d[a:a + n]``."""
    mu = _trailing_eigenvalue(d, sd, a, n)
    if EIGENVALUE_EPS * float(abs(mu)) > float(abs(d[a]) + abs(sd[a])):
        mu = _ZERO
    x = d[a] - mu
    z = sd[a]
    ak = bk = zk = _ZERO
    ap = d[a]
    bp = sd[a]
    aq = d[a + 1]
    if n == 2:
        c, s = _givens(x, z)
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq)
        aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq)
        d[a] = ap1
        sd[a] = bp1
        d[a + 1] = aq1
        return
    bq = sd[a + 1]
    for k in range(n - 1):
        c, s = _givens(x, z)
        bk1 = c * bk - s * zk
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bp1 = c * (s * ap + c * bp) - s * (s * bp + c * aq)
        zp1 = -s * bq
        aq1 = s * (s * ap + c * bp) + c * (s * bp + c * aq)
        bq1 = c * bq
        ak, bk, zk = ap1, bp1, zp1
        ap, bp = aq1, bq1
        if k < n - 2:
            aq = d[a + k + 2]
        if k < n - 3:
            bq = sd[a + k + 2]
        d[a + k] = ak
        if k > 0:
            sd[a + k - 1] = bk1
        if k < n - 2:
            sd[a + k + 1] = bp
        x, z = bk, zk
    d[a + n - 1] = ap
    sd[a + n - 2] = bk


def symmetric_eigenvalues(matrix: np.ndarray) -> np.ndarray:
    """``compute_eigenvalues`` of a symmetric float32 matrix (unsorted, libvmaf's order).

    Like libvmaf, it stops after 500 QR steps whether or not the matrix has
    converged (libvmaf only logs a warning), and returns the diagonal then.
    """
    a = np.array(matrix, dtype=np.float32, copy=True)
    n = a.shape[0]
    if n == 1:
        return a[0].copy()
    d, sd = _tridiagonalise(a)
    _chop_small(d, sd, 0, n)
    b, it = n - 1, 0
    while b > 0 and it < _MAX_ITERS:
        if sd[b - 1] == 0:
            b -= 1
            continue
        lo = b - 1
        while lo > 0 and sd[lo - 1] != 0:
            lo -= 1
        block = b - lo + 1
        _qr_step(d, sd, lo, block)
        _chop_small(d, sd, lo, block)
        it += 1
    return d


def _row_sums(terms: np.ndarray) -> np.ndarray:
    """``acc = 0.0f; for k: acc += terms[..., k, ...]`` along axis 1 (the last of a 2-D array).

    ``np.add.accumulate`` adds in index order; it starts from the first term
    rather than from +0, which differs only where every term is a zero and
    the first is -0: a C sum that starts at +0 never ends at -0 (round to
    nearest), so adding +0 at the end makes the two equal in every case.
    """
    if terms.shape[1] == 0:
        return np.zeros(terms.shape[:1] + terms.shape[2:], np.float32)
    return np.add.accumulate(terms, axis=1, dtype=np.float32)[:, -1] + _ZERO


def _matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``matrix_mul``: ``dst[i, j] += x[i, k] * y[k, j]`` for k ascending, in float."""
    return _row_sums(x[:, :, None] * y[None, :, :])


def _norm(v: np.ndarray) -> np.float32:
    return _sqrt(_seq_sum(v * v))


def _qr_decomposition(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``matrix_qr_decomposition``: (Q, R) with ``A = Q R``, by Householder reflections on full matrices."""
    n = a.shape[0]
    z = a.copy()
    q = np.eye(n, dtype=np.float32)
    eye = np.eye(n, dtype=np.float32)
    for k in range(n - 1):
        # matrix_minor: the first k rows and columns become the identity's
        z[:k, :] = eye[:k, :]
        z[:, :k] = eye[:, :k]
        vec = z[:, k].copy()
        norm = _norm(vec)
        vec[k] += F32(_sign(a[k, k])) * norm
        vec /= _norm(vec)
        # I - 2 v v': (-2 * v[i]) * v[j], then 1 added on the diagonal
        h = np.multiply.outer(F32(-2.0) * vec, vec)
        h[np.diag_indices(n)] += _ONE
        z = _matmul(h, z)
        q = _matmul(h, q)
    r = _matmul(q, a)
    return q.T.copy(), r


def solve_linear_system(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``solve_linear_system``: X with ``A X = B`` through A's QR decomposition, or None where
    libvmaf's back substitution meets a diagonal entry of R below EIGENVALUE_EPS."""
    q, r = _qr_decomposition(np.asarray(a, np.float32))
    rhs = _matmul(q.T.copy(), np.asarray(b, np.float32))
    n = r.shape[0]
    x = np.zeros_like(rhs)
    for i in range(n - 1, -1, -1):
        den = r[i, i]
        if abs(float(den)) < EIGENVALUE_EPS:
            return None
        term = rhs[i].copy()
        for k in range(i + 1, n):
            term -= x[k] * r[i, k]
        x[i] = term / den
    return x
