"""The import layers of vmafx and vmafxd, read from the source (docs/architecture.md draws them).

From the bottom up:

* the **foundation** -- what both sides of the socket share: ``vmafx.formats``,
  ``vmafx.transport``, ``vmafx.io``, ``vmafx.protocol``, ``vmafx.field_error``,
  ``vmafx.exceptions``, ``vmafx.defaults``, ``vmafx.status_text``.  It imports
  neither the producer API nor vmafxd;
* ``vmafxd.features`` and ``vmafxd.model``: only each other and the foundation;
* ``vmafxd.core``: only core, features, model and the foundation;
* ``vmafxd.lanes``: only lanes, core, features, model and the foundation, and
  not the wire protocol: never the daemon's modules, never ``vmafx.protocol``;
* the daemon (every other vmafxd module) stands on all of those, and never
  on the producer side of the client;
* the producer API (``vmafx.client``, ``blocking``, ``cli``, ``gl`` ...), of
  which one module at most, ``vmafx.in_process``, reaches into vmafxd.

No import cycle anywhere.  The graph is built from ``import`` statements as
they are written (``TYPE_CHECKING`` blocks and imports inside functions
count: a layer is broken by any way of naming a module), the same way
``../shared/tools/layers.py`` reads it.  The last tests also check what
importing actually loads.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the client modules that make up the producer API (everything else of vmafx is foundation)
#: what both sides of the socket share; every other vmafx module is the producer side
FOUNDATION = ("vmafx.protocol", "vmafx.formats", "vmafx.transport", "vmafx.io", "vmafx.field_error",
              "vmafx.exceptions", "vmafx.defaults")
#: the one client module allowed to import vmafxd (the in-process scorer's way in)
CLIENT_GATE = "vmafx.in_process"


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_graph(root: Path) -> dict[str, set[str]]:
    """Every module of vmafxd and vmafx under ``root`` -> the modules of those two it imports."""
    bases = {"vmafxd": root / "vmafxd", "vmafx": root / "client" / "vmafx"}
    files: dict[str, Path] = {}
    for top, base in bases.items():
        for f in sorted(base.rglob("*.py")):
            parts = [top, *f.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = f
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # "from . import x" names the package and maybe its module x
                named |= {mod} | {f"{mod}.{a.name}" for a in node.names}
        graph[name] = {d for d in named if d in files and d != name}
    return graph


def layer(name: str) -> str:
    if _under(name, "vmafxd.core"):
        return "core"
    if _under(name, "vmafxd.lanes"):
        return "lanes"
    if _under(name, "vmafxd.features", "vmafxd.model"):
        return "features/model"
    if _under(name, "vmafxd"):
        return "daemon"
    if _under(name, *FOUNDATION) or name == "vmafx":
        return "foundation"
    return "producer"


def _foundation_protocol(name: str) -> bool:
    return _under(name, "vmafx.protocol")


def broken_rules(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a layer rule, as ``rule: importer -> imported``."""
    broken = []
    for m in sorted(graph):
        lm = layer(m)
        for d in sorted(graph[m]):
            ld = layer(d)
            if d == "vmafxd":
                continue  # the package itself: its __init__ holds only __version__
            if lm == "core" and ld not in ("core", "features/model", "foundation"):
                broken.append(f"core imports only core, features, model, foundation: {m} -> {d}")
            elif lm == "lanes" and ld not in ("lanes", "core", "features/model", "foundation"):
                broken.append(f"lanes never import the daemon: {m} -> {d}")
            elif lm == "lanes" and _foundation_protocol(d):
                broken.append(f"lanes never import the wire protocol: {m} -> {d}")
            elif lm == "features/model" and ld not in ("features/model", "foundation"):
                broken.append(f"features and models import only each other and the foundation: {m} -> {d}")
            elif lm == "foundation" and ld != "foundation":
                broken.append(f"the foundation imports neither the producer API nor vmafxd: {m} -> {d}")
            if m.startswith("vmafxd") and ld == "producer":
                broken.append(f"vmafxd never imports producer-side modules: {m} -> {d}")
    broken += [f"no import cycles: {' <-> '.join(c)}" for c in cycles(graph)]
    return broken


def client_modules_importing_vmafxd(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m, deps in graph.items()
                  if _under(m, "vmafx") and any(_under(d, "vmafxd") for d in deps))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


# ---------------------------------------------------------------------------------------------
# the tree as it is


@pytest.fixture(scope="module")
def graph():
    return module_graph(ROOT)


def test_the_layers_hold(graph):
    assert any(layer(m) == "core" for m in graph), "no vmafxd.core package"
    assert broken_rules(graph) == []


