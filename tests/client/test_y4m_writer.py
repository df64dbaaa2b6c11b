"""The y4m writer: what it writes reads back as it was, at 8 and 10 bits, cropped."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vmafx.formats import PixelFormat
from vmafx.io.video import VideoInfo, open_video
from vmafx.io.y4m_writer import crop_frame, write_y4m, y4m_colour_tag

from .conftest import pair


@pytest.mark.parametrize("pair_id", ["p16_chelsea641x361_x264crf35", "p15_coffee720_10bit_x264crf35",
                                     "p18_immuno422_x264crf30"])
def test_cropped_frames_read_back_equal(tmp_path, pair_id):
    p = pair(pair_id)
    with open_video(p.ref_file) as r:
        info = r.info
        frames = [f for f, _ in zip(r, range(2))]
    w, h = 97, 51  # odd: ceil-size chroma
    small = replace(info, width=w, height=h)
    cropped = [crop_frame(f, info, w, h) for f in frames]
    assert write_y4m(tmp_path / "c.y4m", small, cropped) == 2
    with open_video(tmp_path / "c.y4m") as r:
        assert r.info == small
        back = list(r)
    assert len(back) == 2
    for got, want, full in zip(back, cropped, frames):
        for g, c, f in zip(got, want, full):
            assert np.array_equal(g, c) and np.array_equal(g, f[: g.shape[0], : g.shape[1]])


def test_bad_input_names_what_is_wrong(tmp_path):
    info = VideoInfo(8, 8, PixelFormat.YUV420P, 8)
    assert y4m_colour_tag(PixelFormat.YUV420P, 10) == "420p10"
    with pytest.raises(ValueError, match="frame 0: plane 1 is"):
        write_y4m(tmp_path / "x.y4m", info, [[np.zeros((8, 8), np.uint8), np.zeros((3, 4), np.uint8),
                                              np.zeros((4, 4), np.uint8)]])
    with pytest.raises(ValueError, match="crop: 9x8 is not inside 8x8"):
        crop_frame([np.zeros((8, 8), np.uint8)] * 3, info, 9, 8)
    with pytest.raises(ValueError, match="pixel_format: y4m has no colour tag for nv12"):
        y4m_colour_tag(PixelFormat.NV12, 8)
