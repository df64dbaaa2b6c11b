"""Ground truth for the tests: libvmaf's outputs on the reference clips.

Two sources with the same layout: the vendored subset in ``tests/data``
(always present; some pairs cut to their first frames) and the full set in
``../shared/reference`` (or ``$VMAFX_REFERENCE``) when it exists.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from vmafx.formats import parse_pixel_format
from vmafx.io.video import open_video
from vmafxd.core.picture import Picture, picture_from_stored

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "data"
MODELS = ("vmaf_v0.6.1", "vmaf_v0.6.1neg", "vmaf_4k_v0.6.1", "vmaf_b_v0.6.3")


def full_reference_root() -> Path | None:
    env = os.environ.get("VMAFX_REFERENCE")
    cands = [Path(env)] if env else []
    cands.append(HERE.parent.parent / "shared" / "reference")
    for c in cands:
        if (c / "clips" / "clips.json").is_file() and (c / "scores").is_dir():
            return c
    return None


@dataclass(frozen=True)
class Pair:
    root: Path
    id: str
    ref_file: Path
    dist_file: Path
    width: int
    height: int
    pix_fmt: str
    bitdepth: int
    frames: int
    #: frames with ground truth (a cut pair lacks its last frame's motion2)
    scored_frames: int
    truncated: bool

    def scores(self, model: str) -> dict:
        return _load_json(self.root / "scores" / f"{self.id}.{model}.json")

    def fullprec(self, model: str) -> dict | None:
        p = self.root / "scores" / "fullprec" / f"{self.id}.{model}.json"
        return _load_json(p) if p.is_file() else None

    def pictures(self) -> tuple[list[Picture], list[Picture]]:
        return _pictures(self.ref_file), _pictures(self.dist_file)


@functools.lru_cache(maxsize=None)
def _load_json(path: Path) -> dict:
    return json.loads(path.read_text())


@functools.lru_cache(maxsize=8)
def _pictures(path: Path) -> list[Picture]:
    with open_video(path) as r:
        fmt, depth = r.info.pixel_format, r.info.bitdepth
        return [picture_from_stored([p.copy() for p in frame], fmt, depth) for frame in r]


def pairs(root: Path) -> list[Pair]:
    manifest = _load_json(root / "clips" / "clips.json")
    clips = manifest["clips"]
    out = []
    for p in manifest["pairs"]:
        ref, dist = clips[p["ref"]], clips[p["dist"]]
        fmt = parse_pixel_format(p["pix_fmt"])
        out.append(
            Pair(
                root=root,
                id=p["id"],
                ref_file=root / "clips" / ref["file"],
                dist_file=root / "clips" / dist["file"],
                width=p["width"],
                height=p["height"],
                pix_fmt=fmt.value,
                bitdepth=p["bitdepth"],
                frames=p["frames"],
                scored_frames=p.get("scored_frames", p["frames"]),
                truncated="scored_frames" in p,
            )
        )
    return out


def vendored_pairs() -> list[Pair]:
    return pairs(VENDORED)


def full_pairs() -> list[Pair]:
    root = full_reference_root()
    return pairs(root) if root else []


def all_pairs() -> list[Pair]:
    """The full set when present, else the vendored subset."""
    return full_pairs() or vendored_pairs()


def pair_params(*, full: bool | None = None):
    """pytest parameters: vendored pairs always; full pairs (marked) when present."""
    import pytest

    params = [pytest.param(p, id=f"vendored-{p.id}") for p in vendored_pairs()]
    if full is not False:
        params += [pytest.param(p, id=f"full-{p.id}", marks=pytest.mark.reference) for p in full_pairs()]
    return params


def printed(value: float | None) -> float | None:
    """A value as libvmaf's CLI prints it (%.6f, or %.16f when 7+ zeros follow the point)."""
    if value is None:
        return None
    return float(format_libvmaf(value))


def format_libvmaf(value: float) -> str:
    # Mirrors output.c: tiny non-zero magnitudes print with %.16f.
    from vmafx.io.scores import format_score

    return format_score(value)


def uncompressed_chelsea(folder: Path) -> dict[str, str]:
    """The vendored 641x361 pair (odd sizes, 6 frames) written uncompressed into ``folder``:
    ``ref``/``dist`` y4m, ``ref_raw``/``dist_raw`` the same frames as raw .yuv."""
    import lzma

    from vmafx.io.inputs import open_input

    pair = next(p for p in vendored_pairs() if p.id.startswith("p16_"))
    out = {}
    for key, f in (("ref", pair.ref_file), ("dist", pair.dist_file)):
        y4m = folder / f"{key}.y4m"
        y4m.write_bytes(lzma.decompress(f.read_bytes()))
        with open_input(str(y4m)) as inp, open(folder / f"{key}.yuv", "wb") as raw:
            buf = bytearray(inp.info.frame_size)
            while inp.read_frame_into(memoryview(buf)):
                raw.write(buf)
        out[key], out[key + "_raw"] = str(y4m), str(folder / f"{key}.yuv")
    return out
