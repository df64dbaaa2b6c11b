#!/usr/bin/env python3
"""Make tests/data: a small subset of ../shared/reference that travels with the repo.

Whole pairs are copied as they are; the larger ones are cut to their first
frames (re-compressed with xz).  A cut pair's score files keep all frames but
the last one it holds: the last kept frame's ``integer_motion2`` (and so its
VMAF) depends on the frame after it, which the cut clip lacks.  Pooled
metrics of a cut pair are dropped for the same reason.

    python3 scripts/vendor_reference.py [REFERENCE_DIR] [OUT_DIR]
"""

import json
import lzma
import shutil
import sys
from pathlib import Path

# pair id -> number of frames to keep (None: whole pair)
SUBSET = {
    "p01_testsrc2_x264crf35": None,     # 8-bit 4:2:0, 24 frames
    "p11_camera_identical": 4,          # identical input (psnr cap, adm2 > 1)
    "p13_astronaut_sharpen": 3,         # enhancement gain (neg model's limits)
    "p16_chelsea641x361_x264crf35": None,  # odd size
    "p17_colorwheel444_x264crf35": 4,   # 4:4:4
    "p18_immuno422_x264crf30": 3,       # 8-bit 4:2:2
    "p15_coffee720_10bit_x264crf35": 2, # 10-bit
}
MODELS = ("vmaf_v0.6.1", "vmaf_v0.6.1neg", "vmaf_4k_v0.6.1", "vmaf_b_v0.6.3")


def cut_y4m(src: Path, dst: Path, frames: int | None) -> None:
    if frames is None:
        shutil.copyfile(src, dst)
        return
    data = lzma.open(src).read()
    nl = data.index(b"\n")
    header = data[: nl + 1]
    out, off = [header], nl + 1
    first = data.index(b"FRAME", off)
    nxt = data.index(b"FRAME", first + 6)
    frame_len = nxt - first
    out.append(data[first : first + frame_len * frames])
    with lzma.open(dst, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(b"".join(out))


def main() -> None:
    ref = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / ".." / "shared" / "reference")
    out = Path(sys.argv[2] if len(sys.argv) > 2 else Path(__file__).resolve().parents[1] / "tests" / "data")
    (out / "clips").mkdir(parents=True, exist_ok=True)
    (out / "scores" / "fullprec").mkdir(parents=True, exist_ok=True)
    manifest = json.loads((ref / "clips" / "clips.json").read_text())
    clips = manifest["clips"]
    pairs = {p["id"]: p for p in manifest["pairs"]}
    sub = {"clips": {}, "pairs": []}
    for pid, keep in SUBSET.items():
        pair = dict(pairs[pid])
        for role in ("ref", "dist"):
            name = pair[role]
            info = dict(clips[name])
            cut_y4m(ref / "clips" / info["file"], out / "clips" / info["file"], keep)
            if keep is not None:
                info["frames"] = keep
                info.pop("y4m_sha256", None), info.pop("raw_sha256", None), info.pop("xz_bytes", None)
                info["y4m_bytes"] = None
            sub["clips"][name] = info
        if keep is not None:
            pair["frames"] = keep
            pair["scored_frames"] = keep - 1
        sub["pairs"].append(pair)
        for model in MODELS:
            for sub_dir in ("", "fullprec"):
                src = ref / "scores" / sub_dir / f"{pid}.{model}.json"
                scores = json.loads(src.read_text())
                if keep is not None:
                    scores["frames"] = scores["frames"][: keep - 1]
                    scores["pooled_metrics"] = {}
                    scores["truncated"] = True
                dst = out / "scores" / sub_dir / f"{pid}.{model}.json"
                dst.write_text(json.dumps(scores, indent=None, separators=(",", ":")))
    (out / "clips" / "clips.json").write_text(json.dumps(sub, indent=1))
    shutil.copyfile(ref / "README.md", out / "REFERENCE-README.md")


if __name__ == "__main__":
    main()
