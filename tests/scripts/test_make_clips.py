"""scripts/make_clips.py: valid y4m of the asked size and length, the same bytes every time, distinct pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from . import load_script

make_clips = load_script("make_clips")


def _frames(path: Path, w: int, h: int) -> list[np.ndarray]:
    data = path.read_bytes()
    header, _, rest = data.partition(b"\n")
    assert header == f"YUV4MPEG2 W{w} H{h} F24:1 Ip A1:1 C420jpeg".encode()
    size = w * h * 3 // 2
    assert len(rest) % (6 + size) == 0
    out = []
    for k in range(len(rest) // (6 + size)):
        chunk = rest[k * (6 + size):(k + 1) * (6 + size)]
        assert chunk[:6] == b"FRAME\n"
        out.append(np.frombuffer(chunk[6:6 + w * h], np.uint8).reshape(h, w))
    return out


def test_pairs_are_valid_deterministic_and_differ(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert make_clips.main([str(a), "64x48:5"]) == 0
    assert make_clips.main([str(b), "64x48:5", "--seed", "0"]) == 0
    ref, dist = _frames(a / "ref_64x48.y4m", 64, 48), _frames(a / "dist_64x48.y4m", 64, 48)
    assert len(ref) == len(dist) == 5
    for name in ("ref_64x48.y4m", "dist_64x48.y4m"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    # the distorted frames are damaged, not equal; the reference moves from frame to frame
    assert all(np.abs(r.astype(int) - d).mean() > 1 for r, d in zip(ref, dist))
    assert all(not np.array_equal(ref[k], ref[k + 1]) for k in range(4))
    make_clips.main([str(b), "64x48:5", "--seed", "1"])
    assert (a / "ref_64x48.y4m").read_bytes() != (b / "ref_64x48.y4m").read_bytes()


@pytest.mark.parametrize("spec", ["64x48", "63x48:2", "64x48:0", "8x8:2", "axb:3"])
def test_bad_specs_are_refused(spec: str):
    with pytest.raises(ValueError, match="clip spec"):
        make_clips.parse_spec(spec)
