"""Integer motion (libvmaf's ``motion`` extractor, as rewritten in libvmaf 3.2).

What libvmaf 3.2 measures
-------------------------
For frame *i* (i >= 1) it takes the luma of the *reference* frames *i - 1* and
*i*, blurs their **difference** with a separable 5-tap integer filter and sums
the absolute values of the result (a SAD).  Older releases blurred each frame
and differenced the blurred frames; because the vertical pass rounds, the two
orders do not give the same integers, so the state kept between frames here is
the previous *raw* luma (mirror-padded, widened), not a blurred frame.

The per-frame score is ``SAD / 256 / (w * h) * fps_weight`` clipped to
``motion_max_val``; ``integer_motion2`` and ``integer_motion3`` are made from
the per-frame scores once the following frame is known (see
:class:`MotionTimeline`).

Layers
------
* :class:`SadWorkspace` / :func:`compute_stats`: the per-pixel integer pipeline,
  producing one int64 SAD per frame.  A GPU kernel must produce the same SAD;
  the sum is order-independent, so it may reduce in any order.
* :func:`metrics_from_stats`: the SAD to the per-frame score, in libvmaf's
  double arithmetic.
* :class:`MotionTimeline`: the temporal rules (first frames, neighbour
  minimum, last frame, blend, moving average).  Host code, shared by every lane.
* :class:`IntegerMotion`: the CPU twin, gluing the three together.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Mapping

import numpy as np

from .declaration import FeatureDeclaration, FrameScores, Option, debug_option
from ._c_math import c_min

__all__ = [
    "DECLARATION",
    "columns_from_stats",
    "FILTER",
    "IntegerMotion",
    "MotionTimeline",
    "SadWorkspace",
    "compute_stats",
    "metrics_from_stats",
    "motion_blend",
]

#: the 5-tap blur; the taps sum to 65536 (= 1 << 16)
FILTER = (3571, 16004, 26386, 16004, 3571)
_OUTER, _INNER, _CENTRE = FILTER[0], FILTER[1], FILTER[2]
#: the horizontal pass divides by 65536 (round half up)
_X_SHIFT = 16
#: samples per strip of the SAD pipeline (keeps its temporaries in cache)
_STRIP_SAMPLES = 1 << 15

SAD_NAME = "VMAF_integer_feature_motion_sad_score"


# ---------------------------------------------------------------------------
# (a) per-pixel integer pipeline -> int64 SAD
# ---------------------------------------------------------------------------


class SadWorkspace:
    """Buffers and arithmetic for the blurred-difference SAD of one frame size.

    Frames enter through :meth:`pad`, which widens the luma to the vertical
    accumulator type and mirrors two rows at each end; :meth:`sad` then works
    on two padded frames.  Keeping the padded copy of a frame lets the next
    frame reuse it as its predecessor (one conversion per frame, not two).
    """

    def __init__(self, width: int, height: int, bitdepth: int):
        if width < 3 or height < 3:
            # The mirror of a 5-tap window needs at least 3 samples per axis;
            # libvmaf would read outside the plane below that.
            raise ValueError(f"motion needs a luma plane of at least 3x3, got {width}x{height}")
        self.width = width
        self.height = height
        self.bitdepth = bitdepth
        # Vertical pass: |sum of taps * diff| <= 65536 * (2^bpc - 1) plus the
        # rounding term, which fits int32 up to 15 bits; 16-bit input needs
        # int64 (libvmaf's high-bit-depth path accumulates in int64 too).
        self.acc_dtype = np.dtype(np.int32) if bitdepth <= 15 else np.dtype(np.int64)
        # The vertical pass rounds half up and shifts by the bit depth, so its
        # output has about 16 bits of magnitude whatever the input depth.
        self.y_round = 1 << (bitdepth - 1)
        # Work in horizontal strips: the dozen temporaries of a strip stay in
        # cache, which halves the time at 1080p.  Strips only partition the
        # rows of the output; every strip reads its own 4 extra padded rows.
        self.strip_rows = max(8, min(height, _STRIP_SAMPLES // width))
        rows, w = self.strip_rows, width
        self._diff = np.empty((rows + 4, w), self.acc_dtype)
        self._t1 = np.empty((rows, w), self.acc_dtype)
        self._t2 = np.empty((rows, w), self.acc_dtype)
        # Horizontal pass: 65536 * |blurred diff| reaches 2^32, so int64.
        # The horizontal pass runs on the padded rows laid end to end (see
        # _strip_sad), so its work arrays are flat.
        self._xpad = np.empty((rows, w + 4), np.int64)
        self._x1 = np.empty(rows * (w + 4), np.int64)
        self._x2 = np.empty(rows * (w + 4), np.int64)

    def pad(self, luma: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """A ``(h + 4, w)`` copy of ``luma`` with mirrored rows above and below
        (into ``out`` when given, a buffer from an earlier call that is no longer needed).

        libvmaf mirrors without repeating the edge sample: row -1 reads row 1,
        row -2 reads row 2, row h reads row h - 2, row h + 1 reads row h - 3.
        """
        h = self.height
        if luma.shape != (h, self.width):
            raise ValueError(f"luma is {luma.shape[1]}x{luma.shape[0]}, expected {self.width}x{h}")
        if out is None:
            out = np.empty((h + 4, self.width), self.acc_dtype)
        out[2:h + 2] = luma
        out[0] = out[4]
        out[1] = out[3]
        out[h + 2] = out[h]
        out[h + 3] = out[h - 1]
        return out

    def sad(self, prev_padded: np.ndarray, cur_padded: np.ndarray) -> int:
        """Sum over the frame of |blur(prev - cur)|, exactly as libvmaf's integers."""
        total = 0
        for top in range(0, self.height, self.strip_rows):
            bottom = min(self.height, top + self.strip_rows)
            total += self._strip_sad(prev_padded, cur_padded, top, bottom)
        return total

    def _strip_sad(self, prev_padded: np.ndarray, cur_padded: np.ndarray, top: int, bottom: int) -> int:
        n, w = bottom - top, self.width
        t1, t2 = self._t1[:n], self._t2[:n]

        # Vertical pass on the difference.  Mirroring commutes with the
        # subtraction, so differencing two padded frames gives the padded
        # difference.  Output row r reads padded rows r .. r + 4.  The filter
        # is symmetric: pair the taps before scaling.
        diff = self._diff[:n + 4]
        np.subtract(prev_padded[top:bottom + 4], cur_padded[top:bottom + 4], out=diff)
        _five_taps(diff, n, t1, t2)
        t1 += self.y_round
        # Horizontal pass, with the columns mirrored the same way.  The vertical
        # pass's shift writes straight into the padded int64 rows (one pass, not a
        # shift and a copy; numpy's >> on signed integers is arithmetic (floor),
        # like gcc's, and the int32 result widens exactly).
        xp = self._xpad[:n]
        np.right_shift(t1, self.bitdepth, out=xp[:, 2:w + 2])
        xp[:, 0] = xp[:, 4]
        xp[:, 1] = xp[:, 3]
        xp[:, w + 2] = xp[:, w]
        xp[:, w + 3] = xp[:, w - 1]
        # The padded rows are taken end to end as one flat array: output j reads
        # flat samples j .. j + 4, so contiguous shifted slices do the work
        # (numpy is several times slower on the same slices of 2-D rows).
        # Output r * (w + 4) + c is column c of row r for c < w; the 4
        # outputs after each row's w straddle two rows and are zeroed before
        # the sum.
        flat = xp.reshape(-1)
        size = n * (w + 4)
        m = size - 4
        x1, x2 = self._x1[:m], self._x2[:m]
        _five_taps(flat, m, x1, x2)
        x1 += 1 << (_X_SHIFT - 1)
        x1 >>= _X_SHIFT
        np.abs(x1, out=x1)
        self._x1[:size].reshape(n, w + 4)[:, w:] = 0
        # libvmaf sums each row in a uint32 before adding it to the uint64
        # total; a row overflows only past ~65,000 samples of width, so the
        # plain int64 sum is the same number.
        return int(self._x1[:size].sum())


