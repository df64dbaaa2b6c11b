#!/usr/bin/env python3
"""libvmaf's SpEED features and v1.0.16 models on the vendored pairs, as test vectors.

    python3 scripts/speed_libvmaf_vectors.py PATH/TO/vmaf [OUT.json]
    python3 scripts/speed_libvmaf_vectors.py --full PATH/TO/vmaf [OUT.json]

Runs libvmaf's ``vmaf`` tool (built from the reference commit with ``%.17g``
in ``src/output.c``, so every value is the full double; see
tests/data/REFERENCE-README.md) on the first frames of the vendored pairs under
tests/data: ``speed_chroma`` and ``speed_temporal`` with the option sets below,
and each ``vmaf_v1.0.16*`` model.  Every pair is fed as raw planar YUV with
libvmaf's floor-size chroma (its y4m reader cannot read odd sizes).  Writes the
per-frame values to OUT (default tests/data/scores/speed_libvmaf.json);
tests/features/test_speed.py and tests/model/test_speed_models.py compare
vmafxd with them.  ``--full``: every pair of the full reference set
(../shared/reference, first 3 frames, default options) and two models on its
1080p pair, into tests/data/scores/speed_libvmaf_full.json (used by the tests
marked ``reference`` when that set is present).
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
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

from vmafx.io.video import open_video  # noqa: E402

#: (pair id, frames, --feature specifications)
FEATURE_CASES = [
    ("p01_testsrc2_x264crf35", 4, ["speed_chroma", "speed_temporal"]),
    ("p15_coffee720_10bit_x264crf35", 2, ["speed_chroma", "speed_temporal"]),
    ("p16_chelsea641x361_x264crf35", 3, ["speed_chroma", "speed_temporal"]),
    ("p17_colorwheel444_x264crf35", 2, ["speed_chroma", "speed_temporal"]),
    ("p18_immuno422_x264crf30", 3, ["speed_chroma", "speed_temporal"]),
    ("p11_camera_identical", 3, ["speed_chroma", "speed_temporal"]),
    ("p01_testsrc2_x264crf35", 2, [f"speed_chroma=speed_weight_var_mode={m}" for m in range(1, 7)]),
    ("p01_testsrc2_x264crf35", 2, [
        "speed_chroma=speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_max_val=4",
        "speed_chroma=speed_prescale=0.5:speed_prescale_method=bilinear",
        "speed_chroma=speed_prescale=0.6:speed_prescale_method=bilinear:speed_kernelscale=2",
        "speed_chroma=speed_prescale=1.5:speed_prescale_method=bilinear",
        "speed_chroma=speed_prescale=0.7:speed_kernelscale=0.5",
        "speed_temporal=speed_use_ref_diff=true:speed_sigma_nn=0.5",
        "speed_temporal=speed_prescale=0.5:speed_prescale_method=bilinear:speed_nn_floor=0.3",
        "speed_temporal=speed_kernelscale=1.5:speed_prescale=0.8",
    ]),
    ("p15_coffee720_10bit_x264crf35", 2, [
        "speed_chroma=speed_prescale=0.5:speed_prescale_method=bilinear:speed_weight_var_mode=5",
        "speed_temporal=speed_prescale=0.6:speed_prescale_method=bilinear",
    ]),
]
MODELS = ("vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_3d0h_2160", "vmaf_v1.0.16_5d0h", "vmaf_v1.0.16_1d5h_2160",
          "vmaf_v1.0.16_hfr_3d0h", "vmaf_v1.0.16_hfr_3d0h_2160", "vmaf_v1.0.16_hfr_5d0h",
          "vmaf_v1.0.16_hfr_1d5h_2160")
#: (pair id, frames, models)
MODEL_CASES = [
    ("p01_testsrc2_x264crf35", 3, MODELS),
    ("p15_coffee720_10bit_x264crf35", 2, ("vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_hfr_5d0h")),
    ("p16_chelsea641x361_x264crf35", 2, ("vmaf_v1.0.16_5d0h",)),
]


def main() -> int:
    args = sys.argv[1:]
    full = args[:1] == ["--full"]
    if full:
        args = args[1:]
    vmaf = args[0]
    out = Path(args[1]) if len(args) > 1 else DATA / "scores" / (
        "speed_libvmaf_full.json" if full else "speed_libvmaf.json")
    root = DATA
    feature_cases, model_cases = FEATURE_CASES, MODEL_CASES
    if full:
        from tests.reference import full_reference_root

        root = full_reference_root()
        if root is None:
            raise SystemExit("the full reference set is not here")
        ids = [p["id"] for p in json.loads((root / "clips" / "clips.json").read_text())["pairs"]]
        feature_cases = [(pid, 3, ["speed_chroma", "speed_temporal"]) for pid in ids]
        model_cases = [("p14_retina1080_x264crf35", 3, ("vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_hfr_3d0h_2160"))]
    manifest = json.loads((root / "clips" / "clips.json").read_text())
    pairs = {p["id"]: p for p in manifest["pairs"]}
    res = subprocess.run([vmaf, "--version"], capture_output=True, text=True)
    version = (res.stdout + res.stderr).strip()
    tmp = Path(tempfile.mkdtemp(prefix="speed-vectors-"))

    def raw(name: str, frames: int) -> tuple[Path, dict]:
        """The clip's first frames as planar YUV with (w >> 1)-wide chroma, as libvmaf's picture holds it."""
        path = tmp / f"{name}.{frames}.yuv"
        with open_video(root / "clips" / manifest["clips"][name]["file"]) as r:
            info = r.info
            with open(path, "wb") as f:
                for k, planes in enumerate(r):
                    if k == frames:
                        break
                    y = planes[0]
                    h, w = y.shape
                    for i, p in enumerate(planes):
                        if i:
                            ch = p.shape[0] if p.shape[0] == h else h >> 1
                            cw = p.shape[1] if p.shape[1] == w else w >> 1
                            p = p[:ch, :cw]
                        f.write(p.astype("<u2" if info.bitdepth > 8 else "u1").tobytes())
        return path, {"w": w, "h": h}

    def run(pair_id: str, frames: int, args: list[str]) -> list[dict]:
        p = pairs[pair_id]
        ref, geo = raw(p["ref"], frames)
        dist, _ = raw(p["dist"], frames)
        pix = {"yuv420p": "420", "yuv422p": "422", "yuv444p": "444", "yuv420p10le": "420"}[p["pix_fmt"]]
        log = tmp / "log.json"
        subprocess.run([vmaf, "-r", str(ref), "-d", str(dist), "-w", str(geo["w"]), "-h", str(geo["h"]),
                        "-p", pix, "-b", str(p["bitdepth"]), *args, "--frame_cnt", str(frames),
                        "-q", "--json", "-o", str(log)], check=True)
        return [f["metrics"] for f in json.loads(log.read_text())["frames"]]

    features = []
    for pid, n, specs in feature_cases:
        args = ["--no_prediction"] + [a for s in specs for a in ("--feature", s)]
        features.append({"pair": pid, "features": specs, "frames": run(pid, n, args)})
    models = []
    for pid, n, versions in model_cases:
        for v in versions:
            models.append({"pair": pid, "model": v, "frames": run(pid, n, ["-m", f"version={v}"])})
    return write_vectors(out, __file__, version, features=features, models=models)


if __name__ == "__main__":
    sys.exit(main())
