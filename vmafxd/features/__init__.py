"""The feature registry: every feature's one declaration, by libvmaf's extractor name.

This is the only registry.  A feature is one module here exposing
``DECLARATION`` (a :class:`FeatureDeclaration`), listed once in
:data:`_INDEX` (with its extractor names and kernel source, so that a
lookup imports only the module it needs).  The CPU lane builds the declaration's CPU twin
(``cpu``); the GPU lanes offer the features whose declaration names a GPU
twin module (``gpu``, under ``vmafxd/lanes/gpu/``) and compile its ``kernel``
with the ``#define``s generated from ``kernel_params`` (docs/lanes.md,
"Adding a feature").
"""

from __future__ import annotations

import importlib

from .declaration import FeatureDeclaration, Option, OptionError

__all__ = ["FeatureDeclaration", "Option", "OptionError", "get", "all_declarations", "provider", "UnknownFeature",
           "declaration_of", "kernel_declarations", "kernel_sources"]

#: One module per feature, each exposing DECLARATION; registering a feature is adding its
#: row here: module -> (the extractor names it declares: its name, then its aliases; its
#: kernel source, or None).  The rows are what a lookup needs before any module is imported,
#: so that scoring imports only the features it asks for (importing all of them costs every
#: command 20-50 ms of start-up); tests/lanes/test_feature_registry.py checks each row
#: against its module's DECLARATION, which stays the one declaration of the feature.
_INDEX: dict[str, tuple[tuple[str, ...], str | None]] = {
    "vif": (("vif",), "vif.cu"),
    "adm": (("adm",), "adm.cu"),
    "motion": (("motion",), "motion.cu"),
    "psnr": (("psnr",), "psnr.cu"),
    "ssim": (("float_ssim",), "ssim.cu"),
    "ms_ssim": (("float_ms_ssim",), "ssim.cu"),
    "float_vif": (("float_vif",), "float_vif.cu"),
    "float_adm": (("float_adm",), "float_adm.cu"),
    "float_motion": (("float_motion",), "float_motion.cu"),
    "cambi": (("cambi",), "cambi.cu"),
    "ciede": (("ciede",), "ciede.cu"),
    "psnr_hvs": (("psnr_hvs",), "psnr_hvs.cu"),
    "float_psnr": (("float_psnr",), "float_psnr.cu"),
    "float_ansnr": (("float_ansnr",), "float_ansnr.cu"),
    "float_moment": (("float_moment",), "float_moment.cu"),
    "speed_chroma": (("speed_chroma",), "speed.cu"),
    "speed_temporal": (("speed_temporal",), "speed.cu"),
}
_MODULES = tuple(_INDEX)


class UnknownFeature(KeyError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        known = ", ".join(sorted(d.name for d in all_declarations()))
        return f"unknown feature {self.name!r} (known: {known})"


#: module -> its DECLARATION, for the modules imported so far
_loaded: dict[str, FeatureDeclaration] = {}


def declaration_of(module: str) -> FeatureDeclaration:
    """The DECLARATION of feature module ``module`` (a key of the index), imported on first use."""
    decl = _loaded.get(module)
    if decl is None:
        decl = _loaded[module] = importlib.import_module(f"{__name__}.{module}").DECLARATION
    return decl


def get(name: str) -> FeatureDeclaration:
    """The declaration for ``name`` (libvmaf's extractor name or one of its aliases)."""
    for module, (names, _kernel) in _INDEX.items():
        if name in names:
            return declaration_of(module)
    raise UnknownFeature(name)


def all_declarations() -> list[FeatureDeclaration]:
    """Every feature's declaration, in the index's order (imports every feature module)."""
    return [declaration_of(module) for module in _MODULES]


def kernel_declarations(kernel: str) -> list[FeatureDeclaration]:
    """The declarations whose kernel is source ``kernel`` (imports only those modules)."""
    return [declaration_of(m) for m, (_names, k) in _INDEX.items() if k == kernel]


def kernel_sources() -> tuple[str, ...]:
    """Every feature's kernel source, sorted, without importing a feature module."""
    return tuple(sorted({k for _names, k in _INDEX.values() if k}))


def provider(metric: str) -> FeatureDeclaration:
    """The declaration that provides output base name ``metric`` (``integer_adm2`` -> adm):
    the first in the index's order, its modules imported one by one until it is found."""
    for module in _MODULES:
        decl = declaration_of(module)
        if metric in decl.provides or metric in decl.debug_provides:
            return decl
    raise UnknownFeature(metric)
