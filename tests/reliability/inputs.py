"""Input files for the reliability tests: synthetic y4m clips, good and broken."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_y4m(path: Path, frames: int, width: int = 64, height: int = 64, seed: int = 0, *,
              truncate_last: int = 0) -> Path:
    """A 4:2:0 8-bit y4m of ``frames`` noise frames; ``truncate_last`` bytes cut off the end."""
    rng = np.random.default_rng(seed)
    frame_bytes = width * height * 3 // 2
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F25:1 Ip A1:1 C420jpeg\n".encode())
        base = rng.integers(0, 256, frame_bytes, dtype=np.uint8)
        for i in range(frames):
            f.write(b"FRAME\n")
            f.write(np.roll(base, i * 7).tobytes())
    if truncate_last:
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size - truncate_last)
    return path