def _five_taps(src: np.ndarray, n: int, out: np.ndarray, tmp: np.ndarray) -> None:
    """``out[i] = sum_k tap_k * src[i + k]`` for ``i < n`` in integers, the symmetric taps
    paired before scaling; ``tmp`` is scratch of ``out``'s shape (both passes use it)."""
    np.add(src[0:n], src[4:n + 4], out=out)
    out *= _OUTER
    np.add(src[1:n + 1], src[3:n + 3], out=tmp)
    tmp *= _INNER
    out += tmp
    np.multiply(src[2:n + 2], _CENTRE, out=tmp)
    out += tmp


def compute_stats(prev_luma: np.ndarray, cur_luma: np.ndarray, bitdepth: int) -> int:
    """The int64 SAD between two luma planes (the statistic a GPU kernel must match).

    ``prev_luma`` is the earlier reference frame (one back, or two with the
    five-frame window).  Convenience form of :class:`SadWorkspace` for one pair.
    """
    h, w = cur_luma.shape
    ws = SadWorkspace(w, h, bitdepth)
    return ws.sad(ws.pad(prev_luma), ws.pad(cur_luma))


# ---------------------------------------------------------------------------
# (b) libvmaf's double arithmetic
# ---------------------------------------------------------------------------


def metrics_from_stats(
    sad: int, width: int, height: int, *, fps_weight: float = 1.0, max_val: float = 10000.0
) -> float:
    """The per-frame motion score (``VMAF_integer_feature_motion_sad_score``) of one SAD.

    libvmaf divides by 256 first, then by ``w * h`` computed in unsigned int
    (hence the 32-bit wrap), then applies the fps weight and the clip.
    """
    pixels = (width * height) & 0xFFFFFFFF
    score = float(sad) / 256.0 / float(pixels) * fps_weight
    return c_min(score, max_val)


