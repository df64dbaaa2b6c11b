"""CAMBI, the contrast-aware multiscale banding index (libvmaf's ``cambi`` extractor).

No-reference by default: the score of a frame comes from the *distorted*
luma only.  With ``full_ref=true`` the reference is scored too
(``cambi_source``, at ``src_width x src_height``) and ``cambi_full_reference``
is how much more banding the distorted frame shows (``max(0, dist - src)``).

Layers
------
* :mod:`._cambi_tables`: what init derives from the options (contrast
  thresholds through the EOTF, the band of values that can matter, weights,
  the reciprocal table).
* :mod:`._cambi_core`: the per-picture arithmetic (preprocessing, mask, mode
  filter, window counts, c-values, pooling, scale weighting).
* :class:`CambiSetup`: init's size and option resolution (encode/source
  sizes, windows, high-resolution speed-up), shared with the GPU twin.
* :class:`Cambi`: the CPU twin, which also writes libvmaf's heatmap files
  when ``heatmaps_path`` is set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from . import _cambi_core as core
from ._cambi_tables import (
    CONTRAST_WEIGHTS,
    EOTFS,
    NUM_SCALES,
    RECIPROCAL_LUT_SIZE,
    ContrastTables,
    contrast_tables,
    reciprocal_lut,
)
from .declaration import FeatureDeclaration, FrameScores, Option, OptionError

__all__ = ["DECLARATION", "Cambi", "CambiSetup", "cambi_setup", "heatmap_file_name", "heatmap_frame"]

DEFAULT_TOPK = 0.6
DEFAULT_EOTF = "bt1886"
MIN_WIDTH_HEIGHT = 216
_SPEEDUP_THRESHOLDS = {1080: 1920 * 1080, 1440: 2560 * 1440, 2160: 3840 * 2160}

CAMBI = "cambi"
SOURCE = "cambi_source"
FULL_REFERENCE = "cambi_full_reference"


@dataclass(frozen=True)
class CambiSetup:
    """What libvmaf's ``init`` fixes for one input size and set of options."""

    enc_width: int
    enc_height: int
    enc_bitdepth: int
    src_width: int
    src_height: int
    window: int
    src_window: int
    topk: float
    max_val: float
    full_ref: bool
    high_res_speedup: bool
    tables: ContrastTables
    heatmaps_path: str | None


def cambi_setup(options: Mapping[str, Any], width: int, height: int, bitdepth: int) -> CambiSetup:
    """cambi.c ``init``: defaults from the input, the size checks, windows, tables."""
    o = {**{opt.name: opt.default for opt in DECLARATION.options}, **options}
    enc_bd = o["enc_bitdepth"] or bitdepth
    enc_w, enc_h = (o["enc_width"], o["enc_height"]) if o["enc_width"] and o["enc_height"] else (width, height)
    src_w, src_h = (o["src_width"], o["src_height"]) if o["src_width"] and o["src_height"] else (width, height)
    # an encode smaller than the input is scored at its size; never upscaled past the input
    if enc_h > height or enc_w > width:
        enc_w, enc_h = width, height
    if enc_w < MIN_WIDTH_HEIGHT and enc_h < MIN_WIDTH_HEIGHT:
        raise OptionError("cambi.enc_width", f"{enc_w}x{enc_h} is below {MIN_WIDTH_HEIGHT} in both dimensions")
    if src_w < MIN_WIDTH_HEIGHT and src_h < MIN_WIDTH_HEIGHT:
        raise OptionError("cambi.src_width", f"{src_w}x{src_h} is below {MIN_WIDTH_HEIGHT} in both dimensions")
    if (src_w > enc_w and src_h < enc_h) or (src_w < enc_w and src_h > enc_h):
        raise OptionError("cambi.src_width", f"source {src_w}x{src_h} and encode {enc_w}x{enc_h} "
                          "must be scaled the same way in both dimensions")
    speedup = int(o["cambi_high_res_speedup"])
    threshold = _SPEEDUP_THRESHOLDS.get(speedup)
    speedup_on = threshold is not None and enc_w * enc_h >= threshold
    eotf = o["cambi_eotf"] if o["cambi_eotf"] != DEFAULT_EOTF else o["eotf"]
    try:
        tables = contrast_tables(int(o["max_log_contrast"]), float(o["tvi_threshold"]), eotf,
                                 float(o["cambi_vis_lum_threshold"]))
    except ValueError as e:
        raise OptionError("cambi.cambi_vis_lum_threshold", str(e)) from None
    window = core.adjust_window_size(int(o["window_size"]), enc_w, enc_h, speedup_on)
    src_window = core.adjust_window_size(int(o["window_size"]), src_w, src_h, speedup_on)
    if max(window, src_window) ** 2 >= RECIPROCAL_LUT_SIZE:
        raise OptionError("cambi.window_size", f"the window scaled to the picture ({max(window, src_window)}) "
                          "is larger than libvmaf's 65")
    topk = float(o["topk"]) if o["topk"] != DEFAULT_TOPK else float(o["cambi_topk"])
    return CambiSetup(enc_w, enc_h, enc_bd, src_w, src_h, window, src_window, topk,
                      float(o["cambi_max_val"]), bool(o["full_ref"]), speedup_on, tables, o["heatmaps_path"])


