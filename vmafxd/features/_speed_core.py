"""libvmaf's SpEED (``speed.c``), shared by ``speed_chroma`` and ``speed_temporal``, op for op.

SpEED compares the entropy of reference and distorted pictures (of a chroma
plane, or of the difference of two consecutive luma planes) at one coarse
scale.  For each float picture (``sample / scaler - 128``):

1. optionally resize it (``speed_prescale``; nearest or bilinear here),
2. blur it with an anti-aliasing Gaussian and keep every 16th sample in each
   direction, then subtract its local mean (a 3-tap Gaussian at that scale),
3. :func:`est_params`: the 25 x 25 covariance matrix ``K`` of the 5 x 5
   neighbourhoods (libvmaf's own sums), its eigenvalues, and for each 5 x 5
   block the variance ``y' K^-1 y / 25`` (:mod:`._speed_linalg`); each
   block's entropy is ``sum_k log2(L_k S + sigma_nn) + log2(2 pi e)``,
4. :func:`speed_score`: the mean over blocks of
   ``|H_ref log2(1 + var) - H_dis log2(1 + var')|``, blocks whose two
   entropies are both below the noise's being skipped.

Every value is a C ``float`` unless libvmaf writes ``double``; the order of
every sum follows libvmaf.  Two sums are special:

* the covariance sums (``compute_cov_kernel``) are in ``double`` and libvmaf
  picks the code at run time; on an x86 machine with AVX-512 (as the
  reference was made) it is ``compute_cov_kernel_avx512``: two 8-lane
  accumulators updated with fused multiply-adds, reduced in a fixed tree,
  plus a scalar tail.  :func:`covariance_sums` reproduces exactly that, with
  an exact emulation of the fused multiply-add (:func:`fma`), so the values
  are libvmaf's on such a machine.  (libvmaf's AVX2 and plain C kernels add
  in other orders, and can differ in the last bit of a covariance.)
* ``log2`` is glibc's (``math.log2``), as libvmaf's C calls it; numpy's
  vectorised ``log2`` is not guaranteed to round the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ._float_common import filter_stack
from ._float_vif_core import filter_size, gaussian_filter, gaussian_kernel, valid_kernelscale
from ._speed_linalg import EIGENVALUE_EPS
from ._speed_linalg_batched import eigenvalues_of, solve_linear_system_batch
from .declaration import Option, OptionError

__all__ = ["SpeedGeometry", "geometry", "downscale", "est_params", "speed_score", "extract_scores",
           "covariance_sums", "fma", "PRESCALE_METHODS", "c_log2", "common_options", "check_common",
           "almost_one", "finish_scores", "covariance_from_sums", "resize_tables", "filter_taps",
           "PAIRS", "NUM_SCALES", "BLOCK", "picture_sums"]

F32 = np.float32
_ZERO = F32(0.0)
_ONE = F32(1.0)

NUM_SCALES = 4
BLOCK = 5
#: log2(2 * M_PI * M_E): a constant expression, folded by the compiler
_LOG2_2PIE = math.log2(2 * math.pi * math.e)
#: the scaling methods vmafxd reproduces (libvmaf also has bicubic and lanczos4)
PRESCALE_METHODS = ("nearest", "bilinear")


def c_log2(x: float) -> float:
    """C's ``log2`` of a double: glibc's, with -inf at 0 and NaN below, as C returns them."""
    if x > 0:
        return math.log2(x)
    return -math.inf if x == 0 else math.nan


@dataclass(frozen=True)
class SpeedGeometry:
    """``speed_init_dimensions`` for one plane size and prescale."""

    width: int
    height: int
    scaled_width: int
    scaled_height: int
    #: the picture after the anti-aliased decimation by 16
    operating_width: int
    operating_height: int
    blocks_horizontal: int
    blocks_vertical: int

    @property
    def blocks(self) -> int:
        return self.blocks_horizontal * self.blocks_vertical

    @property
    def truncated(self) -> tuple[int, int]:
        return self.blocks_vertical * BLOCK, self.blocks_horizontal * BLOCK


def almost_one(prescale: float) -> bool:
    """speed.c's ``ALMOST_EQUAL(prescale, 1.0)``: no resizing at all."""
    return abs(prescale - 1.0) < 1.0e-3


