"""The client's one door to the scoring core: only vmafx/in_process.py imports vmafxd."""

from __future__ import annotations

import ast
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client" / "vmafx"


def _imports_vmafxd(path: Path) -> bool:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vmafxd" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vmafxd":
            return True
    return False


def test_only_in_process_imports_vmafxd():
    offenders = sorted(str(p.relative_to(CLIENT)) for p in CLIENT.rglob("*.py") if _imports_vmafxd(p))
    assert offenders == ["in_process.py"]