def heatmap_file_name(scale: int, width: int, height: int) -> str:
    return f"cambi_heatmap_scale_{scale}_{width}x{height}_16b.gray"


def heatmap_frame(c: np.ndarray, window: int, tables: ContrastTables) -> np.ndarray:
    """One scale's c-values as libvmaf writes them: uint16, scaled so the largest
    possible c-value (max weight x window^2 / 4) maps to 65535, truncated."""
    max_c = max(CONTRAST_WEIGHTS[: tables.num_diffs]) * window * window // 4
    scaling = float((1 << 16) - 1) / max_c
    # (uint16_t)(double): truncation; the conversion goes through a 32-bit int on x86
    return (np.trunc(scaling * c.astype(np.float64)).astype(np.int64) & 0xFFFF).astype("<u2")


class _Heatmaps:
    """The five heatmap files of a session (libvmaf opens them at init, truncating)."""

    def __init__(self, path: str, setup: CambiSetup):
        try:
            os.makedirs(path, mode=0o770, exist_ok=True)
        except OSError as e:
            raise OptionError("cambi.heatmaps_path", f"cannot create {path!r}: {e}") from None
        self.files = []
        w, h = setup.enc_width, setup.enc_height
        for scale in range(NUM_SCALES):
            name = os.path.join(path, heatmap_file_name(scale, w, h))
            try:
                self.files.append(open(name, "wb"))
            except OSError as e:
                self.close()
                raise OptionError("cambi.heatmaps_path", f"cannot open {name!r}: {e}") from None
            w, h = (w + 1) >> 1, (h + 1) >> 1

    def write(self, frame: int, scale: int, data: np.ndarray) -> None:
        f = self.files[scale]
        # frame-indexed position, as libvmaf's fseek to (frame * height + row) * width * 2
        f.seek(frame * data.size * 2)
        f.write(data.tobytes())

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