def test_the_client_reaches_vmafxd_through_one_module(graph):
    importers = client_modules_importing_vmafxd(graph)
    assert importers in ([], [CLIENT_GATE]), f"client modules importing vmafxd: {importers}"


# ---------------------------------------------------------------------------------------------
# the checker catches what it should (a synthetic tree)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for pkg in ("vmafxd", "vmafxd/core", "vmafxd/lanes", "vmafxd/features", "client/vmafx",
                "client/vmafx/protocol"):
        init = tmp_path / pkg / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text("")
    return tmp_path


def test_the_checker_reports_a_lane_importing_the_daemon(tmp_path):
    root = _tree(tmp_path, {
        "vmafxd/session.py": "X = 1\n",
        "vmafxd/core/scoring.py": "from .. import features\n",
        "vmafxd/lanes/cpu.py": """
            from ..core.scoring import X
            from ..session import X as Y
            """,
    })
    broken = broken_rules(module_graph(root))
    assert broken == ["lanes never import the daemon: vmafxd.lanes.cpu -> vmafxd.session"]


def test_the_checker_reports_each_kind_of_break(tmp_path):
    root = _tree(tmp_path, {
        "vmafxd/server.py": "import vmafx.blocking\n",
        "vmafxd/session.py": "X = 1\n",
        "vmafxd/core/plan.py": "from vmafxd.session import X\n",
        "vmafxd/lanes/gpu.py": "from vmafx.protocol import errors\n",
        "vmafxd/features/psnr.py": "from ..core import plan\n",
        "client/vmafx/blocking.py": "X = 1\n",
        "client/vmafx/protocol/errors.py": "X = 1\n",
        "client/vmafx/formats.py": "from . import blocking\n",
        "client/vmafx/transport.py": "from .io import video\n",
        "client/vmafx/io/__init__.py": "",
        "client/vmafx/io/video.py": "from vmafx import transport\n",
    })
    broken = broken_rules(module_graph(root))
    assert broken == [
        "the foundation imports neither the producer API nor vmafxd: vmafx.formats -> vmafx.blocking",
        "core imports only core, features, model, foundation: vmafxd.core.plan -> vmafxd.session",
        "features and models import only each other and the foundation: vmafxd.features.psnr -> vmafxd.core",
        "features and models import only each other and the foundation: "
        "vmafxd.features.psnr -> vmafxd.core.plan",
        "lanes never import the wire protocol: vmafxd.lanes.gpu -> vmafx.protocol",
        "lanes never import the wire protocol: vmafxd.lanes.gpu -> vmafx.protocol.errors",
        "vmafxd never imports producer-side modules: vmafxd.server -> vmafx.blocking",
        "no import cycles: vmafx.io.video <-> vmafx.transport",
    ]


def test_the_checker_finds_a_cycle_through_type_checking_imports(tmp_path):
    root = _tree(tmp_path, {
        "vmafxd/server.py": "from .client_handler import Handler\n",
        "vmafxd/client_handler.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .server import Server
            """,
        "vmafxd/outbox.py": "from . import outgoing\n",
        "vmafxd/outgoing.py": "from . import outbox\n",
    })
    assert cycles(module_graph(root)) == [["vmafxd.client_handler", "vmafxd.server"],
                                          ["vmafxd.outbox", "vmafxd.outgoing"]]


def test_the_client_rule_names_the_importers(tmp_path):
    root = _tree(tmp_path, {
        "vmafxd/offline.py": "X = 1\n",
        "client/vmafx/in_process.py": "from vmafxd.offline import X\n",
        "client/vmafx/cli.py": "from vmafxd import offline\n",
    })
    assert client_modules_importing_vmafxd(module_graph(root)) == ["vmafx.cli", "vmafx.in_process"]


# ---------------------------------------------------------------------------------------------
# what importing really loads


def _loaded_after(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "client"), *sys.path]))
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


def test_the_daemon_loads_no_producer_module(graph):
    daemon = sorted(m for m in graph if layer(m) in ("daemon", "core", "lanes"))
    loaded = _loaded_after("\n".join(f"import {m}" for m in daemon))
    assert set(daemon) <= loaded
    producer = sorted(m for m in loaded if _under(m, "vmafx") and layer(m) == "producer")
    assert producer == []


def test_the_protocol_loads_no_trio_numpy_gpu_binding_or_producer_module():
    loaded = _loaded_after("import vmafx.protocol")
    assert "vmafx.protocol.state" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("trio", "numpy", "cuda", "hip", "vmafxd"))
    assert heavy == []
    assert sorted(m for m in loaded if _under(m, "vmafx") and layer(m) == "producer") == []
