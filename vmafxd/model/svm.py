"""nu-SVR with an RBF kernel, as libsvm evaluates it inside libvmaf.

The libsvm model text in each VMAF model is parsed once into a dense matrix of
support vectors (a feature missing from a sparse vector is 0, and libsvm's
sparse kernel then adds ``x_k * x_k``, which is exactly ``(x_k - 0)**2``).
Prediction follows libsvm's order: squared distances summed feature by
feature in index order, ``exp(-gamma * d2)`` (the C library's), then ``sum(coef_i * k_i)``
accumulated support vector by support vector, minus ``rho``.  The running sum
is a cumulative sum so the order is the sequential one libsvm uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["SvmModel", "parse_libsvm", "SvmParseError"]

#: ``native_rbf(model, x)``: the same decision values computed by compiled code (the same operations
#: in the same order: vmafxd/lanes/native/host_math.cpp), set by a lane that could build it
native_rbf: Callable[["SvmModel", np.ndarray], np.ndarray] | None = None


class SvmParseError(ValueError):
    pass


@dataclass(frozen=True)
class SvmModel:
    gamma: float
    rho: float
    coef: np.ndarray  # (n_sv,)
    sv: np.ndarray  # (n_sv, n_features), float64
    n_features: int

    def __post_init__(self) -> None:
        # the support vectors feature by feature (contiguous rows), made once
        object.__setattr__(self, "_sv_t", np.ascontiguousarray(self.sv.T))

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Decision values for ``x`` of shape (n_frames, n_features)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1:
            x = x[None, :]
        if x.shape[1] < self.sv.shape[1]:
            raise ValueError(f"model needs {self.sv.shape[1]} features, got {x.shape[1]}")
        if native_rbf is not None:
            return native_rbf(self, x)
        nf = self.sv.shape[1]
        if nf == 0:
            d2 = np.zeros((x.shape[0], self.sv.shape[0]))
        else:
            # every (feature, frame, support vector) difference squared at once (support vectors
            # innermost: long contiguous rows); then summed feature by feature in index order
            # from the first (0.0 + a is a, as libsvm starts)
            sq = np.ascontiguousarray(x[:, :nf].T)[:, :, None] - self._sv_t[:, None, :]
            sq *= sq
            d2 = sq[0].copy()
            for k in range(1, nf):
                d2 += sq[k]
        # the C library's exp, as libsvm calls it: numpy's vectorised exp rounds differently
        # for a few arguments in a hundred (seen with the v1.0.16 models' 215 support vectors)
        # (map straight into an array: a third less time than a list comprehension)
        arg = ((-self.gamma) * d2).ravel().tolist()
        kern = np.fromiter(map(math.exp, arg), dtype=np.float64, count=len(arg)).reshape(d2.shape)
        terms = self.coef[None, :] * kern
        total = np.cumsum(terms, axis=1)[:, -1] if terms.shape[1] else np.zeros(x.shape[0])
        return total - self.rho


def parse_libsvm(text: str) -> SvmModel:
    lines = text.splitlines()
    header: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if line == "SV":
            break
        if not line:
            continue
        key, _, val = line.partition(" ")
        header[key] = val.strip()
    else:
        raise SvmParseError("libsvm model has no SV section")
    if header.get("svm_type") != "nu_svr":
        raise SvmParseError(f"svm_type {header.get('svm_type')!r} is not nu_svr")
    if header.get("kernel_type") != "rbf":
        raise SvmParseError(f"kernel_type {header.get('kernel_type')!r} is not rbf")
    try:
        gamma = float(header["gamma"])
        rho = float(header["rho"].split()[0])
        total = int(header["total_sv"])
    except (KeyError, ValueError, IndexError) as e:
        raise SvmParseError(f"libsvm header incomplete: {e}") from None
    coefs: list[float] = []
    rows: list[dict[int, float]] = []
    for line in lines[i:]:
        parts = line.split()
        if not parts:
            continue
        coefs.append(float(parts[0]))
        row = {}
        for p in parts[1:]:
            idx, _, val = p.partition(":")
            row[int(idx)] = float(val)
        rows.append(row)
    if len(rows) != total:
        raise SvmParseError(f"total_sv says {total}, found {len(rows)} support vectors")
    n_feat = max((max(r) for r in rows if r), default=0)
    sv = np.zeros((len(rows), n_feat))
    for r, row in enumerate(rows):
        for idx, val in row.items():
            if idx < 1:
                raise SvmParseError(f"support vector {r} has index {idx} < 1")
            sv[r, idx - 1] = val
    return SvmModel(gamma, rho, np.array(coefs), sv, n_feat)
