""":mod:`._speed_linalg` for many matrices at once, bit for bit the same values.

SpEED needs the eigenvalues and a linear solve of one 25 x 25 matrix per
picture; a frame has two (``speed_temporal``) or four (``speed_chroma``)
pictures and a GPU batch many frames.  The scalar routines spend their time
in numpy's per-call cost, so here every step runs on a stack of matrices
(the leading axis).  An elementwise numpy operation on float32 (float64)
arrays is the same IEEE operation per element as on scalars, so each matrix
sees exactly the operations of :mod:`._speed_linalg` in the same order:

* sums stay sequential (``np.add.accumulate`` along the summed axis, or an
  explicit loop over the index that libvmaf's inner loop runs over), never
  ``np.sum`` or a BLAS product;
* a branch on a value becomes a mask: both sides are computed, each matrix
  keeps the side its own values choose (the other side's NaNs and
  infinities are discarded, hence ``np.errstate(all="ignore")``);
* a data-dependent iteration count (the QR iterations until the
  subdiagonal vanishes, a Givens chase over a block of its own size, an
  early return from the back substitution) becomes a loop that runs until
  every matrix is done, updating only the matrices (rows) still running.

The scalar module stays the reference; tests/features/test_speed_batched.py
checks the two agree bit for bit on random and degenerate matrices.
"""

from __future__ import annotations

import numpy as np

from ._speed_linalg import _MAX_ITERS, EIGENVALUE_EPS, symmetric_eigenvalues

__all__ = ["symmetric_eigenvalues_batch", "solve_linear_system_batch", "eigenvalues_of", "SCALAR_BELOW"]

F32 = np.float32
_ZERO = F32(0.0)
_ONE = F32(1.0)


def _sign(x: np.ndarray) -> np.ndarray:
    """``_sign`` as a float32 factor: 1 where x >= 0, else -1 (NaN included)."""
    return np.where(x >= 0, _ONE, F32(-1.0))


def _sqrt(x: np.ndarray) -> np.ndarray:
    """``F32(math.sqrt(float(x)))``: the double square root (correctly rounded in both) rounded to float."""
    return np.sqrt(x.astype(np.float64)).astype(np.float32)


