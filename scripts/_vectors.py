"""Writing libvmaf's values as the tests read them (the ``*_libvmaf_vectors.py`` scripts).

    from _vectors import write_vectors
    return write_vectors(out, __file__, version, cases=cases)
"""

from __future__ import annotations

import json
from pathlib import Path


def write_vectors(out: Path, script: str, version: str, **parts) -> int:
    """``out`` = ``{"generator": scripts/NAME.py, "vmaf_version": version, **parts}`` as indented JSON; 0."""
    doc = {"generator": f"scripts/{Path(script).name}", "vmaf_version": version, **parts}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    return 0
