"""Model prediction in pipeline order: normalise -> (chroma-from-luma correction) -> SVM -> denormalise
-> transform -> clip.

Pure functions over arrays of frames (``features[i, k]`` is frame *i*'s value
of the model's *k*-th feature), so scores for many frames are predicted in
one call and nothing here needs a device.
"""

from __future__ import annotations

import math

import numpy as np

from .loader import Model, ModelSet, Transform

__all__ = ["predict", "predict_set", "normalise", "correct_chroma_from_luma", "correction_inputs", "apply_transform",
           "apply_clip"]


def normalise(model: Model, features: np.ndarray) -> np.ndarray:
    x = np.array(features, dtype=np.float64, copy=True)
    if model.norm_type == "linear_rescale" and model.features:
        # every feature at once: slope * x + intercept per element, as feature by feature
        k = len(model.features)
        x[:, :k] = model.rescale_slopes * x[:, :k] + model.rescale_intercepts
    return x


def correct_chroma_from_luma(model: Model, x: np.ndarray) -> np.ndarray:
    """libvmaf's ``post_process_feature_from_another`` (predict.c), the v1.0.16 models' step
    between normalisation and the SVM, on normalised rows ``x`` (changed in place).

    Where a frame's ``speed_chroma`` input, denormalised, is exactly 0 (both
    chroma planes flat: no chroma information), it is replaced by
    ``c - c * adm3`` (``c`` the model's ``chroma_correction_parameter``, adm3
    denormalised), normalised again.  The inputs are found as libvmaf finds
    them, by the substrings ``adm3`` and ``speed_chroma`` of the model's
    feature names; each must name one input (:func:`correction_inputs`).
    """
    c = model.chroma_correction
    if c is None:
        return x
    guiding, guided = correction_inputs(model)
    g, t = model.features[guiding], model.features[guided]
    rescale = model.norm_type == "linear_rescale"
    for row in x:
        guided_score = (row[guided] - t.intercept) / t.slope if rescale else row[guided]
        if guided_score != 0.0:
            continue
        guiding_score = (row[guiding] - g.intercept) / g.slope if rescale else row[guiding]
        corrected = (-c * guiding_score) + c
        row[guided] = t.slope * corrected + t.intercept if rescale else corrected
    return x


def correction_inputs(model: Model) -> tuple[int, int]:
    """The indices of the inputs named by ``adm3`` (guiding) and ``speed_chroma`` (guided);
    ``ValueError`` unless each substring names exactly one (libvmaf fails the prediction then)."""
    found = []
    for sub in ("adm3", "speed_chroma"):
        hits = [i for i, f in enumerate(model.features) if sub in f.name]
        if len(hits) != 1:
            raise ValueError(f"chroma-from-luma correction needs exactly one input named *{sub}*, "
                             f"model {model.name} has {len(hits)}")
        found.append(hits[0])
    return found[0], found[1]


def _denormalise(model: Model, y: np.ndarray) -> np.ndarray:
    if model.norm_type == "linear_rescale":
        return (y - model.intercept) / model.slope
    return y


def _piecewise_linear(x: float, knots: tuple[tuple[float, float], ...]) -> float:
    # libvmaf's piecewise_linear_mapping: later segments overwrite earlier ones
    # where ranges touch; the first/last segment extrapolates outside the knots.
    y = 0.0
    n_seg = len(knots) - 1
    for i in range(n_seg):
        (x0, y0), (x1, y1) = knots[i], knots[i + 1]
        inside = x0 <= x <= x1
        if y0 == y1:
            if inside or (i == 0 and x < x0) or (i == n_seg - 1 and x > x1):
                y = y0
        else:
            if x0 == 0:
                beta = y0
                alpha = (y1 - beta) / x1
            else:
                alpha = (y1 - y0) / (x1 - x0)
                beta = y0 - x0 * alpha
            if inside or (i == 0 and x < x0) or (i == n_seg - 1 and x > x1):
                y = alpha * x + beta
    return y