def _pythagoras(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _sqrt(x * x + y * y)


def _seq_sum(values: np.ndarray) -> np.ndarray:
    """``_seq_sum`` of each row: the last axis added in index order, starting from its first term."""
    if values.shape[-1] == 0:
        return np.zeros(values.shape[:-1], np.float32)
    return np.add.accumulate(values, axis=-1, dtype=np.float32)[..., -1]


# --- eigenvalues -----------------------------------------------------------------------------------

def _householder(a: np.ndarray, col: int, start: int, size: int) -> np.ndarray:
    """``_householder`` of every matrix: tau per matrix, the columns scaled in place where the scalar does."""
    if size - start == 1:
        return np.zeros(a.shape[0], np.float32)
    tail = a[:, start + 1:size, col]
    xnorm = _sqrt(_seq_sum(tail * tail))
    alpha = a[:, start, col].copy()
    beta = -_sign(alpha) * _pythagoras(alpha, xnorm)
    tau = (beta - alpha) / beta
    s = alpha - beta
    live = xnorm != 0
    scale = live & (s != 0)
    seg = a[:, start:size, col]
    a[:, start:size, col] = np.where(scale[:, None], seg / s[:, None], seg)
    a[:, start, col] = np.where(scale, beta, a[:, start, col])
    return np.where(live, tau, _ZERO)


def _tridiagonalise(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_tridiagonalise`` of each ``a[p]`` in place: (d, sd), each (P, ...)."""
    n = a.shape[1]
    for i in range(n - 2):
        lo = i + 1
        tau = _householder(a, i, lo, n)
        active = tau != 0
        if not active.any():
            continue
        vv = a[:, lo:, i].copy()
        vv[:, 0] = _ONE
        blk = a[:, lo:, lo:]
        x = np.add.accumulate((tau[:, None, None] * blk) * vv[:, None, :], axis=2, dtype=np.float32)[:, :, -1]
        x = x + _ZERO
        xv = _seq_sum(x * vv)
        alpha = ((-0.5 * tau.astype(np.float64)) * xv.astype(np.float64)).astype(np.float32)
        x = x + alpha[:, None] * vv
        upd = blk - ((x[:, :, None] * vv[:, None, :]) + (vv[:, :, None] * x[:, None, :]))
        a[:, lo:, lo:] = np.where(active[:, None, None], upd, blk)
    rows = np.arange(n)
    return a[:, rows, rows].copy(), a[:, rows[1:], rows[:-1]].copy()


def _chop_small(d: np.ndarray, sd: np.ndarray, a: np.ndarray, n: np.ndarray) -> None:
    """``_chop_small`` of each row over its own range ``[a, a + n - 1)`` (the tests are independent)."""
    idx = np.arange(sd.shape[1])
    inside = (idx[None, :] >= a[:, None]) & (idx[None, :] < (a + n - 1)[:, None])
    small = np.abs(sd.astype(np.float64)) < EIGENVALUE_EPS * (np.abs(d[:, :-1]) + np.abs(d[:, 1:])).astype(np.float64)
    sd[inside & small] = _ZERO


def _givens(x: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_givens``: (c, s).  Where z == 0, |z| > |x| is false too, so one test picks the branch."""
    big = np.abs(z) > np.abs(x)
    t = -np.where(big, x, z) / np.where(big, z, x)  # -x / z, or -z / x
    f = (1.0 / np.sqrt(_ONE + t * t, dtype=np.float64)).astype(np.float32)
    ft = f * t
    zero = z == 0
    f1 = np.where(zero, _ONE, f)
    ft0 = np.where(zero, _ZERO, ft)
    return np.where(big, ft0, f1), np.where(big, f1, ft0)


def _qr_step(d: np.ndarray, sd: np.ndarray, a: np.ndarray, n: np.ndarray) -> None:
    """``_qr_step`` on each row's block ``d[r, a[r]:a[r] + n[r]]`` (n >= 2), in place.

    ``d`` and ``sd`` carry padding columns past the matrix (at least n + 2 of them): a row whose
    block is shorter than the longest keeps stepping on garbage (its reads land in the padding or
    on values it no longer uses) and its writes go to the last padding column, so its real values
    are written only at the steps the scalar takes.  Its last state is stored at its own last step.
    The flat indices of every step's reads and writes are tabled before the chase.
    """
    rows, wd = d.shape
    ws = sd.shape[1]
    r = np.arange(rows)
    ta, tb, tab = d[r, a + n - 2], d[r, a + n - 1], sd[r, a + n - 2]
    dt = ((ta - tb).astype(np.float64) / 2.0).astype(np.float32)
    pyt = _pythagoras(dt, tab)
    mu = np.where(dt > 0, tb - tab * (tab / (dt + pyt)),
                  np.where(dt == 0, tb - np.abs(tab), tb + tab * (tab / (-dt + pyt))))
    da, sa = d[r, a], sd[r, a]
    mu = np.where(EIGENVALUE_EPS * np.abs(mu).astype(np.float64) > (np.abs(da) + np.abs(sa)).astype(np.float64),
                  _ZERO, mu)
    x = da - mu
    z = sa
    bk = zk = np.zeros_like(x)
    ap, bp = da, sa
    aq = d[r, a + 1]
    bq = sd[r, a + 1]  # unused where n == 2 (the scalar never reads it there)
    last = n - 2
    steps = int(n.max()) - 1
    ks = np.arange(steps)[:, None]
    col = a[None, :] + ks
    run = ks <= last[None, :]
    dflat, sflat = d.reshape(-1), sd.reshape(-1)
    read_d = (r * wd)[None, :] + col + 2
    read_s = (r * ws)[None, :] + col + 2
    write_d = np.where(run, (r * wd)[None, :] + col, wd - 1)
    write_prev = np.where(run & (ks > 0), (r * ws)[None, :] + col - 1, ws - 1)
    write_next = np.where(ks < last[None, :], (r * ws)[None, :] + col + 1, ws - 1)
    finals = {int(k): np.nonzero(last == k)[0] for k in np.unique(last)}
    for k in range(steps):
        c, s = _givens(x, z)
        bk1 = c * bk - s * zk
        # the scalar's expressions; a product or sum that appears twice there is the same value here
        u3 = s * ap + c * bp
        u4 = s * bp + c * aq
        ap1 = c * (c * ap - s * bp) + s * (s * aq - c * bp)
        bk = c * u3 - s * u4
        zk = -s * bq
        ap = s * u3 + c * u4
        bp = c * bq
        aq = dflat[read_d[k]]
        bq = sflat[read_s[k]]
        dflat[write_d[k]] = ap1
        sflat[write_prev[k]] = bk1
        sflat[write_next[k]] = bp
        done = finals.get(k)
        if done is not None:
            d[done, (a + n - 1)[done]] = ap[done]
            sd[done, (a + n - 2)[done]] = bk[done]
        x, z = bk, zk


def symmetric_eigenvalues_batch(matrices: np.ndarray) -> np.ndarray:
    """``symmetric_eigenvalues`` of each of a ``(P, n, n)`` stack: ``(P, n)``, each row the scalar's."""
    a = np.array(matrices, dtype=np.float32, copy=True)
    p, n = a.shape[0], a.shape[1]
    if n == 1:
        return a[:, 0].copy()
    with np.errstate(all="ignore"):
        d, sd = _tridiagonalise(a)
        _chop_small(d, sd, np.zeros(p, np.int64), np.full(p, n))
        # padding for _qr_step (its reads past a block, and the column its masked writes go to)
        d = np.concatenate([d, np.zeros((p, n + 3), np.float32)], axis=1)
        sd = np.concatenate([sd, np.zeros((p, n + 3), np.float32)], axis=1)
        b = np.full(p, n - 1)
        it = np.zeros(p, np.int64)
        rows = np.arange(p)
        while True:
            # the scalar loop's "sd[b - 1] == 0: b -= 1" steps (they do not count as iterations)
            while True:
                run = (b > 0) & (it < _MAX_ITERS)
                drop = run & (sd[rows, np.maximum(b - 1, 0)] == 0)
                if not drop.any():
                    break
                b = b - drop
            if not run.any():
                return d[:, :n]
            idx = rows[run]
            bb = b[idx]
            ss = sd[idx]
            # lo: the start of the unreduced block ending at bb (the largest j <= bb - 1 with j == 0 or ss[j - 1] == 0)
            j = np.arange(n - 1)
            cut = (ss[:, :n - 1] == 0) & (j[None, :] < (bb - 1)[:, None])
            lo = np.where(cut.any(axis=1), (n - 2) - np.argmax(cut[:, ::-1], axis=1) + 1, 0)
            size = bb - lo + 1
            dd = d[idx]
            _qr_step(dd, ss, lo, size)
            _chop_small(dd, ss, lo, size)
            d[idx] = dd
            sd[idx] = ss
            it[idx] += 1


# --- the linear system ---------------------------------------------------------------------------

def _matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``_matmul`` of each pair of a stack: ``acc = 0; acc += x[i, k] * y[k, j]`` for k ascending."""
    acc = np.zeros((x.shape[0], x.shape[1], y.shape[2]), np.float32)
    term = np.empty_like(acc)
    for k in range(x.shape[2]):
        np.multiply(x[:, :, k, None], y[:, None, k, :], out=term)
        acc += term
    return acc


def _norm(v: np.ndarray) -> np.ndarray:
    return _sqrt(_seq_sum(v * v))


def _qr_decomposition(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_qr_decomposition`` of each matrix of a stack: (Q, R).

    Two shortcuts, each exact:

    * the scalar's Z after step k is cut to its minor at step k + 1 (its first k + 1 rows and
      columns become the identity's), so only the product's rows and columns past k are formed;
    * at step k the Householder vector's first k entries are zeros (Z's column k above row k is
      the identity's), so H's entries outside its lower-right block are signed zeros (and ones on
      the diagonal).  Where every value is finite, the terms ``H[i, m] * Y[m, j]`` with m < k are
      signed zeros, and a float sum that starts at +0 is never -0 (round to nearest: x + -x is
      +0), so adding a zero leaves it as it is: the sums can start at m = k, and the rows above k
      of ``H Q`` are Q's own (plus +0, which turns a -0 into +0, as the sum of zeros does).  A
      stack holding a NaN or an infinity takes the full products, like the scalar.
    """
    n = a.shape[1]
    eye = np.eye(n, dtype=np.float32)
    z = a.copy()
    q = np.broadcast_to(eye, a.shape).copy()
    diag = np.arange(n)
    for k in range(n - 1):
        vec = z[:, :, k].copy()
        norm = _norm(vec)
        vec[:, k] += _sign(a[:, k, k]) * norm
        vec /= _norm(vec)[:, None]
        h = (F32(-2.0) * vec)[:, :, None] * vec[:, None, :]
        h[:, diag, diag] += _ONE
        finite = bool(np.isfinite(vec).all() and np.isfinite(q).all() and np.isfinite(z).all())
        m0 = k if finite else 0
        if k < n - 2:
            minor = _matmul(h[:, k + 1:, m0:], z[:, m0:, k + 1:])
            z = np.broadcast_to(eye, a.shape).copy()
            z[:, k + 1:, k + 1:] = minor
        if finite:
            lower = _matmul(h[:, k:, k:], q[:, k:, :])
            q[:, :k] += _ZERO
            q[:, k:] = lower
        else:
            q = _matmul(h, q)
    r = _matmul(q, a)
    return np.ascontiguousarray(q.transpose(0, 2, 1)), r


def solve_linear_system_batch(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``solve_linear_system`` of each ``a[p] X = b[p]``: (X, ok); where ``ok[p]`` is False the
    scalar returns None (a diagonal entry of R below EIGENVALUE_EPS) and ``X[p]`` is meaningless."""
    a = np.asarray(a, np.float32)
    with np.errstate(all="ignore"):
        q, r = _qr_decomposition(a)
        rhs = _matmul(np.ascontiguousarray(q.transpose(0, 2, 1)), np.asarray(b, np.float32))
        n = r.shape[1]
        x = np.zeros_like(rhs)
        ok = np.ones(a.shape[0], bool)
        for i in range(n - 1, -1, -1):
            den = r[:, i, i]
            ok &= ~(np.abs(den.astype(np.float64)) < EIGENVALUE_EPS)
            term = rhs[:, i].copy()
            for k in range(i + 1, n):
                term -= x[:, k] * r[:, i, k, None]
            x[:, i] = term / den[:, None]
    return x, ok


#: below this many matrices the scalar eigenvalue routine is the faster (1080p chroma matrices, 2 shared
#: cores: the stack's ~570 Givens steps cost about as much as 12 matrices' scalar steps; each matrix's
#: chase is sequential, so numpy's per-call cost is paid once a step whatever the stack's size)
SCALAR_BELOW = 12


def eigenvalues_of(matrices: np.ndarray) -> np.ndarray:
    """``symmetric_eigenvalues`` of each matrix of a ``(P, n, n)`` stack, by whichever of the scalar
    and the stacked routine is the faster for P (their values are the same)."""
    if len(matrices) < SCALAR_BELOW:
        return np.stack([symmetric_eigenvalues(m) for m in matrices]).reshape(len(matrices), -1)
    return symmetric_eigenvalues_batch(matrices)
