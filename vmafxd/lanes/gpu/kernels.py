"""Kernel sources, their compilation at first use, and the on-disk cache.

Each feature has one kernel source under ``vmafxd/features/kernels/`` in the
CUDA/HIP-common dialect, named by its declaration (``FeatureDeclaration.kernel``);
:func:`source` prepends the prelude (the only place the vendors differ), the
``#define``s of the feature's parameter block and its constant tables, generated from its
declaration (``FeatureDeclaration.kernel_params``, ``kernel_tables``).  Binaries are cached on disk keyed by the SHA-256 of the
full source, the target architecture, the compiler's version and the options,
so a daemon restart loads cubins/code objects instead of compiling.  The cache
lives in ``$VMAFXD_KERNEL_CACHE``, else systemd's ``$CACHE_DIRECTORY``, else
``~/.cache/vmafxd/kernels``; a cache that cannot be written is skipped (the
kernels are compiled in memory).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Sequence

__all__ = ["SOURCES", "source", "param_defines", "kernel_tables", "cache_dir", "compile_cached", "COMMON_OPTIONS"]

#: the engine's own kernel (the gather/convert of a batch's frames), no feature's
ENGINE_SOURCES = ("convert.cu",)


def _declared_sources() -> tuple[str, ...]:
    from ...features import kernel_sources

    return kernel_sources()  # from the registry's index: no feature module imported


#: every kernel source a GPU lane compiles (file names under features/kernels/): the
#: engine's, then each declared feature's
SOURCES = (*ENGINE_SOURCES, *_declared_sources())

#: options for both compilers: no FMA contraction, so device integer-feature
#: arithmetic that passes through double/float (VIF's g, ADM's angle test)
#: rounds exactly as the CPU twin's.
COMMON_OPTIONS = ("-DVX_KERNELS=1",)


def __getattr__(name: str):
    """``NVRTC_OPTIONS`` and ``HIPRTC_OPTIONS``: each compiler's own options live with its
    binding (``runtime.compile_options``); named here on first use, so that a lane on one
    runtime (or the CPU lane's compiled engine) does not import the other bindings' modules."""
    if name == "NVRTC_OPTIONS":
        from ..cuda import NVRTC_OPTIONS

        return NVRTC_OPTIONS
    if name == "HIPRTC_OPTIONS":
        from ..hip import HIPRTC_OPTIONS

        return HIPRTC_OPTIONS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _kernels_dir():
    """The kernel sources' folder: vmafxd/features/kernels, or its importlib.resources
    Traversable where the package is not a folder (importing the resource readers costs
    every start a few ms, so a plain folder is read as one)."""
    from ... import features

    folder = Path(features.__file__).parent / "kernels"
    if folder.is_dir():
        return folder
    from importlib import resources

    return resources.files("vmafxd.features").joinpath("kernels")


def _read(name: str) -> str:
    return _kernels_dir().joinpath(name).read_text()


def available_sources() -> list[str]:
    root = _kernels_dir()
    return [n for n in SOURCES if root.joinpath(n).is_file()]


def _generated(name: str, declared: str, render: Callable) -> str:
    """``render(declaration)`` of the features whose kernel is ``name`` and that declare
    ``declared`` (a declaration field): one text, which features sharing a kernel must agree on."""
    from ...features import kernel_declarations

    texts = {render(d) for d in kernel_declarations(name) if getattr(d, declared)}
    if len(texts) > 1:
        raise ValueError(f"{name}: features sharing this kernel declare different {declared}")
    return texts.pop() if texts else ""


def param_defines(name: str) -> str:
    """The generated ``#define``s of the parameter blocks of the features whose kernel is ``name``."""
    return _generated(name, "kernel_params", lambda d: d.kernel_defines())


def kernel_tables(name: str) -> str:
    """The generated ``__constant__`` tables of the features whose kernel is ``name``."""
    return _generated(name, "kernel_tables", lambda d: d.kernel_table_source())


def source(name: str) -> str:
    """The full translation unit: prelude, the generated parameter indices and constant
    tables, then the kernel source (its line numbers kept)."""
    return (_read("vmafx_prelude.h") + "\n" + param_defines(name) + kernel_tables(name)
            + f'#line 1 "{name}"\n' + _read(name))


def cache_dir() -> Path | None:
    for env in ("VMAFXD_KERNEL_CACHE", "CACHE_DIRECTORY"):
        v = os.environ.get(env)
        if v:
            return Path(v.split(":")[0]) / ("kernels" if env == "CACHE_DIRECTORY" else "")
    home = os.environ.get("HOME")
    return Path(home) / ".cache" / "vmafxd" / "kernels" if home else None


def cache_key(text: str, arch: str, compiler: str, options: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in (text, arch, compiler, "\0".join(options)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def compile_cached(
    name: str,
    arch: str,
    compiler_version: str,
    compile_fn: Callable[[str, str, str, Sequence[str]], bytes],
    options: Sequence[str],
    defines: Sequence[str] = (),
) -> bytes:
    """The binary for kernel source ``name`` on ``arch``, from the cache or compiled now."""
    text = source(name)
    opts = [*COMMON_OPTIONS, *options, *[f"-D{d}" for d in defines]]
    key = cache_key(text, arch, compiler_version, opts)
    root = cache_dir()
    path = root / f"{Path(name).stem}-{arch}-{key[:24]}.bin" if root else None
    if path is not None:
        try:
            return path.read_bytes()
        except OSError:
            pass
    binary = compile_fn(text, name, arch, opts)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # write-then-rename: a concurrent daemon never reads half a file
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(binary)
            os.replace(tmp, path)
        except OSError:
            pass
    return binary
