"""host_math.cpp: the C library's math over arrays, handed to the host arithmetic that calls it.

The SVM (:mod:`vmafxd.model.svm`) and ADM's p-th roots (:func:`vmafxd.features._adm_csf.powf_array`)
call ``exp`` and ``powf`` once per element, as libvmaf does; in Python each call is an interpreter
step (211 ``exp`` a frame for vmaf_v0.6.1's support vectors, 36 ``powf`` for integer ADM, one a
pixel in float ADM's CPU twin).  :func:`install` builds this library (once a machine, in the kernel
cache) and gives those modules its functions: the same operations in the same order, so the same
bits (tests/lanes/test_native_host_math.py).  Without a compiler nothing changes.  The lanes call
:func:`install_soon` when they start: the Python path scores until the library is there, with the
same results.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import threading

import numpy as np

from ...features import _adm_csf
from ...model import svm
from ..errors import CompileError
from ..runtime import RuntimeUnavailable
from . import available, library

__all__ = ["install", "install_soon", "powf_array", "svm_rbf"]

log = logging.getLogger("vmafxd.lanes.native")

_P = ctypes.c_void_p
_S = ctypes.c_ssize_t
_D = ctypes.c_double
_SIGNATURES = {
    "vx_powf_array": (None, [_P, _S, ctypes.c_float, _P]),
    "vx_svm_rbf": (None, [_P, _S, _S, _P, _S, _S, _P, _D, _D, _P]),
}
_lock = threading.Lock()
_state: dict[str, object] = {}


def powf_array(lib: ctypes.CDLL, x: np.ndarray, y) -> np.ndarray:
    """``powf`` of each element of ``x`` (as float32) with exponent ``y`` (rounded to float)."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(xs)
    lib.vx_powf_array(xs.ctypes.data, xs.size, float(np.float32(y)), out.ctypes.data)
    return out


def svm_rbf(lib: ctypes.CDLL, model: "svm.SvmModel", x: np.ndarray) -> np.ndarray:
    """:meth:`SvmModel.predict` of ``x`` (frames x at least the model's features)."""
    xs = np.ascontiguousarray(x, dtype=np.float64)
    sv = np.ascontiguousarray(model.sv, dtype=np.float64)
    coef = np.ascontiguousarray(model.coef, dtype=np.float64)
    n_sv, nf = sv.shape
    out = np.empty(xs.shape[0], dtype=np.float64)
    lib.vx_svm_rbf(xs.ctypes.data, xs.shape[0], xs.shape[1], sv.ctypes.data, n_sv, nf, coef.ctypes.data,
                   float(model.gamma), float(model.rho), out.ctypes.data)
    return out


def install() -> bool:
    """Build (or load) the library and hand its functions to the SVM and powf_array; True when they
    run there now, False where they cannot (no compiler, a failed build: said once in the log)."""
    with _lock:
        if "done" in _state:
            return bool(_state["done"])
        ok = False
        if available():
            try:
                lib = library("host_math", _SIGNATURES)
            except (CompileError, RuntimeUnavailable, OSError) as e:
                log.warning("host math: the native library cannot be built (%s); numpy and Python's "
                            "math score instead", e)
            else:
                svm.native_rbf = lambda model, x: svm_rbf(lib, model, x)
                _adm_csf.native_powf_array = lambda x, y: powf_array(lib, x, y)
                ok = True
        _state["done"] = ok
        return ok


def install_soon() -> None:
    """:func:`install` on a thread of its own, once a process (a first build takes a second of
    g++; a built one loads in milliseconds): until it is there, the Python path gives the same bits."""
    with _lock:
        if "started" in _state or "done" in _state:
            return
        _state["started"] = True
    # a first build still running when the process ends (a short run, Ctrl-C) is stopped, its
    # compiler with it, and its temporary folder removed, instead of outliving the process
    atexit.register(_stop_build_at_exit)
    threading.Thread(target=install, name="vmafx-host-math", daemon=True).start()


def _stop_build_at_exit() -> None:
    if "done" not in _state:
        from ..emulated import stop_builds

        stop_builds(wait=1.0)
