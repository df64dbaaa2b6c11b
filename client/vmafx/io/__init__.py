"""Video file readers (y4m, raw yuv) and libvmaf-format score writers.

The package's names are loaded on first use: importing a submodule that needs no numpy
(``vmafx.io.parallel_read``'s callers, the score_files path's constants) does not load the
readers and numpy with it.
"""

from __future__ import annotations

import importlib

__all__ = ["VideoInfo", "VideoReader", "open_video"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(".video", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
