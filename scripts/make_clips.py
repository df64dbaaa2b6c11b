#!/usr/bin/env python3
"""Deterministic synthetic clip pairs (8-bit 4:2:0 y4m) for timing scorers on files.

    python3 scripts/make_clips.py OUTDIR WxH:FRAMES [WxH:FRAMES ...] [--seed S]

Writes ``OUTDIR/ref_WxH.y4m`` and ``OUTDIR/dist_WxH.y4m`` (YUV4MPEG2, C420jpeg, 24 fps,
progressive) and prints one line per pair with its size in bytes and the SHA-256 of
its first 64 KiB of frames (so two machines can check they timed the same bytes).

What the pictures are, and why:

* the reference is a window panning across a larger textured canvas (smooth shading,
  hard-edged blocks, fine grain), plus a block that moves faster than the pan: the
  temporal features (motion) see real, varying motion, and the spatial ones (VIF, ADM)
  see edges and texture at every scale;
* the distorted clip is the same window over a damaged copy of the canvas (a 5x5 box
  blur, one of four grain fields chosen frame by frame, coarse quantisation), so scores
  sit in the middle of VMAF's range rather than at 100, where every scorer agrees
  trivially;
* all the arithmetic is done once on the canvases; a frame is crops and writes, so a
  4K clip of hundreds of frames is written at disk speed, on the device machine itself
  (clips of gigabytes need not travel);
* every random number comes from ``numpy.random.default_rng(seed, width, height)``, and
  the canvas arithmetic is integer or exactly rounded, so the same numpy gives the same
  bytes on every machine.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

#: how far (luma pixels) the window may pan over the canvas, each way
PAN = 192
#: grain fields of the distorted canvas; frame t uses field t % GRAINS
GRAINS = 4


def parse_spec(spec: str) -> tuple[int, int, int]:
    """``'WxH:FRAMES'`` -> (w, h, frames); even positive sizes (4:2:0), at least one frame."""
    try:
        size, frames = spec.split(":")
        w, h = (int(x) for x in size.lower().split("x"))
        n = int(frames)
    except ValueError:
        raise ValueError(f"clip spec {spec!r}: expected WxH:FRAMES, e.g. 1920x1080:500") from None
    if w < 16 or h < 16 or w % 2 or h % 2:
        raise ValueError(f"clip spec {spec!r}: width and height must be even and at least 16")
    if n < 1:
        raise ValueError(f"clip spec {spec!r}: frames must be at least 1")
    return w, h, n


def _canvas(rng: np.random.Generator, h: int, w: int, level: int, spread: int) -> np.ndarray:
    """An int16 canvas: shading from a few random waves, random flat blocks, grain."""
    y = np.arange(h, dtype=np.float64)[:, None]
    x = np.arange(w, dtype=np.float64)[None, :]
    c = np.zeros((h, w))
    for _ in range(3):
        fy, fx, ph = rng.uniform(0.002, 0.03), rng.uniform(0.002, 0.03), rng.uniform(0, 6.283)
        c += np.sin(fy * y + fx * x + ph)
    c = level + spread * c / 3
    blocks = max(24, h * w // 30000)
    for _ in range(blocks):
        bh, bw = int(rng.integers(4, max(6, h // 8))), int(rng.integers(4, max(6, w // 8)))
        y0, x0 = int(rng.integers(0, h - bh)), int(rng.integers(0, w - bw))
        c[y0:y0 + bh, x0:x0 + bw] = level + rng.integers(-spread, spread + 1)
    c = np.rint(c).astype(np.int16) + rng.integers(-5, 6, (h, w), dtype=np.int16)
    return np.clip(c, 16, 235).astype(np.int16)


def _damaged(rng: np.random.Generator, c: np.ndarray, grain: int, step: int) -> list[np.ndarray]:
    """GRAINS uint8 copies of ``c``: 5x5 box blur (integer, rounded), grain, quantised to ``step``."""
    p = np.pad(c.astype(np.int32), 2, mode="edge")
    h, w = c.shape
    s = sum(p[dy:dy + h, dx:dx + w] for dy in range(5) for dx in range(5))
    blurred = (s + 12) // 25
    out = []
    for _ in range(GRAINS):
        g = blurred + rng.integers(-grain, grain + 1, (h, w), dtype=np.int32)
        out.append(np.clip((g // step) * step + step // 2, 0, 255).astype(np.uint8))
    return out


def make_pair(outdir: Path, w: int, h: int, frames: int, seed: int = 0) -> tuple[int, str]:
    """Write the pair; returns (bytes of each file, SHA-256 hex of the first 64 KiB of each, joined)."""
    rng = np.random.default_rng([seed, w, h])
    cw, ch = w // 2, h // 2
    canv = [_canvas(rng, h + 2 * PAN, w + 2 * PAN, 110, 70),
            _canvas(rng, ch + PAN, cw + PAN, 128, 24),
            _canvas(rng, ch + PAN, cw + PAN, 124, 20)]
    ref = [c.astype(np.uint8) for c in canv]
    dist = [_damaged(rng, c, grain, step) for c, grain, step in zip(canv, (8, 4, 4), (8, 8, 8))]
    header = f"YUV4MPEG2 W{w} H{h} F24:1 Ip A1:1 C420jpeg\n".encode()
    box = max(8, h // 10)
    paths = outdir / f"ref_{w}x{h}.y4m", outdir / f"dist_{w}x{h}.y4m"
    with open(paths[0], "wb") as fr, open(paths[1], "wb") as fd:
        fr.write(header)
        fd.write(header)
        for t in range(frames):
            # the window walks an ellipse-ish path over the canvas (even offsets: chroma stays aligned)
            ox = 2 * ((5 * t) % PAN)
            oy = 2 * ((3 * t + t // PAN) % PAN)
            bx = (11 * t) % (w - box)
            fr.write(b"FRAME\n")
            fd.write(b"FRAME\n")
            for p in range(3):
                sub = 0 if p == 0 else 1
                pw, ph, x0, y0 = w >> sub, h >> sub, ox >> sub, oy >> sub
                r = np.ascontiguousarray(ref[p][y0:y0 + ph, x0:x0 + pw])
                d = np.ascontiguousarray(dist[p][t % GRAINS][y0:y0 + ph, x0:x0 + pw])
                if p == 0:  # the fast block: sharp in the reference, a shade off in the distorted
                    r[h // 3:h // 3 + box, bx:bx + box] = 225
                    d[h // 3:h // 3 + box, bx:bx + box] = 221
                fr.write(memoryview(r).cast("B"))
                fd.write(memoryview(d).cast("B"))
    size = paths[0].stat().st_size
    digests = []
    for path in paths:
        with open(path, "rb") as f:
            digests.append(hashlib.sha256(f.read(65536)).hexdigest()[:16])
    return size, "/".join(digests)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("specs", nargs="+", metavar="WxH:FRAMES")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        specs = [parse_spec(s) for s in args.specs]
    except ValueError as e:
        ap.error(str(e))
    args.outdir.mkdir(parents=True, exist_ok=True)
    for w, h, n in specs:
        size, digest = make_pair(args.outdir, w, h, n, args.seed)
        print(f"{w}x{h}: {n} frames, {size} bytes each, sha256[:64KiB] {digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
