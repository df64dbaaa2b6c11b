"""Native CPU kernels: C++ written for one CPU thread, for the CPU lane's slowest twins.

The numpy twins (vmafxd/features) are the reference; the compiled engine
(:mod:`..compiled`) runs the GPU kernels on the host, which is fast where a
feature's kernel suits one thread and slow where it is shaped for thousands
(a tile and its halo per block).  The kernels here are shaped like libvmaf's C
instead -- row passes over whole planes, sliding windows -- and compute the
same integer statistics (or the same float operations in the same order) as
the twin, which then turns them into metrics with its own Python.  Each is
proven equal to its twin, frame by frame, in tests/lanes/test_native_*.py.

A feature with a native kernel names its extractor in :data:`NATIVE_FEATURES`
(``module:Class`` in this package).  The extractor has the twin's interface
(``cls(options, width, height, bitdepth)``, ``extract(index, ref, dist)``,
``flush()``, ``aggregate()`` where the twin has it), and may raise
:class:`NativeUnsupported` from its constructor for options it does not take
(the twin scores those).  Sources build once per machine into the kernel cache
(``native/`` beside the emulator's ``emu/``), with the emulator's exactness flags.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CompileError
from ..runtime import RuntimeUnavailable

if TYPE_CHECKING:
    import numpy as np

__all__ = ["HOST_LIBRARIES", "NATIVE_FEATURES", "NativeUnsupported", "available", "build_all", "extractor", "library",
           "plane_pair", "plane_samples", "row_samples"]

log = logging.getLogger("vmafxd.lanes.native")

#: feature name -> ``module:Class`` of its native extractor in this package
NATIVE_FEATURES: dict[str, str] = {
    "adm": "adm:NativeAdm",
    "cambi": "cambi:NativeCambi",
    "motion": "motion:NativeMotion",
    "speed_chroma": "speed:SpeedChroma",
    "speed_temporal": "speed:SpeedTemporal",
    "psnr": "psnr:Psnr",
    "vif": "vif:Vif",
}

#: libraries of this package that are no feature's extractor (host_math.cpp: the C library's math
#: over arrays for the SVM and ADM's host arithmetic)
HOST_LIBRARIES: tuple[str, ...] = ("host_math",)

_HERE = Path(__file__).resolve().parent
_lock = threading.Lock()
_libraries: dict[str, ctypes.CDLL] = {}


class NativeUnsupported(Exception):
    """A native extractor does not take these options (the twin scores them)."""


def available() -> bool:
    """Whether native kernels can be built here (a host C++ compiler is found)."""
    from ..emulated import _compiler

    return _compiler() is not None


def library(name: str, signatures: dict | None = None) -> ctypes.CDLL:
    """``<name>.cpp`` of this package, built (once a machine, cached) and loaded (once a process).

    ``signatures``: ``{function: (restype, argtypes)}``, set on the library's functions once,
    when it is loaded, before any caller sees it."""
    with _lock:
        lib = _libraries.get(name)
        if lib is None:
            lib = ctypes.CDLL(str(_build(name)))
            for fn, (restype, argtypes) in (signatures or {}).items():
                f = getattr(lib, fn)
                f.restype, f.argtypes = restype, list(argtypes)
            _libraries[name] = lib
        return lib


def build_all(workers: int | None = None) -> list[str]:
    """Build every native kernel of this package now, at once (``python -m vmafxd.lanes.native``,
    which scripts/bootstrap.sh runs): the first score then loads instead of compiling (VIF's
    three instruction-set builds take 10-15 s of g++).  Returns the names built or found."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    names = sorted({spec.split(":")[0] for spec in NATIVE_FEATURES.values()} | set(HOST_LIBRARIES))
    with ThreadPoolExecutor(max_workers=workers or min(len(names), os.cpu_count() or 1)) as pool:
        for path in pool.map(_build, names):
            log.info("native kernel %s", path)
    return names


