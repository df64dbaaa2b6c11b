"""The C library's math over arrays (vmafxd/lanes/native/host_math.cpp) against the Python paths.

The SVM's decision values and ADM's ``powf`` loops must be the same bits whichever runs them: every
support vector of every built-in model against feature rows from inside and far outside the
models' ranges (the RBF's exp where numpy's vectorised exp and libmvec's would round differently),
and ``powf`` over ordinary, tiny, huge, signed and special values with the exponents the features use.
"""

from __future__ import annotations

import numpy as np
import pytest

from vmafxd.features import _adm_csf
from vmafxd.model import svm
from vmafxd.model.loader import BUILTIN_VERSIONS, load_model

from .conftest import load_runtime


@pytest.fixture(scope="module")
def lib():
    load_runtime("emu")  # skips without a host compiler
    from vmafxd.lanes.native import host_math, library

    return host_math, library("host_math", host_math._SIGNATURES)


def _python_predict(model, x, monkeypatch):
    monkeypatch.setattr(svm, "native_rbf", None)
    return model.predict(x)


def _rows(n_features: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.2, 1.2, size=(400, n_features))
    x[:50] *= 40.0  # far from every support vector: kernel values underflow towards 0
    x[50:60] = 0.0
    return x


@pytest.mark.parametrize("version", BUILTIN_VERSIONS)
def test_svm_decision_values_are_the_python_paths_bits(lib, version, monkeypatch):
    host_math, L = lib
    for m in load_model(f"version={version}").all_models():
        x = _rows(m.svm.sv.shape[1] + 1, sum(map(ord, version)))  # one column more than the model reads
        want = _python_predict(m.svm, x, monkeypatch)
        got = host_math.svm_rbf(L, m.svm, x)
        assert got.dtype == np.float64 and got.shape == want.shape
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), version
        # a wrong order of the sums would show: the plain numpy sum of the same terms differs somewhere
        one = host_math.svm_rbf(L, m.svm, x[:1])
        assert one[0].tobytes() == want[0].tobytes()


def test_svm_without_support_vectors_or_features(lib, monkeypatch):
    host_math, L = lib
    for sv in (np.zeros((0, 3)), np.zeros((4, 0))):
        model = svm.SvmModel(gamma=0.5, rho=0.25, coef=np.arange(sv.shape[0], dtype=np.float64) + 0.5, sv=sv,
                             n_features=sv.shape[1])
        x = np.ones((3, 3))
        want = _python_predict(model, x, monkeypatch)
        assert np.array_equal(host_math.svm_rbf(L, model, x), want)


def _python_powf(x, y, monkeypatch):
    monkeypatch.setattr(_adm_csf, "native_powf_array", None)
    return _adm_csf.powf_array(x, y)


@pytest.mark.parametrize("y", [_adm_csf.ONE_THIRD_F, np.float32(3.0), np.float32(2.0) / np.float32(3.0),
                               np.float32(0.5), np.float32(1.0) / np.float32(3.5), -1.5])
def test_powf_is_the_c_librarys(lib, y, monkeypatch):
    host_math, L = lib
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0, 1e6, 3000), rng.uniform(0, 1e-3, 1000), rng.standard_normal(500),
                        np.array([0.0, -0.0, 1.0, 1e-45, 3.4e38, np.inf, -np.inf, np.nan, -8.0, -1.0])])
    x = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = _python_powf(x, y, monkeypatch)
    got = host_math.powf_array(L, x, y)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # the comparison above tells a different power function apart: exp(y log x) in float32
    # (numpy's own float32 power is no such witness: without AVX-512 it calls the C library too)
    other = np.exp(np.float32(y) * np.log(x[:3000])).astype(np.float32)
    assert (other.view(np.uint32) != want[:3000].view(np.uint32)).sum() > 1000


def test_install_hands_the_functions_over(lib, monkeypatch):
    host_math, _ = lib
    monkeypatch.setattr(svm, "native_rbf", None)
    monkeypatch.setattr(_adm_csf, "native_powf_array", None)
    monkeypatch.setattr(host_math, "_state", {})
    assert host_math.install() is True
    assert svm.native_rbf is not None and _adm_csf.native_powf_array is not None
    model = load_model("version=vmaf_v0.6.1").primary.svm
    x = _rows(model.sv.shape[1], 3)
    hooked = model.predict(x)
    assert np.array_equal(hooked, _python_predict(model, x, monkeypatch))
    assert host_math.install() is True  # once: a second call finds it done