def columns_from_stats(sad: np.ndarray, width: int, height: int, *, fps_weight: float = 1.0,
                       max_val: float = 10000.0) -> np.ndarray:
    """:func:`metrics_from_stats` over an array of SADs: the same double operations in the same
    order, C's ``MIN`` as a select."""
    pixels = (width * height) & 0xFFFFFFFF
    x = sad.astype(np.float64) / 256.0 / float(pixels) * fps_weight
    return np.where(x < max_val, x, max_val)


def motion_blend(score: float, factor: float, offset: float) -> float:
    """libvmaf's blend: keep ``factor`` of the score, and cap the rest at ``offset``."""
    return score * factor + (1.0 - factor) * c_min(offset, score)


# ---------------------------------------------------------------------------
# temporal rules
# ---------------------------------------------------------------------------


class MotionTimeline:
    """Turns per-frame motion scores into every frame's output metrics.

    libvmaf computes ``motion2``/``motion3`` for all frames in its flush; here
    a frame's metrics are released as soon as they cannot change any more:
    once the next frame's score is known and, for the first frames, once the
    score at ``min_idx`` (which sets their ``motion3``) is known.  Everything
    else is released by :meth:`flush`.  Frames must be pushed in order from 0.
    """

    def __init__(self, options: Mapping[str, Any], *, debug: bool = False):
        self.five_frame = bool(options["motion_five_frame_window"])
        #: first frame with a real score (its predecessor frame exists)
        self.min_idx = 2 if self.five_frame else 1
        self.blend_factor = float(options["motion_blend_factor"])
        self.blend_offset = float(options["motion_blend_offset"])
        self.max_val = float(options["motion_max_val"])
        self.moving_average = bool(options["motion_moving_average"])
        self.debug = debug
        self._scores: dict[int, float] = {}
        self._count = 0          # frames pushed
        self._next = 0           # next frame to release
        self._stamp_score: float | None = None  # score of frame min_idx
        self._prev_processed = 0.0

    def push(self, index: int, score: float) -> list[FrameScores]:
        if index != self._count:
            raise ValueError(f"motion expects frame {self._count}, got {index}")
        self._scores[index] = score
        self._count += 1
        if index == self.min_idx:
            self._stamp_score = score
        return self._release(final=False)

    def flush(self) -> list[FrameScores]:
        return self._release(final=True)

    def push_batch(self, first: int, scores: list[float]) -> tuple[int, dict[str, np.ndarray]]:
        """:meth:`push` of frames ``first``, ``first + 1`` ... in order; the frames that makes
        final as columns: (the first of them, base name -> float64 array over them).

        The same values as :meth:`push` frame by frame: every released frame has
        its next frame (only :meth:`flush` releases the last), and what frame *i*
        gets depends on the scores alone, not on when it is released, so the
        frames are released at once after the last push, each C operation of
        :meth:`_frame_metrics` one numpy operation over them (doubles, the same
        order; ``MIN`` as a comparison and a select)."""
        if first != self._count:
            raise ValueError(f"motion expects frame {self._count}, got {first}")
        for k, score in enumerate(scores):
            self._scores[first + k] = score
        if first <= self.min_idx < first + len(scores):
            self._stamp_score = scores[self.min_idx - first]
        self._count += len(scores)
        n, lo = self._count, self._next
        hi = max(lo, n - 1) if n > self.min_idx else lo  # released: [lo, hi)
        if hi == lo:
            return lo, {}
        sc = self._scores
        score = np.array([sc[i] for i in range(lo, hi)])
        # frames before min_idx have no motion of their own (see _frame_metrics)
        pre = max(0, min(hi, self.min_idx) - lo)
        stamp = 0.0 if self._stamp_score is None else self._processed(self._stamp_score)
        rest = range(lo + pre, hi)
        nxt = np.array([sc[i + 1] for i in rest])
        back = 1 if self.five_frame else 0
        valid = np.array([i - back >= self.min_idx for i in rest], dtype=bool)
        low = np.array([sc[i - back] if i - back >= self.min_idx else 0.0 for i in rest])
        motion2 = np.where(valid & (low < nxt), low, nxt)
        off, factor = self.blend_offset, self.blend_factor
        blended = motion2 * factor + (1.0 - factor) * np.where(off < motion2, off, motion2)
        processed = np.where(blended < self.max_val, blended, self.max_val)
        if pre:
            self._prev_processed = stamp
        if self.moving_average and len(processed):
            prev = np.concatenate(([self._prev_processed], processed[:-1]))
            motion3 = (processed + prev) / 2.0
        else:
            motion3 = processed
        if len(processed):
            self._prev_processed = float(processed[-1])
        cols = {SAD_NAME: score,
                "integer_motion2": np.concatenate((np.zeros(pre), motion2)),
                "integer_motion3": np.concatenate((np.full(pre, stamp), motion3))}
        if self.debug:
            cols["integer_motion"] = score
        for i in range(lo, hi):  # keep what later frames still read, as _release does
            sc.pop(i - 2, None)
        self._next = hi
        return lo, cols

    def _processed(self, motion2: float) -> float:
        return c_min(motion_blend(motion2, self.blend_factor, self.blend_offset), self.max_val)

    def _release(self, final: bool) -> list[FrameScores]:
        out: list[FrameScores] = []
        n = self._count
        while self._next < n:
            i = self._next
            has_next = i + 1 < n
            if not final and (not has_next or (i < self.min_idx and n <= self.min_idx)):
                break
            out.append((i, self._frame_metrics(i, has_next)))
            self._next += 1
            # Keep what later frames still read: the five-frame window's
            # motion2 looks one frame back (i - 1) and one forward.
            self._scores.pop(i - 2, None)
        return out

    def _frame_metrics(self, i: int, has_next: bool) -> dict[str, float]:
        score = self._scores[i]
        if i < self.min_idx:
            # The first frames have no motion of their own.  Their motion3 is
            # the processed *raw score* of frame min_idx (not its motion2),
            # or 0 when the run never reached that frame.
            motion2 = 0.0
            stamp = 0.0 if self._stamp_score is None else self._processed(self._stamp_score)
            motion3 = stamp
            self._prev_processed = stamp
        else:
            if not has_next:
                # Last frame: its own score.
                motion2 = score
            else:
                nxt = self._scores[i + 1]
                # The one-frame window compares frame i with i + 1; the
                # five-frame window skips frame i and compares i - 1 with
                # i + 1 (each score already spans two frames), except on the
                # first scored frame whose i - 1 has no score.
                lo_idx = i - 1 if self.five_frame else i
                if lo_idx >= self.min_idx:
                    lo = self._scores[lo_idx]
                    motion2 = lo if lo < nxt else nxt
                else:
                    motion2 = nxt
            processed = self._processed(motion2)
            if self.moving_average:
                motion3 = (processed + self._prev_processed) / 2.0
            else:
                motion3 = processed
            self._prev_processed = processed
        metrics = {SAD_NAME: score, "integer_motion2": motion2, "integer_motion3": motion3}
        if self.debug:
            metrics["integer_motion"] = score
        return metrics