def _with_includes(source: str) -> str:
    """``source`` with each ``#include "x.h"`` of a header beside it replaced by the header's text
    (the compiler reads a copy in a folder of its own; the cache key then covers the header)."""
    def paste(m: "re.Match[str]") -> str:
        return (_HERE / m.group(1)).read_text()

    return re.sub(r'^#include "([A-Za-z0-9_]+\.h)"$', paste, source, flags=re.M)


def _build(name: str) -> Path:
    from ..emulated import BUILD_FLAGS, _compiler, build_library, host_compiler_version, library_dir
    from ..gpu.kernels import cache_key

    cxx = _compiler()
    if cxx is None:
        raise RuntimeUnavailable("native", "no host C++ compiler (g++) to build the native kernels")
    source = _with_includes((_HERE / f"{name}.cpp").read_text())
    flags = [f for f in BUILD_FLAGS if f != "-DVX_EMULATE=1"]
    digest = cache_key(source, "host", host_compiler_version(cxx), flags)[:20]
    lib = library_dir("native") / f"{name}-{digest}.so"
    if not lib.exists():
        build_library(cxx, source, flags, lib, name)
    return lib


_said: set[str] = set()


def extractor(decl, options: dict, width: int, height: int, bitdepth: int):
    """The native extractor of ``decl`` for these options, or None (no kernel, no compiler, options it
    does not take, or a build that failed: said once in the log, and the twin scores)."""
    spec = NATIVE_FEATURES.get(decl.name)
    if spec is None or not available():
        return None
    module, cls = spec.split(":")
    try:
        return getattr(importlib.import_module(f"{__package__}.{module}"), cls)(options, width, height, bitdepth)
    except NativeUnsupported:
        return None
    except (CompileError, RuntimeUnavailable, OSError) as e:
        if decl.name not in _said:
            _said.add(decl.name)
            log.warning("cpu engine: the native %s kernel cannot be built (%s); scoring with its numpy twin",
                        decl.name, e)
        return None


def plane_samples(feature: str, name: str, plane: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, int]:
    """(the plane with unit column stride, its row stride in samples); a TypeError or ValueError
    naming the plane where a native kernel cannot read it (a Picture's planes are uint8 or uint16)."""
    import numpy as np

    if plane.dtype not in (np.uint8, np.uint16):
        raise TypeError(f"{feature}: {name} samples of type {plane.dtype}: expected uint8 or uint16")
    if plane.shape != shape:
        raise ValueError(f"{feature}: {name} is {plane.shape[1::-1]}, expected {shape[::-1]} (width, height)")
    return row_samples(plane)


def plane_pair(feature: str, plane: str, ref: np.ndarray, dist: np.ndarray, shape: tuple[int, int]
               ) -> tuple[tuple[np.ndarray, int], tuple[np.ndarray, int]]:
    """:func:`plane_samples` of the reference's and the distorted ``plane`` (``luma``, ``Cb``, ...);
    a TypeError where their samples differ in type."""
    r = plane_samples(feature, f"the reference's {plane}", ref, shape)
    d = plane_samples(feature, f"the distorted {plane}", dist, shape)
    if r[0].dtype != d[0].dtype:
        raise TypeError(f"{feature}: the reference's and the distorted {plane} samples differ in type")
    return r, d


def row_samples(plane: np.ndarray, dtype=None) -> tuple[np.ndarray, int]:
    """(``plane``, as ``dtype`` where given, with unit column stride and a forward row stride of
    whole samples -- a copy only where it has not --, its row stride in samples)."""
    import numpy as np

    if dtype is not None:
        plane = np.asarray(plane, dtype=dtype)
    if plane.strides[1] != plane.itemsize or plane.strides[0] % plane.itemsize or plane.strides[0] < 0:
        plane = np.ascontiguousarray(plane)
    return plane, plane.strides[0] // plane.itemsize