def geometry(width: int, height: int, prescale: float) -> SpeedGeometry:
    """The sizes SpEED works at; ``ValueError`` where libvmaf refuses the plane as too small, or
    where its buffers would not hold the picture."""
    sw = int(width * prescale + 0.5)
    sh = int(height * prescale + 0.5)
    if almost_one(prescale) and (sw, sh) != (width, height):
        # libvmaf skips the resize yet works at the rounded size, reading samples it never wrote
        raise ValueError(f"speed_prescale {prescale!r} is within 1e-3 of 1 but changes the size "
                         f"{width}x{height} to {sw}x{sh}")
    ow, oh = sw >> NUM_SCALES, sh >> NUM_SCALES
    g = SpeedGeometry(width, height, sw, sh, ow, oh, ow // BLOCK, oh // BLOCK)
    if g.blocks == 0:
        raise ValueError(f"SpEED: a {width}x{height} plane is too small (at prescale {prescale!r} it is "
                         f"{ow}x{oh} after the decimation by 16, less than one 5x5 block)")
    return g


def _mirror(i: float, right: float) -> float:
    """vif_tools.c's ``mirror(i, 0, right)`` (floats)."""
    return -i if i < 0 else (2 * right - i if i > right else i)


@functools.lru_cache(maxsize=16)
def _bilinear_axis(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``vif_scale_frame_bilinear_precompute_columns_s``: the two source indices and the float weight
    of each output position (the rows use the same arithmetic)."""
    ratio = float(F32(src) / F32(dst))
    i1, i2, frac = [], [], []
    for x in range(dst):
        xx = F32((x + 0.5) * ratio - 0.5)  # a double expression assigned to a float
        a = int(F32(_mirror(float(math.floor(xx)), src - 1)))
        b = int(F32(_mirror(float(math.ceil(xx)), src - 1)))
        i1.append(a)
        i2.append(b)
        frac.append(xx - F32(a))
    return np.array(i1), np.array(i2), np.array(frac, np.float32)


def _bilinear(plane: np.ndarray, sw: int, sh: int) -> np.ndarray:
    """``vif_scale_frame_bilinear_apply_s``: four weighted samples, each weight a float product,
    added left to right."""
    h, w = plane.shape
    if (sw, sh) == (w, h):
        return plane
    x1, x2, dx = _bilinear_axis(w, sw)
    y1, y2, dy = _bilinear_axis(h, sh)
    dx = dx[None, :]
    dy = dy[:, None]
    ody = _ONE - dy
    odx = _ONE - dx
    r1, r2 = plane[y1], plane[y2]
    out = (ody * odx) * r1[:, x1]
    out += (ody * dx) * r1[:, x2]
    out += (dy * odx) * r2[:, x1]
    out += (dy * dx) * r2[:, x2]
    return out


def _nearest_axis(src: int, dst: int) -> np.ndarray:
    """``vif_scale_frame_nearest_s``'s source index of each output position (a float product, truncated)."""
    return (np.arange(dst, dtype=np.float32) * (F32(src) / F32(dst))).astype(np.int64)


def _nearest(plane: np.ndarray, sw: int, sh: int) -> np.ndarray:
    """``vif_scale_frame_nearest_s``."""
    h, w = plane.shape
    if (sw, sh) == (w, h):
        return plane
    return plane[_nearest_axis(h, sh)][:, _nearest_axis(w, sw)]


@functools.lru_cache(maxsize=16)
def _taps(kernelscale: float) -> tuple[np.ndarray, np.ndarray]:
    """The anti-aliasing filter (``speed_get_antialias_filter``: scale 1's width, sigma
    ``sqrt(16 scales) * width / 5``) and the local-mean filter of scale 4 (``vif_get_filter``)."""
    size = filter_size(1, kernelscale)
    antialias = gaussian_kernel(size, F32(math.sqrt(NUM_SCALES) * size / 5.0))
    return antialias, gaussian_filter(NUM_SCALES, kernelscale)


def downscale(plane: np.ndarray, g: SpeedGeometry, options: Mapping[str, Any]) -> np.ndarray:
    """``filter_and_downscale``: the float picture at the operating size, its local mean subtracted."""
    if not almost_one(float(options["speed_prescale"])):
        resize = _bilinear if options["speed_prescale_method"] == "bilinear" else _nearest
        plane = resize(plane, g.scaled_width, g.scaled_height)
    antialias, local = _taps(float(options["speed_kernelscale"]))
    blurred = filter_stack(np.ascontiguousarray(plane, np.float32)[None], antialias)[0]
    small = np.ascontiguousarray(blurred[:g.operating_height * 16:16, :g.operating_width * 16:16])
    mean = filter_stack(small[None], local)[0]
    return small - mean


# --- the covariance sums, as compute_cov_kernel_avx512 adds them -----------------------------------

_SPLIT = 134217729.0  # 2^27 + 1, Veltkamp's splitter for doubles


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's exact product: ``p + e == a * b`` (no overflow here: |values| < 2^996)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's exact sum: ``s + e == a + b``."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once (float64), as ``vfmadd231pd`` computes it.

    Boldo and Melquiond's emulation ("Emulation of a FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE TC 2008): the exact
    product ``uh + ul`` (:func:`_two_prod`), then :func:`_add_exact_product`.
    """
    return _add_exact_product(*_two_prod(a, b), c)


def _add_exact_product(uh: np.ndarray, ul: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``RN(uh + ul + c)`` for an exact product ``uh + ul``: the exact sum ``th + tl = c + uh``,
    ``v = tl + ul`` rounded to odd, then ``th + v`` rounded to nearest.  Rounding to odd is the
    nearest rounding moved to its odd neighbour when it was inexact and landed on an even
    significand."""
    th, tl = _two_sum(c, uh)
    v, err = _two_sum(tl, ul)
    fix = (err != 0) & ((v.view(np.int64) & 1) == 0)
    if fix.any():
        v = np.where(fix, np.nextafter(v, np.where(err > 0, np.inf, -np.inf)), v)
    return th + v


def covariance_sums(values: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """``compute_cov_kernel_avx512`` for many pairs at once: ``sum (x - mx)(y - my)`` in double.

    ``values`` is a ``(planes, rows, cols)`` float64 array of centred values
    (``(double)x - mean``, as libvmaf subtracts them); pair *k* sums the
    products of ``values[px[k]]`` and ``values[py[k]]``.  Per row: blocks of
    16 go 8 to ``acc0`` and 8 to ``acc1`` (one fused multiply-add per lane),
    one block of 8 more to ``acc0``, the rest to a scalar ``double`` (product
    rounded, then added: ``-std=c11`` allows no contraction).  Then
    ``acc0 + acc1``, ``_mm512_reduce_add_pd`` (upper half + lower half, again,
    then the two lanes) and the scalar tail.

    ``acc0`` and ``acc1`` sit side by side as one 16-lane array, so a block
    of 16 is one step (a few numpy calls on small arrays that stay in cache).
    """
    _, rows, cols = values.shape
    pairs = len(px)
    n16 = cols // 16
    has8 = cols - 16 * n16 >= 8
    tail0 = 16 * n16 + (8 if has8 else 0)
    acc = np.zeros((pairs, 16))
    for i in range(rows):
        row = values[:, i]
        for blk in range(n16):
            cols16 = row[:, 16 * blk:16 * blk + 16]
            acc = fma(cols16[px], cols16[py], acc)
        if has8:
            cols8 = row[:, tail0 - 8:tail0]
            acc[:, :8] = fma(cols8[px], cols8[py], acc[:, :8])
    acc = acc[:, :8] + acc[:, 8:]
    half = acc[:, 4:] + acc[:, :4]
    quarter = half[:, 2:] + half[:, :2]
    total = quarter[:, 0] + quarter[:, 1]
    if tail0 < cols:
        rest = values[:, :, tail0:]
        prods = (rest[px] * rest[py]).reshape(pairs, -1)
        total = total + np.add.accumulate(prods, axis=1)[:, -1]
    return total


#: (x_index, y_index) of every covariance libvmaf computes (y <= x), and their block offsets
_PAIRS = [(x, y) for x in range(BLOCK * BLOCK) for y in range(x + 1)]
_PX = np.array([p[0] for p in _PAIRS])
_PY = np.array([p[1] for p in _PAIRS])


def covariance_matrices(pictures: list[np.ndarray], g: SpeedGeometry) -> list[np.ndarray]:
    """``compute_covariance_matrix`` of each picture: the 25 x 25 float covariance of the 5 x 5
    neighbourhoods (the pictures' sums are formed together; each is libvmaf's own)."""
    return covariance_from_sums(picture_sums(pictures, g), g)


def picture_sums(pictures: list[np.ndarray], g: SpeedGeometry) -> np.ndarray:
    """``(pictures, PAIRS)``: each picture's covariance sums in double, before the division."""
    th, tw = g.truncated
    sh, sw = th - BLOCK + 1, tw - BLOCK + 1
    n = BLOCK * BLOCK
    centred = []
    for data in pictures:
        subs = np.stack([data[r:r + sh, c:c + sw] for r in range(BLOCK) for c in range(BLOCK)])
        # compute_mean: one float accumulator over the submatrix, row by row, then / (float)N
        means = np.add.accumulate(subs.reshape(n, -1), axis=1, dtype=np.float32)[:, -1] / F32(sw * sh)
        centred.append(subs.astype(np.float64) - means.astype(np.float64)[:, None, None])
    shift = np.repeat(np.arange(len(pictures)) * n, len(_PX))
    sums = covariance_sums(np.concatenate(centred), np.tile(_PX, len(pictures)) + shift,
                           np.tile(_PY, len(pictures)) + shift)
    return sums.reshape(len(pictures), len(_PX))


#: the covariances of one picture, in the order libvmaf computes them (x_index, then y_index <= x_index)
PAIRS = len(_PX)


def covariance_from_sums(sums: np.ndarray, g: SpeedGeometry) -> list[np.ndarray]:
    """Each picture's 25 x 25 float matrix from its ``(PAIRS,)`` double sums (``result / N`` in
    double, stored as a float): shared with the GPU twin, whose kernels form the sums."""
    th, tw = g.truncated
    count = float((th - BLOCK + 1) * (tw - BLOCK + 1))
    n = BLOCK * BLOCK
    out = []
    for row in np.asarray(sums, np.float64):
        cov = (row / count).astype(np.float32)
        mat = np.empty((n, n), np.float32)
        mat[_PX, _PY] = cov
        mat[_PY, _PX] = cov
        out.append(mat)
    return out


@dataclass(frozen=True)
class SpeedParams:
    """``est_params``'s outputs for one picture: per-block entropies and variances, and whether
    libvmaf found the covariance matrix singular."""

    entropies: np.ndarray
    variances: np.ndarray
    singular: bool


def est_params(data: np.ndarray, cov: np.ndarray, g: SpeedGeometry, sigma_nn: np.float32) -> SpeedParams:
    """``est_params`` of one picture at the operating size, given its covariance matrix."""
    return est_params_many([data], [cov], g, sigma_nn)[0]


def est_params_many(pictures: list[np.ndarray], covs: list[np.ndarray], g: SpeedGeometry,
                    sigma_nn: np.float32) -> list[SpeedParams]:
    """``est_params`` of each picture, the pictures' steps stacked (:mod:`._speed_linalg_batched`:
    every value is the one-picture routine's, bit for bit)."""
    count = len(pictures)
    if count == 0:
        return []
    stack = np.stack([np.asarray(c, np.float32) for c in covs])
    eig = eigenvalues_of(stack)
    th, tw = g.truncated
    # compute_independent_term: row (si*5 + sj), column (block row * blocks across + block column)
    term = np.stack([d[:th, :tw] for d in pictures]).reshape(
        count, g.blocks_vertical, BLOCK, g.blocks_horizontal, BLOCK).transpose(0, 2, 4, 1, 3).reshape(
        count, BLOCK * BLOCK, g.blocks)
    regular = (eig.astype(np.float64) >= EIGENVALUE_EPS).all(axis=1)
    sol = np.zeros_like(term)
    singular = ~regular
    if regular.any():
        x, ok = solve_linear_system_batch(stack[regular], term[regular])
        sol[regular] = np.where(ok[:, None, None], x, _ZERO)
        singular[regular] = ~ok
    z = (sol * term) / F32(BLOCK * BLOCK)
    s = np.add.accumulate(z, axis=1, dtype=np.float32)[:, -1]  # sum_columns: rows added top to bottom
    lam = np.where(eig < 0, _ZERO, eig)
    logs = _log2_each(lam[:, :, None] * s[:, None, :] + F32(sigma_nn)) + _LOG2_2PIE
    entropy = np.zeros((count, g.blocks), np.float32)
    for k in range(BLOCK * BLOCK):  # the eigenvalues in libvmaf's order, each term added in double
        entropy = (entropy.astype(np.float64) + logs[:, k]).astype(np.float32)
    return [SpeedParams(entropy[i], s[i], bool(singular[i])) for i in range(count)]


def _log2_each(args: np.ndarray) -> np.ndarray:
    """``c_log2`` of each element (glibc's log2, not numpy's), in args' shape, as float64."""
    values = np.asarray(args)
    flat = values.ravel().tolist()
    # the common case: math.log2 itself, without c_log2's tests, straight into the array
    each = map(math.log2 if np.all(values > 0) else c_log2, flat)
    return np.fromiter(each, np.float64, count=len(flat)).reshape(values.shape)


def speed_score(ref: SpeedParams, dis: SpeedParams, sigma_nn: np.float32, nn_floor: np.float32,
                mode: int) -> np.float32:
    """``get_speed_score`` (float sum over blocks, in block order, then / blocks)."""
    base = F32(BLOCK * BLOCK * (c_log2(float((_ONE + nn_floor) * sigma_nn)) + _LOG2_2PIE))
    rv, dv = ref.variances, dis.variances
    # the weights' arguments: "1 + float" is a float, "1 + double" a double
    f_ref = _log2_each(_ONE + rv)                       # log2(1 + ref variance)
    f_dis = _log2_each(_ONE + dv)                       # log2(1 + dis variance)
    r64, d64 = rv.astype(np.float64), dv.astype(np.float64)
    if mode == 0:
        w_ref, w_dis = f_ref, f_dis
    elif mode == 1:
        w_ref, w_dis = f_ref, f_ref
    elif mode == 2:
        w_ref, w_dis = f_dis, f_dis
    elif mode == 3:
        w_ref = w_dis = _log2_each(1.0 + (rv + dv).astype(np.float64) / 2.0)
    elif mode == 4:
        w_ref, w_dis = f_ref, _log2_each(1.0 + (rv + dv).astype(np.float64) / 2.0)
    elif mode == 5:
        w_ref, w_dis = f_ref, _log2_each(1.0 + (0.75 * r64 + 0.25 * d64))
    else:  # 6
        w_ref, w_dis = f_ref, _log2_each(1.0 + (0.25 * r64 + 0.75 * d64))
    spatial_ref = (ref.entropies.astype(np.float64) * w_ref).astype(np.float32)
    spatial_dis = (dis.entropies.astype(np.float64) * w_dis).astype(np.float32)
    contrib = np.abs(spatial_ref - spatial_dis)
    contrib[(ref.entropies < base) & (dis.entropies < base)] = _ZERO
    total = np.add.accumulate(contrib, dtype=np.float32)[-1]
    return total / F32(ref.entropies.size)


def extract_scores(pairs: list[tuple[np.ndarray, np.ndarray]], g: SpeedGeometry, options: Mapping[str, Any],
                   mode: int = 0) -> list[tuple[np.float32, bool]]:
    """``speed_extract_score`` of each (reference, distorted) pair of float pictures: (score, whether
    either picture's matrix was singular).  The pairs are independent; their covariance sums are
    formed together (fewer, larger numpy steps)."""
    # degenerate pictures make NaNs and infinities as they do in C, silently
    with np.errstate(all="ignore"):
        small = [downscale(p, g, options) for pair in pairs for p in pair]
        return finish_scores(small, covariance_matrices(small, g), g, options, mode)


def finish_scores(pictures: list[np.ndarray], covs: list[np.ndarray], g: SpeedGeometry,
                  options: Mapping[str, Any], mode: int = 0) -> list[tuple[np.float32, bool]]:
    """From the pictures at the operating size (reference, distorted, reference, ...; at least
    their truncated top-left ``g.truncated``) and their covariance matrices: each pair's
    ``speed_extract_score`` (score, singular).  Shared by both lanes."""
    snn = F32(options["speed_sigma_nn"])
    out = []
    with np.errstate(all="ignore"):
        params = est_params_many(pictures, covs, g, snn)
        for k in range(len(pictures) // 2):
            rp, dp = params[2 * k], params[2 * k + 1]
            if rp.singular != dp.singular:
                # one side numerically unstable (very rare): libvmaf scores 0 rather than an inflated value
                out.append((_ZERO, True))
                continue
            score = speed_score(rp, dp, snn, F32(options["speed_nn_floor"]), mode)
            out.append((score, rp.singular or dp.singular))
    return out


def resize_tables(g: SpeedGeometry, options: Mapping[str, Any]) -> tuple[int, tuple[np.ndarray, ...]]:
    """How the GPU twin reads the resized picture: (0, ()) for none; (1, (ys, ys, 0, xs, xs, 0)) for
    nearest; (2, (y1, y2, dy, x1, x2, dx)) for bilinear, the CPU twin's own index tables."""
    if almost_one(float(options["speed_prescale"])) or (g.scaled_width, g.scaled_height) == (g.width, g.height):
        return 0, ()
    if options["speed_prescale_method"] == "bilinear":
        y1, y2, dy = _bilinear_axis(g.height, g.scaled_height)
        x1, x2, dx = _bilinear_axis(g.width, g.scaled_width)
        return 2, (y1, y2, dy, x1, x2, dx)
    ys, xs = _nearest_axis(g.height, g.scaled_height), _nearest_axis(g.width, g.scaled_width)
    return 1, (ys, ys, np.zeros(len(ys), np.float32), xs, xs, np.zeros(len(xs), np.float32))


def filter_taps(options: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(anti-aliasing taps, local-mean taps) for the options' kernel scale."""
    return _taps(float(options["speed_kernelscale"]))


# --- the options both extractors declare (speed.c's two option tables share these) ---------------

def common_options() -> tuple[Option, ...]:
    """The options of ``options_chroma`` and ``options`` in speed.c with the same name, default,
    bounds and alias (all of them feature parameters, so a non-default value renames the outputs)."""
    return (
        Option("speed_kernelscale", float, 1.0,
               "scaling factor for the gaussian kernel (2.0 means multiplying the standard deviation by 2 "
               "and enlarge the kernel size accordingly", alias="ks", min=0.1, max=4.0, feature_param=True),
        Option("speed_prescale", float, 1.0,
               "scaling factor for the frame (2.0 means making the image twice as large on each dimension)",
               alias="ps", min=0.1, max=4.0, feature_param=True),
        Option("speed_prescale_method", str, "nearest",
               "scaling method for the frame (libvmaf: nearest, bilinear, bicubic, lanczos4; "
               "vmafxd: nearest, bilinear)", alias="psm", feature_param=True),
        Option("speed_sigma_nn", float, 0.29, "standard deviation of neural noise", alias="snn",
               min=0.1, max=2.0, feature_param=True),
        Option("speed_nn_floor", float, 0.0, "neural noise floor, expressed in percentage of sigma_nn",
               alias="nnf", min=0.0, max=1.0, feature_param=True),
        Option("speed_max_val", float, 1000.0, "maximum value allowed; larger values will be clipped to this value",
               alias="mxv", min=0.0, max=1000.0, feature_param=True),
    )


def check_common(feature: str, values: Mapping[str, Any]) -> None:
    """What libvmaf's ``speed_init`` refuses (a kernel scale not in its list, an unknown method),
    and the two methods vmafxd does not reproduce."""
    if not valid_kernelscale(values["speed_kernelscale"]):
        raise OptionError(f"{feature}.speed_kernelscale",
                          f"{values['speed_kernelscale']!r} is not one of libvmaf's kernel scales")
    method = values["speed_prescale_method"]
    if method not in PRESCALE_METHODS:
        if method in ("bicubic", "lanczos4"):
            raise OptionError(f"{feature}.speed_prescale_method", f"{method!r} is not supported by vmafxd "
                              "(nearest and bilinear are)")
        raise OptionError(f"{feature}.speed_prescale_method",
                          f"{method!r}: expected nearest, bilinear, bicubic or lanczos4")