# ---------------------------------------------------------------------------
# the CPU twin
# ---------------------------------------------------------------------------


class IntegerMotion:
    """CPU twin of libvmaf's integer ``motion`` extractor (reference luma only)."""

    def __init__(self, options: Mapping[str, Any], width: int, height: int, bitdepth: int):
        # Sessions pass resolved options; defaults fill in for partial mappings.
        options = DECLARATION.with_defaults(options)
        self.width = width
        self.height = height
        self.force_zero = bool(options["motion_force_zero"])
        self.fps_weight = float(options["motion_fps_weight"])
        self.max_val = float(options["motion_max_val"])
        self.timeline = MotionTimeline(options, debug=bool(options["debug"]))
        self.workspace = None if self.force_zero else SadWorkspace(width, height, bitdepth)
        # Padded luma of the last one or two reference frames.
        self._history: deque[np.ndarray] = deque(maxlen=self.timeline.min_idx)
        self._spare: np.ndarray | None = None

    def extract(self, index: int, ref: Any, dist: Any) -> Iterable[FrameScores]:
        score = 0.0
        if not self.force_zero:
            # a copy (the caller may reuse its buffer), into the buffer of the
            # frame that left the history last time: a fresh 1080p array each
            # frame cost more in page faults than the copy
            cur = self.workspace.pad(ref.luma, out=self._spare)
            self._spare = None
            if index >= self.timeline.min_idx:
                if len(self._history) < self.timeline.min_idx:
                    raise ValueError(f"motion: frame {index} arrived without its predecessors")
                sad = self.workspace.sad(self._history[0], cur)
                score = metrics_from_stats(
                    sad, self.width, self.height, fps_weight=self.fps_weight, max_val=self.max_val
                )
            if len(self._history) == self._history.maxlen:
                self._spare = self._history[0]  # about to leave the history
            self._history.append(cur)
        return self.timeline.push(index, score)

    def flush(self) -> Iterable[FrameScores]:
        self._history.clear()
        return self.timeline.flush()


