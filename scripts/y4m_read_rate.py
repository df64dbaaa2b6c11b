#!/usr/bin/env python3
"""How fast Python alone can read a y4m pair frame by frame: the I/O ceiling of a file scorer.

    python3 scripts/y4m_read_rate.py REF.y4m DIST.y4m [--reps R]

Reads both files the way a client that scores them must at least read them: the stream
header, then for each frame its ``FRAME`` line and the frame's bytes into a buffer kept
between frames (``readinto``, no per-frame allocation), alternating reference and
distorted. No parsing of the samples, no copies beyond the read itself. Prints one line::

    pyread FRAMES frames in SECONDS s: FPS frames/s, GBPS GB/s (both files)

per repetition (and the median when R > 1). ``cat REF DIST > /dev/null`` is the
shell's version of the same ceiling (scripts/bench_vs_libvmaf.sh times both).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time


def frame_bytes(header: bytes) -> int:
    """Bytes of one frame of a y4m stream header (8-bit; 420/422/444/mono)."""
    w = h = None
    chroma = "420"
    for tok in header.split()[1:]:
        t = tok.decode("ascii", "replace")
        if t[0] == "W":
            w = int(t[1:])
        elif t[0] == "H":
            h = int(t[1:])
        elif t[0] == "C":
            chroma = t[1:]
    if w is None or h is None:
        raise ValueError(f"y4m header without W/H: {header[:80]!r}")
    if chroma.startswith("mono"):
        return w * h
    if not chroma.startswith(("420", "422", "444")) or re.search(r"p\d+$", chroma):
        raise ValueError(f"y4m header: chroma C{chroma} is not an 8-bit format this reader sizes")
    cw = (w + 1) // 2 if chroma.startswith(("420", "422")) else w
    ch = (h + 1) // 2 if chroma.startswith("420") else h
    return w * h + 2 * cw * ch


def read_pair(ref: str, dist: str) -> tuple[int, int, float]:
    """(frames, bytes, seconds) for one pass over both files."""
    t0 = time.perf_counter()
    total = 0
    frames = 0
    with open(ref, "rb", buffering=0) as fr, open(dist, "rb", buffering=0) as fd:
        readers = []
        for f in (fr, fd):
            # unbuffered: the header line is read byte-wise until its newline (short)
            header = bytearray()
            while not header.endswith(b"\n"):
                b = f.read(1)
                if not b:
                    raise ValueError(f"{f.name}: no y4m header")
                header += b
            n = frame_bytes(bytes(header))
            readers.append((f, bytearray(6 + n)))  # b"FRAME\n" + the frame: one readinto
            total += len(header)
        while True:
            got = [f.readinto(buf) for f, buf in readers]
            if got[0] == 0 or got[1] == 0:
                break
            for g, (f, buf) in zip(got, readers):
                if g != len(buf) or buf[:6] != b"FRAME\n":
                    # frame parameters after FRAME, or a truncated last frame: not in this benchmark's clips
                    raise ValueError(f"{f.name}: frame {frames} is not a plain 'FRAME\\n' + {len(buf) - 6} bytes")
                total += g
            frames += 1
    return frames, total, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("dist")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args(argv)
    rates = []
    for _ in range(args.reps):
        frames, nbytes, secs = read_pair(args.ref, args.dist)
        rates.append(frames / secs)
        print(f"pyread {frames} frames in {secs:.3f} s: {frames / secs:.1f} frames/s, "
              f"{nbytes / secs / 1e9:.2f} GB/s (both files)", flush=True)
    if args.reps > 1:
        print(f"pyread median {statistics.median(rates):.1f} frames/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