class Cambi:
    """CPU twin of libvmaf's ``cambi`` extractor."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        self.setup = cambi_setup(options, width, height, bitdepth)
        self.width, self.height, self.bitdepth = width, height, bitdepth
        self.lut = reciprocal_lut()
        s = self.setup
        self._pos_enc = (core.nearest_positions(height, s.enc_height), core.nearest_positions(width, s.enc_width))
        self._pos_src = (core.nearest_positions(height, s.src_height), core.nearest_positions(width, s.src_width))
        self._heatmaps = _Heatmaps(s.heatmaps_path, s) if s.heatmaps_path else None

    def score(self, luma: np.ndarray, bitdepth: int, is_src: bool = False, frame: int = 0) -> float:
        """The CAMBI score of one luma plane (unclipped), as preprocess_and_extract_cambi."""
        s = self.setup
        _check_range(luma, bitdepth)
        w, h = (s.src_width, s.src_height) if is_src else (s.enc_width, s.enc_height)
        img = core.preprocess(luma, bitdepth, w, h, s.enc_bitdepth, self._pos_src if is_src else self._pos_enc)
        heatmap = None
        if self._heatmaps is not None and not is_src:
            hm = self._heatmaps

            def heatmap(scale: int, c: np.ndarray) -> None:
                hm.write(frame, scale, heatmap_frame(c, s.window, s.tables))

        return core.cambi_score(img, s.src_window if is_src else s.window, s.topk, s.tables, self.lut,
                                s.high_res_speedup, heatmap)

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        return [(index, metrics_from_scores(self.setup, *self._scores(index, ref, dist)))]

    def _scores(self, index: int, ref: Any, dist: Any) -> tuple[float, float | None]:
        dist_score = self.score(dist.planes[0], dist.bitdepth, False, index)
        src_score = self.score(ref.planes[0], ref.bitdepth, True, index) if self.setup.full_ref else None
        return dist_score, src_score

    def flush(self) -> Iterable[FrameScores]:
        if self._heatmaps is not None:
            self._heatmaps.close()
        return []


def metrics_from_scores(setup: CambiSetup, dist_score: float, src_score: float | None) -> dict[str, float]:
    """The output values from the unclipped scores (cambi.c ``extract``)."""
    mx = setup.max_val
    out = {CAMBI: dist_score if dist_score < mx else mx}
    if setup.full_ref and src_score is not None:
        out[SOURCE] = src_score if src_score < mx else mx
        diff = dist_score - src_score
        combined = 0.0 if 0 > diff else diff
        out[FULL_REFERENCE] = combined if combined < mx else mx
    return out


def _check_range(luma: np.ndarray, bitdepth: int) -> None:
    # libvmaf refuses samples above the bit depth's range (validate_image)
    if bitdepth < 16 and luma.size and int(luma.max()) > (1 << bitdepth) - 1:
        raise ValueError(f"cambi: luma samples exceed the {bitdepth}-bit range")


def _validate(values: Mapping[str, Any]) -> None:
    for name in ("eotf", "cambi_eotf"):
        if values[name] not in EOTFS:
            raise OptionError(f"cambi.{name}", f"unknown EOTF {values[name]!r} (known: {', '.join(EOTFS)})")


DECLARATION = FeatureDeclaration(
    name="cambi",
    provides=(CAMBI,),
    option_provides=(("full_ref", (SOURCE, FULL_REFERENCE)),),
    unsuffixed=(SOURCE, FULL_REFERENCE),
    options=(
        Option("cambi_max_val", float, 1000.0, "maximum value allowed; larger values will be clipped to this value",
               alias="cmxv", min=0.0, max=1000.0, feature_param=True),
        Option("enc_width", int, 0, "Encoding width", alias="encw", min=180, max=7680, feature_param=True),
        Option("enc_height", int, 0, "Encoding height", alias="ench", min=150, max=7680, feature_param=True),
        Option("enc_bitdepth", int, 0, "Encoding bitdepth", alias="encbd", min=6, max=16, feature_param=True),
        Option("src_width", int, 0, "Source width. Only used when full_ref=true.", alias="srcw",
               min=320, max=7680, feature_param=True),
        Option("src_height", int, 0, "Source height. Only used when full_ref=true.", alias="srch",
               min=200, max=4320, feature_param=True),
        Option("window_size", int, 65, "Window size to compute CAMBI: 65 corresponds to ~1 degree at 4k",
               alias="ws", min=15, max=127, feature_param=True),
        Option("topk", float, DEFAULT_TOPK,
               "Ratio of pixels for the spatial pooling computation, must be 0 < topk <= 1.0",
               min=0.0001, max=1.0, feature_param=True),
        Option("cambi_topk", float, DEFAULT_TOPK,
               "Ratio of pixels for the spatial pooling computation, must be 0 < cambi_topk <= 1.0",
               alias="ctpk", min=0.0001, max=1.0, feature_param=True),
        Option("tvi_threshold", float, 0.019, "Visibilty threshold for luminance dL < tvi_threshold*L_mean",
               alias="tvit", min=0.0001, max=1.0, feature_param=True),
        Option("cambi_vis_lum_threshold", float, 0.0,
               "Luminance value below which we assume any banding is not visible",
               alias="vlt", min=0.0, max=300.0, feature_param=True),
        Option("max_log_contrast", int, 2,
               "Maximum contrast in log luma level (2^max_log_contrast) at 10-bits", alias="mlc",
               min=0, max=5, feature_param=True),
        Option("heatmaps_path", str, None, "Path where heatmaps will be dumped."),
        Option("full_ref", bool, False,
               "If true, CAMBI will be run in full-reference mode and will be computed on both the "
               "reference and distorted inputs"),
        Option("eotf", str, DEFAULT_EOTF, "EOTF for the visibility thresholds: bt1886 or pq",
               feature_param=True),
        Option("cambi_eotf", str, DEFAULT_EOTF,
               "EOTF for the visibility thresholds: bt1886 or pq; takes precedence over eotf", alias="ceot",
               feature_param=True),
        Option("cambi_high_res_speedup", int, 0,
               "downsample after the spatial mask from this resolution up: 1080, 1440, 2160 or 0 (off)",
               alias="hrs", min=0, max=2160, feature_param=True),
    ),
    temporal=False,
    kernel="cambi.cu",
    gpu="cambi",
    cpu=Cambi,
    validate=lambda values: _validate(values),
    help="CAMBI banding index of the distorted luma (and of the reference with full_ref)",
)
