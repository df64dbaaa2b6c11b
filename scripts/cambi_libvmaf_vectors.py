#!/usr/bin/env python3
"""libvmaf's CAMBI with non-default options, and its heatmap files, as test vectors.

    python3 scripts/cambi_libvmaf_vectors.py PATH/TO/vmaf [OUT.json]

Runs libvmaf's ``vmaf`` tool (built from the reference commit, see
tests/data/REFERENCE-README.md) on the vendored pairs under tests/data with the
option sets below and writes its printed per-frame values, and the SHA-256 of
each heatmap file it writes, to OUT (default tests/data/scores/cambi_libvmaf.json).
tests/features/test_cambi.py compares the CPU twin with them.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import subprocess
import sys
import tempfile
from pathlib import Path

from _vectors import write_vectors

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

#: (pair id, feature options, frames); "heatmaps" cases also keep the heatmap digests
CASES = [
    ("p01_testsrc2_x264crf35", "full_ref=true:topk=0.3", 2),
    ("p01_testsrc2_x264crf35", "window_size=30:max_log_contrast=3:tvi_threshold=0.05", 2),
    ("p01_testsrc2_x264crf35", "enc_width=480:enc_height=270:enc_bitdepth=10", 2),
    ("p01_testsrc2_x264crf35", "eotf=pq:cambi_vis_lum_threshold=5", 2),
    ("p01_testsrc2_x264crf35", "max_log_contrast=5:cambi_topk=0.9", 2),
    ("p01_testsrc2_x264crf35", "max_log_contrast=0:cambi_max_val=0.2", 2),
    ("p13_astronaut_sharpen", "full_ref=true:src_width=480:src_height=270:cambi_eotf=pq", 2),
    ("p15_coffee720_10bit_x264crf35", "full_ref=true:src_width=960:src_height=540:enc_width=640:enc_height=360", 1),
    ("p15_coffee720_10bit_x264crf35", "enc_bitdepth=8:window_size=100", 1),
]
HEATMAP_CASES = [
    ("p01_testsrc2_x264crf35", "", 3),
    ("p15_coffee720_10bit_x264crf35", "window_size=40:max_log_contrast=1", 2),
]


def main() -> int:
    vmaf = sys.argv[1]
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else DATA / "scores" / "cambi_libvmaf.json"
    manifest = json.loads((DATA / "clips" / "clips.json").read_text())
    pairs = {p["id"]: p for p in manifest["pairs"]}
    res = subprocess.run([vmaf, "--version"], capture_output=True, text=True)
    version = (res.stdout + res.stderr).strip()
    tmp = Path(tempfile.mkdtemp(prefix="cambi-vectors-"))

    def clip(name: str) -> Path:
        path = tmp / f"{name}.y4m"
        if not path.exists():
            path.write_bytes(lzma.open(DATA / "clips" / manifest["clips"][name]["file"]).read())
        return path

    def run(pair_id: str, options: str, frames: int, heatmaps: Path | None = None) -> list[dict]:
        p = pairs[pair_id]
        spec = "cambi" + (f"={options}" if options else "")
        if heatmaps is not None:
            spec += ("=" if not options else ":") + f"heatmaps_path={heatmaps}"
        log = tmp / "log.json"
        subprocess.run([vmaf, "-r", str(clip(p["ref"])), "-d", str(clip(p["dist"])), "--no_prediction",
                        "--feature", spec, "--frame_cnt", str(frames), "-q", "--json", "-o", str(log)], check=True)
        return [f["metrics"] for f in json.loads(log.read_text())["frames"]]

    cases = [{"pair": pid, "options": opts, "frames": run(pid, opts, n)} for pid, opts, n in CASES]
    heatmaps = []
    for k, (pid, opts, n) in enumerate(HEATMAP_CASES):
        where = tmp / f"heatmaps{k}"
        frames = run(pid, opts, n, where)
        digests = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(where.iterdir())}
        heatmaps.append({"pair": pid, "options": opts, "frames": frames, "files": digests})
    return write_vectors(out, __file__, version, cases=cases, heatmaps=heatmaps)


if __name__ == "__main__":
    sys.exit(main())
