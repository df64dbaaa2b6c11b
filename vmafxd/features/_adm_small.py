"""Integer ADM's scores of a few frames in scalar arithmetic: the whole-array path's bits at less fixed cost.

For a batch of one or two frames, numpy's cost per call (some seventy calls
on arrays of 36 elements) is most of ADM's host time.  Here the same C
operations, in the same order, run on Python floats:

* a ``float`` division of two float values is done in double and the
  result rounded to float once: the double quotient rounded to float *is*
  the float quotient, because double carries more than ``2 * 24 + 2`` bits
  (double rounding is innocuous then); the float additions after the cube
  roots are numpy's, on float32 arrays;
* a double stored to ``float`` is one rounding to nearest: numpy's
  conversion of the list of doubles to a float32 array (C's ``(float)``);
* the int64 sums go to double and to float through numpy's casts, as the
  array path converts them (one rounding each, as C);
* the cube roots are numpy's float32 scalar power, glibc's ``powf`` (as
  :func:`._adm_csf.powf_array`).

A division by zero (a scale's denominator sum of 0.0: only with a noise
weight of 0) raises here, where numpy gives inf or nan; the caller then
falls back to the array path (:func:`columns`' ``None``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ._adm_csf import ONE_THIRD_F

__all__ = ["columns", "Tables", "tables_for"]

#: the inputs of one frame, as the record and ``_columns`` order them: [kind][scale][band],
#: kinds num, den, aim; 36 sums
_KINDS, _SCALES, _BANDS = 3, 4, 3
_PER_KIND = _SCALES * _BANDS
_TINY_F32 = float(np.float32(1e-10))  # the den of a skipped scale 0 (1e-10f, as a double)
#: the columns, in the array path's order
_NAMES = ("integer_adm2", "integer_aim", "integer_adm3", *(f"integer_adm_scale{s}" for s in range(4)))
_DEBUG_NAMES = _NAMES + ("integer_adm", "integer_adm_num", "integer_adm_den",
                         *(f"integer_adm_{k}_scale{s}" for s in range(4) for k in ("num", "den")))


class Tables:
    """Per (constants, options, code path): one frame's element-wise constants, in the order the
    kept elements are computed (kinds num, den and, unless skipped, aim; the scales scored;
    the three bands).

    ``picks``: per kept element, (index into the frame's 36 doubles followed by its 36 floats,
    divisor, factor): the term before its cube root is ``(value / divisor) * factor``, rounded
    to float.  That is each C expression of ``_num_terms`` / ``_den_terms``:

    * scale 0 numerator band: int64 -> double / the band's double divisor, stored to float (the
      AVX-512 ``h`` band: int64 -> float first, then the same division);
    * scales 1..3 numerator band: int64 -> float / the scale's float divisor (a float division);
    * denominator band: (int64 -> double / the scale's divisor) * the band's cube, both double;

    the factor of a numerator is 1.0, and ``x * 1.0`` is ``x`` for every double.
    """

    def __init__(self, c, skip0: bool, skip_aim: bool, simd: bool):
        self.skip0, self.skip_aim = skip0, skip_aim
        self.kinds = 2 if skip_aim else 3
        self.scales = range(1, 4) if skip0 else range(4)
        num_div0 = [float(v) for v in c.num_div0]
        num_div123 = [float(v) for v in c.num_div123[:, 0]]
        den_div = [float(v) for v in c.den_div[:, 0]]
        den_cube = c.den_cube.tolist()
        picks, floors = [], []
        for k in range(self.kinds):
            for s in self.scales:
                # the noise floor each root gets: the scale's (num, den); none for aim
                floor = float(c.noise[s]) if k < 2 else 0.0
                for b in range(_BANDS):
                    j = k * _PER_KIND + s * _BANDS + b
                    if k == 1:
                        picks.append((j, den_div[s], den_cube[s][b]))
                    elif s == 0:
                        as_float = simd and b == 0
                        picks.append((j + 36 if as_float else j, num_div0[b], 1.0))
                    else:
                        picks.append((j + 36, num_div123[s - 1], 1.0))
                    floors.append(floor)
        self.picks = tuple(picks)
        self._floors = floors
        self._floors_of: dict[int, np.ndarray] = {}
        #: a skipped scale 0's sums per kind (num 0, den 1e-10f, aim 0), as the array path puts them
        self.skipped = (0.0, _TINY_F32, 0.0)

    def floors_of(self, n: int) -> np.ndarray:
        """float32: each kept element's noise floor, over ``n`` frames (kept per batch size)."""
        got = self._floors_of.get(n)
        if got is None:
            if len(self._floors_of) >= 16:
                self._floors_of.clear()
            got = self._floors_of[n] = np.array(self._floors * n, dtype=np.float32)
        return got


def tables_for(c, options: Mapping[str, Any], code_path: str) -> Tables:
    key = (bool(options["adm_skip_scale0"]), bool(options["adm_skip_aim"]), code_path == "avx512")
    got = c.small.get(key)
    if got is None:
        got = c.small[key] = Tables(c, *key)
    return got


def columns(t: Tables, width: int, height: int, sums: np.ndarray, options: Mapping[str, Any]
            ) -> dict[str, np.ndarray] | None:
    """``_columns``' result for int64[N, 36] ``sums`` (per frame num, den, aim, each [scale][band]),
    or None where a scale's denominator sum is 0.0 (the array path's inf / nan then)."""
    n = sums.shape[0]
    as_f64 = sums.astype(np.float64).tolist()
    as_f32 = sums.astype(np.float32).tolist()
    picks = t.picks
    terms: list[float] = []
    for f64, f32 in zip(as_f64, as_f32):
        v = f64 + f32
        terms += [(v[j] / d) * m for j, d, m in picks]
    # every term rounded to float, then its cube root (powf: numpy's float32 scalar power)
    y = ONE_THIRD_F
    with np.errstate(all="ignore"):  # C's powf is silent (nan for a negative term)
        roots = np.array([x ** y for x in np.array(terms, dtype=np.float32)], dtype=np.float32)
    # root + noise floor, then per scale (h + v) + d: float operations on float32 arrays
    r = roots + t.floors_of(n)
    scale_sums = ((r[0::3] + r[1::3]) + r[2::3]).tolist()

    limit = 1e-10 * (width * height) / (1920.0 * 1080.0)
    w = float(options["adm_dlm_weight"])
    min_val = float(options["adm_min_val"])
    debug = bool(options.get("debug"))
    per_kind = len(t.scales)
    out: list[list[float]] = [[] for _ in range(7 + (11 if debug else 0))]
    pos = 0
    try:
        for _ in range(n):
            kinds = []
            for k in range(t.kinds):
                sc = scale_sums[pos:pos + per_kind]
                pos += per_kind
                kinds.append([t.skipped[k], *sc] if t.skip0 else sc)
            num_s, den_s = kinds[0], kinds[1]
            # in double, scale by scale from 0.0, as C adds them
            tot_num = (((0.0 + num_s[0]) + num_s[1]) + num_s[2]) + num_s[3]
            tot_den = (((0.0 + den_s[0]) + den_s[1]) + den_s[2]) + den_s[3]
            if t.skip_aim:
                tot_aim = 0.0
            else:
                aim_s = kinds[2]
                tot_aim = (((0.0 + aim_s[0]) + aim_s[1]) + aim_s[2]) + aim_s[3]
            if tot_num < limit:
                tot_num = 0.0
            if tot_den < limit:
                tot_den = 0.0
            if tot_den == 0.0:
                score, score_aim = 1.0, 0.0  # libvmaf leaves AIM uninitialised; 0 is our choice
            else:
                score, score_aim = tot_num / tot_den, tot_aim / tot_den
            per_scale = [a / b for a, b in zip(num_s, den_s)]
            adm3 = score * w + (1 - score_aim) * (1 - w)
            if not adm3 > min_val:
                adm3 = min_val
            row = [score, score_aim, adm3, *per_scale]
            if debug:
                row += [score, tot_num, tot_den]
                for s in range(4):
                    row += [num_s[s], den_s[s]]
            for col, x in zip(out, row):
                col.append(x)
    except ZeroDivisionError:
        return None
    return dict(zip(_DEBUG_NAMES if debug else _NAMES, np.array(out, dtype=np.float64)))
