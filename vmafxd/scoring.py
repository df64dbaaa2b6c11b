"""Kept only for ``client/vmafx/cli.py``, which imports ``parse_feature_spec`` from here.

The scoring plan lives in :mod:`vmafxd.core.scoring`; the client's way in is
:mod:`vmafxd.offline`.  Delete this module once cli.py imports from there.
"""

from .core.scoring import parse_feature_spec

__all__ = ["parse_feature_spec"]
