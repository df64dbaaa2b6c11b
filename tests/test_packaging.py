"""What an installed vmafxd needs besides its Python: every other file of the package is package data.

A wheel holds only the ``.py`` files and what ``[tool.setuptools.package-data]`` names: a kernel source
left out would install a daemon whose native kernels cannot build (the CPU lane falls back to its
numpy twins) or whose GPU lanes cannot compile.  Here every file under ``vmafxd/`` that is not
Python must match one of the patterns.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _patterns() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-data"]["vmafxd"]


def _data_files() -> list[str]:
    pkg = ROOT / "vmafxd"
    return sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)


def test_every_non_python_file_of_the_package_is_package_data():
    patterns = _patterns()
    files = _data_files()
    # the kinds the lanes read at run time are there to be checked
    assert any(f.endswith(".cu") for f in files) and any(f.endswith(".cpp") for f in files)
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not missing, f"not in pyproject.toml's package-data: {missing}"
