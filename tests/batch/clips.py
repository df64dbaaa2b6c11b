"""Tiny clip pairs for the batch tests and scripts/bench_batch.py, cut from the vendored clips.

Each pair is a different window of the vendored testsrc2 pair (reference and
its x264 encode), written as plain .y4m with the repo's y4m writer, so every
pair has its own scores and a job takes a fraction of a second on one core.
Only the client library is used (no daemon import), so the Ray workers that
read these files need nothing more than the batch itself.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from vmafx.io.video import open_video
from vmafx.io.y4m_writer import write_y4m

DATA = Path(__file__).resolve().parents[1] / "data" / "clips"
SOURCES = ("src_testsrc2_576x324.y4m.xz", "dst_testsrc2_576x324_x264crf35.y4m.xz")


def _window(planes, x: int, y: int, w: int, h: int):
    # 4:2:0: chroma windows at half the offset and (ceil) half the size
    return [planes[0][y:y + h, x:x + w].copy()] + [p[y // 2:y // 2 + (h + 1) // 2, x // 2:x // 2 + (w + 1) // 2].copy()
                                                   for p in planes[1:]]


def make_pairs(out: str | os.PathLike, count: int, *, width: int = 128, height: int = 72,
               frames: int = 4) -> list[tuple[str, str]]:
    """``count`` (reference, distorted) .y4m pairs of ``width`` x ``height`` and ``frames`` frames in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    clips = []
    for src in SOURCES:
        with open_video(DATA / src) as r:
            info = r.info
            clips.append([f for f, _ in zip(r, range(frames))])
    assert width <= info.width and height <= info.height and len(clips[0]) == frames
    cols = max(1, (info.width - width) // 16 + 1)
    rows = max(1, (info.height - height) // 16 + 1)
    pairs = []
    for k in range(count):
        # windows 16 pixels apart (even offsets keep 4:2:0 chroma aligned)
        x, y = 16 * (k % cols), 16 * ((k // cols) % rows)
        paths = []
        for role, clip in zip(("ref", "dist"), clips):
            p = out / f"{role}{k:03d}_{width}x{height}.y4m"
            if not p.exists():
                tmp = p.with_suffix(".tmp")
                write_y4m(tmp, replace(info, width=width, height=height),
                          [_window(f, x, y, width, height) for f in clip])
                os.replace(tmp, p)
            paths.append(str(p))
        pairs.append((paths[0], paths[1]))
    return pairs
