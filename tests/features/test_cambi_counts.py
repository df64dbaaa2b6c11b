"""The CPU twin's window counting (``_cambi_core.window_counts``) against direct counts.

Windows from 9 to 65 pixels wide (uint8 and uint16 sums), pictures of several
tiles with flat areas (counts above 255), values at the edges of the picture
and of the counted band, the tables in one buffer and in several; and the c-values with contrast thresholds whose
intervals are not nested (the twin's other way of ordering the pixels).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vmafxd.features import _cambi_core as core
from vmafxd.features._cambi_tables import contrast_tables, reciprocal_lut

from .test_cambi import TABLES, _loop_c_values


def _flat_picture(rng, h, w):
    # large flat patches of a few neighbouring values, some noise
    base = rng.integers(200, 209, (h // 40 + 1, w // 48 + 1)).repeat(40, 0).repeat(48, 1)[:h, :w]
    noise = (rng.random((h, w)) < 0.05) * rng.integers(-2, 3, (h, w))
    return (base + noise).astype(np.uint16)


@pytest.mark.parametrize("max_rows", [None, 150], ids=["one-buffer", "buffers-of-150-rows"])
@pytest.mark.parametrize("window", [9, 17, 33, 65])
def test_window_counts_match_direct_counts(window, max_rows, monkeypatch):
    if max_rows:
        monkeypatch.setattr(core, "MAX_BUFFER_ROWS", max_rows)
    rng = np.random.default_rng(window)
    h, w = 150, 203
    img = _flat_picture(rng, h, w)
    counted = rng.random((h, w)) < 0.9
    counted[img == 204] = False  # a value asked for but never counted
    pad, nd = window >> 1, 4
    # some pixels everywhere, the corners and edges included
    qr, qc = np.nonzero(counted)
    pick = np.sort(rng.choice(qr.size, 400, replace=False))
    edge = np.flatnonzero((qr == 0) | (qc == 0) | (qr == h - 1) | (qc == w - 1))[::7]
    pick = np.union1d(pick, edge)
    qr, qc = qr[pick], qc[pick]
    got = core.window_counts(img, counted, qr, qc, pad, nd)
    want = np.zeros_like(got)
    for n, (i, j) in enumerate(zip(qr, qc)):
        rs, cs = slice(max(0, i - pad), i + pad + 1), slice(max(0, j - pad), j + pad + 1)
        win, cnt = img[rs, cs].astype(int), counted[rs, cs]
        for k in range(-nd, nd + 1):
            want[k + nd, n] = np.count_nonzero(cnt & (win == int(img[i, j]) + k))
    if window >= 17:
        assert want.max() > 255  # the uint16 sums are exercised
    assert np.array_equal(got, want)


@pytest.mark.parametrize("max_rows", [None, 100])
def test_window_counts_only_for_wanted_pixels(max_rows, monkeypatch):
    if max_rows:
        monkeypatch.setattr(core, "MAX_BUFFER_ROWS", max_rows)
    rng = np.random.default_rng(7)
    img = _flat_picture(rng, 70, 90)
    counted = np.ones(img.shape, bool)
    qr, qc = np.nonzero(counted)
    full = core.window_counts(img, counted, qr, qc, 8, 2)
    wanted = [(10, 20), (0, 0), (0, qr.size), (5, 5), (100, 3000)]
    part = core.window_counts(img, counted, qr, qc, 8, 2, wanted)
    for k, (lo, hi) in enumerate(wanted):
        assert np.array_equal(part[k, lo:hi], full[k, lo:hi])
        assert not part[k, :lo].any() and not part[k, hi:].any()


def test_c_values_with_thresholds_not_nested():
    # tvi_for_diff not growing with d: the pixels of each step are not a prefix
    rng = np.random.default_rng(11)
    base = rng.integers(100, 112, (7, 9)).repeat(5, 0).repeat(6, 1)[:33, :47]
    img = (base + (rng.random(base.shape) < 0.15) * rng.integers(-3, 4, base.shape)).astype(np.uint16)
    mask = rng.random(img.shape) < 0.8
    tables = dataclasses.replace(contrast_tables(2, 0.019, "bt1886", 0.0), tvi_for_diff=(112, 108, 114, 110))
    lut = reciprocal_lut()
    got = core.c_values(img, mask, 9, tables, lut)
    want = _loop_c_values(img, mask, 9, tables, lut)
    assert np.count_nonzero(want) > 100
    assert np.array_equal(got, want)
    assert TABLES.tvi_for_diff == tuple(sorted(TABLES.tvi_for_diff))  # the default case is nested