def apply_transform(t: Transform, y: np.ndarray) -> np.ndarray:
    if not t.enabled:
        return y
    y_in = np.asarray(y, dtype=np.float64)
    if t.p0 is not None or t.p1 is not None or t.p2 is not None:
        out = np.zeros_like(y_in)
        if t.p0 is not None:
            out = out + t.p0
        if t.p1 is not None:
            out = out + t.p1 * y_in
        if t.p2 is not None:
            out = out + t.p2 * y_in * y_in
    else:
        out = y_in.copy()
    if t.knots:
        out = np.array([_piecewise_linear(float(v), t.knots) for v in out])
    if t.out_lte_in:
        out = np.where(out > y_in, y_in, out)
    if t.out_gte_in:
        out = np.where(out < y_in, y_in, out)
    return out


def apply_clip(model: Model, y: np.ndarray) -> np.ndarray:
    if model.clip is None:
        return y
    lo, hi = model.clip
    if y.ndim == 1 and len(y) <= 4:  # a few frames: the same two selects on Python floats
        out = []
        for v in y.tolist():
            v = lo if v < lo else v
            out.append(hi if v > hi else v)
        return np.array(out, dtype=np.float64)
    y = np.where(y < lo, lo, y)
    return np.where(y > hi, hi, y)


def predict(model: Model, features: np.ndarray, *, transform: bool = True, clip: bool = True) -> np.ndarray:
    """Scores for each row of ``features`` (raw, un-normalised metric values)."""
    x = correct_chroma_from_luma(model, normalise(model, features))
    y = _denormalise(model, model.svm.predict(x))
    if transform:
        y = apply_transform(model.transform, y)
    if clip:
        y = apply_clip(model, y)
    return y


def predict_set(ms: ModelSet, features: np.ndarray) -> dict[str, np.ndarray]:
    """Every output of a model set for each frame: ``name`` and, for a bootstrap
    set, each member's score, ``name_bagging``, ``name_stddev``,
    ``name_ci_p95_lo`` and ``name_ci_p95_hi``.

    The bootstrap statistics use the members' untransformed, unclipped
    predictions; transform and clip are applied afterwards, and the standard
    deviation is scaled by the transform's slope around the mean (a central
    difference with delta 0.01), as libvmaf does.
    """
    out = {ms.name: predict(ms.primary, features)}
    if not ms.bootstrap:
        return out
    raw = []
    for m in ms.members:
        out[m.name] = predict(m, features)
        raw.append(predict(m, features, transform=False, clip=False))
    raw_arr = np.stack(raw, axis=1)  # frames x members
    first = ms.members[0]
    n = raw_arr.shape[1]
    bag, sd, lo, hi = [], [], [], []
    for row in raw_arr:
        total = 0.0
        for v in row:
            total += float(v)
        mean = total / n
        ssd = 0.0
        for v in row:
            ssd += math.pow(float(v) - mean, 2)
        stddev = math.sqrt(ssd / n)
        srt = sorted(float(v) for v in row)
        bag.append(mean)
        sd.append(stddev)
        lo.append(_percentile(srt, 2.5))
        hi.append(_percentile(srt, 97.5))
    delta = 0.01

    def tc(v):
        return apply_clip(first, apply_transform(first.transform, np.asarray(v, dtype=np.float64)))

    mean_arr = np.array(bag)
    slope = (tc(mean_arr + delta) - tc(mean_arr - delta)) / (2.0 * delta)
    out[f"{ms.name}_bagging"] = tc(mean_arr)
    out[f"{ms.name}_stddev"] = np.array(sd) * slope
    out[f"{ms.name}_ci_p95_lo"] = tc(lo)
    out[f"{ms.name}_ci_p95_hi"] = tc(hi)
    return out


def _percentile(sorted_scores: list[float], perc: float) -> float:
    p = perc * (len(sorted_scores) - 1) / 100.0
    lo, hi = math.floor(p), math.ceil(p)
    if lo == hi:
        return sorted_scores[lo]
    return sorted_scores[lo] * (hi - p) + sorted_scores[hi] * (p - lo)
