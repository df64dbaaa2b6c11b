"""libvmaf's CTC presets (--aom_ctc, --nflx_ctc) give libvmaf's logs, byte for byte.

The presets pull in nearly every feature (PSNR with chroma and APSNR, CIEDE2000, float
SSIM/MS-SSIM in dB, PSNR-HVS, CAMBI) and two models each: the logs in
tests/data/scores/presets were written by libvmaf 3.2 (README.md there).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
REF = DATA / "clips" / "src_testsrc2_576x324.y4m.xz"
DIST = DATA / "clips" / "dst_testsrc2_576x324_x264crf35.y4m.xz"


def _strip(text: str) -> str:
    return re.sub(r'"(version|fps)": [^,\n]*', "", text)


@pytest.mark.parametrize("flag,version", [("--aom_ctc", "v1.0"), ("--aom_ctc", "v6.0"), ("--aom_ctc", "v7.0"),
                                          ("--nflx_ctc", "v1.0")])
def test_a_preset_gives_libvmafs_log(tmp_path, flag, version):
    expected = (DATA / "scores" / "presets" / f"{flag[2:]}_{version.replace('.', '_')}.json").read_text()
    out = tmp_path / "log.json"
    r = subprocess.run([sys.executable, "-m", "vmafx.cli", "score", "-r", str(REF), "-d", str(DIST), flag, version,
                        "--in-process", "--json", "-o", str(out), "-q"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert _strip(out.read_text()) == _strip(expected)
