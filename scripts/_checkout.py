"""This checkout first on ``sys.path``: a script run from the tree scores with the tree's own
``vmafxd`` and ``vmafx`` (client/), not with whatever the environment has installed.

A script imports it before any of the project's modules (``python3 scripts/NAME.py`` puts
scripts/ on ``sys.path``, so the plain name resolves):

    from _checkout import ROOT
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]
