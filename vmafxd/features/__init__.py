"""The feature registry: every feature's one declaration, by libvmaf's extractor name.

This is the only registry.  A feature is one module here exposing
``DECLARATION`` (a :class:`FeatureDeclaration`), listed once in
:data:`_MODULES`.  The CPU lane builds the declaration's CPU twin
(``cpu``); the GPU lanes offer the features whose declaration names a GPU
twin module (``gpu``, under ``vmafxd/lanes/gpu/``) and compile its ``kernel``
with the ``#define``s generated from ``kernel_params`` (docs/lanes.md,
"Adding a feature").
"""

from __future__ import annotations

import importlib

from .declaration import FeatureDeclaration, Option, OptionError

__all__ = ["FeatureDeclaration", "Option", "OptionError", "get", "all_declarations", "provider", "UnknownFeature"]

# One module per feature; each exposes DECLARATION.  Registering a feature is adding it here.
_MODULES = ("vif", "adm", "motion", "psnr", "ssim", "ms_ssim", "float_vif", "float_adm", "float_motion", "cambi", "ciede", "psnr_hvs",
            "float_psnr", "float_ansnr", "float_moment", "speed_chroma", "speed_temporal")


class UnknownFeature(KeyError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        known = ", ".join(sorted(d.name for d in all_declarations()))
        return f"unknown feature {self.name!r} (known: {known})"


_registry: dict[str, FeatureDeclaration] | None = None


def _load() -> dict[str, FeatureDeclaration]:
    global _registry
    if _registry is None:
        reg: dict[str, FeatureDeclaration] = {}
        for mod in _MODULES:
            decl = importlib.import_module(f"{__name__}.{mod}").DECLARATION
            for key in (decl.name, *decl.aliases):
                reg[key] = decl
        _registry = reg
    return _registry


def get(name: str) -> FeatureDeclaration:
    """The declaration for ``name`` (libvmaf's extractor name or one of its aliases)."""
    try:
        return _load()[name]
    except KeyError:
        raise UnknownFeature(name) from None


def all_declarations() -> list[FeatureDeclaration]:
    seen: dict[str, FeatureDeclaration] = {}
    for decl in _load().values():
        seen[decl.name] = decl
    return list(seen.values())


def provider(metric: str) -> FeatureDeclaration:
    """The declaration that provides output base name ``metric`` (``integer_adm2`` -> adm)."""
    for decl in all_declarations():
        if metric in decl.provides or metric in decl.debug_provides:
            return decl
    raise UnknownFeature(metric)