# libvmaf's integer and float motion take these alike; float_motion lists them too
FORCE_ZERO_OPTION = Option("motion_force_zero", bool, False, "forcing motion score to zero",
                           alias="force_0", feature_param=True)
BLEND_FACTOR_OPTION = Option("motion_blend_factor", float, 1.0, "blend motion score given an offset",
                             alias="mbf", min=0.0, max=1.0, feature_param=True)
BLEND_OFFSET_OPTION = Option("motion_blend_offset", float, 40.0, "blend motion score starting from this offset",
                             alias="mbo", min=0.0, max=1000.0, feature_param=True)
FPS_WEIGHT_OPTION = Option("motion_fps_weight", float, 1.0, "fps-aware multiplicative weight/correction",
                           alias="mfw", min=0.0, max=5.0, feature_param=True)
MAX_VAL_OPTION = Option("motion_max_val", float, 10000.0,
                        "maximum value allowed; larger values will be clipped to this value",
                        alias="mmxv", min=0.0, max=10000.0, feature_param=True)


DECLARATION = FeatureDeclaration(
    name="motion",
    luma_only=True,
    provides=(SAD_NAME, "integer_motion2", "integer_motion3"),
    debug_provides=("integer_motion",),
    # integer_motion.c writes motion2/motion3 of every frame in flush()
    written_late={"integer_motion2": "flush", "integer_motion3": "flush"},
    options=(
        FORCE_ZERO_OPTION,
        BLEND_FACTOR_OPTION,
        BLEND_OFFSET_OPTION,
        FPS_WEIGHT_OPTION,
        MAX_VAL_OPTION,
        Option("motion_five_frame_window", bool, False, "use five-frame temporal window",
               alias="mffw", feature_param=True),
        Option("motion_moving_average", bool, False,
               "use moving average for motion scores after first frame",
               alias="mma", feature_param=True),
        debug_option(),
    ),
    temporal=True,
    # frame i is final once frame i + 1 is seen; with the five-frame window
    # frames 0 and 1 wait for frame 2, so two frames bound every case
    max_lag=2,
    lag=lambda values: 2 if values.get("motion_five_frame_window") else 1,
    kernel="motion.cu",
    gpu="motion",
    cpu=IntegerMotion,
    help="integer motion: blurred luma difference between consecutive reference frames",
)
