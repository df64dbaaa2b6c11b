#!/usr/bin/env python3
"""libvmaf's ``float_psnr``, ``float_ansnr`` and ``float_moment`` per frame, as test vectors.

    python3 scripts/float_simple_libvmaf_vectors.py PATH/TO/vmaf [OUT.json]

The reference runs (tests/data/scores) do not ask libvmaf for these three
features, so this runs libvmaf's ``vmaf`` tool (built from the reference
commit, see tests/data/REFERENCE-README.md) on every vendored pair under
tests/data with ``--feature float_psnr --feature float_ansnr --feature
float_moment`` and writes each frame's values to OUT (default
tests/data/scores/float_simple_libvmaf.json).  Use a ``vmaf`` whose
``src/output.c`` prints ``%.17g`` instead of ``%.6f``: the values are then
libvmaf's doubles themselves, and the tests compare them exactly.

Two more cases score the 10-bit pair's first frame as 12-bit and as 16-bit
raw video (every sample shifted left by 2 and by 6 bits), for the 12- and
16-bit paths of libvmaf's ``picture_copy`` and of the sums; the tests build
the same pictures the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _vectors import write_vectors

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
FEATURES = ("float_psnr", "float_ansnr", "float_moment")
#: (pair id, bit depth, left shift): the 10-bit pair's samples shifted into a deeper raw file
SHIFTED = [("p15_coffee720_10bit_x264crf35", 12, 2), ("p15_coffee720_10bit_x264crf35", 16, 6)]


def main() -> int:
    sys.path[:0] = [str(ROOT), str(ROOT / "client")]
    import numpy as np
    from vmafx.io.video import open_video

    vmaf = sys.argv[1]
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else DATA / "scores" / "float_simple_libvmaf.json"
    manifest = json.loads((DATA / "clips" / "clips.json").read_text())
    res = subprocess.run([vmaf, "--version"], capture_output=True, text=True)
    version = (res.stdout + res.stderr).strip()
    tmp = Path(tempfile.mkdtemp(prefix="float-simple-vectors-"))
    features = [a for f in FEATURES for a in ("--feature", f)]

    def run(args: list[str], frames: int) -> list[dict]:
        log = tmp / "log.json"
        subprocess.run([vmaf, *args, "--no_prediction", *features, "--frame_cnt", str(frames), "-q",
                        "--json", "-o", str(log)], check=True)
        return [f["metrics"] for f in json.loads(log.read_text())["frames"]]

    def raw(clip: str, shift: int, floor_chroma: bool, frames: int | None = None) -> Path:
        # a vendored clip as planar raw video (libvmaf's y4m reader takes neither odd sizes nor
        # every chroma layout), samples << shift, chroma cut to floor size when asked
        path = tmp / f"{clip}.{shift}.yuv"
        chunks = []
        with open_video(DATA / "clips" / manifest["clips"][clip]["file"]) as r:
            w, h = r.info.width, r.info.height
            for k, planes in enumerate(r):
                if frames is not None and k == frames:
                    break
                for i, plane in enumerate(planes):
                    plane = np.asarray(plane)
                    if i and floor_chroma:
                        # only the 4:2:0 odd-size pair is fed this way (REFERENCE-README, "Odd sizes")
                        plane = plane[: h >> 1, : w >> 1]
                    if shift or plane.dtype != np.uint8:
                        plane = (plane.astype(np.uint16) << shift).astype("<u2")
                    chunks.append(plane.tobytes())
        path.write_bytes(b"".join(chunks))
        return path

    def geometry(p: dict, depth: int) -> list[str]:
        return ["-w", str(p["width"]), "-h", str(p["height"]), "-p", p["chroma"], "-b", str(depth)]

    cases = []
    for p in manifest["pairs"]:
        if p["vmaf_cli_input"] == "y4m":
            paths = []
            for role in ("ref", "dist"):
                src = DATA / "clips" / manifest["clips"][p[role]]["file"]
                dst = tmp / src.name.removesuffix(".xz")
                if not dst.exists():
                    subprocess.run(["xz", "-dkc", str(src)], stdout=open(dst, "wb"), check=True)
                paths.append(dst)
            args = ["-r", str(paths[0]), "-d", str(paths[1])]
        else:
            floor = p["vmaf_cli_input"] == "raw_floor_chroma"
            args = ["-r", str(raw(p["ref"], 0, floor)), "-d", str(raw(p["dist"], 0, floor)), *geometry(p, 8)]
        frames = run(args, p["frames"])
        cases.append({"pair": p["id"], "bitdepth": p["bitdepth"], "shift": 0, "frames": frames})
    for pid, depth, shift in SHIFTED:
        p = next(q for q in manifest["pairs"] if q["id"] == pid)
        files = [raw(p[role], shift, False, 1) for role in ("ref", "dist")]
        frames = run(["-r", str(files[0]), "-d", str(files[1]), *geometry(p, depth)], 1)
        cases.append({"pair": pid, "bitdepth": depth, "shift": shift, "frames": frames})
    return write_vectors(out, __file__, version, features=list(FEATURES), cases=cases)


if __name__ == "__main__":
    sys.exit(main())
