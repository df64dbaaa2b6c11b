"""What one frame costs in memory: its two pictures and the lane's working set for the plan.

The daemon budgets frames in flight in bytes (vmafxd/admission.py), so a
frame's cost must be known before it is accepted, from the session's
geometry and plan alone.  This is the one place that estimate is made.

A picture costs its stored bytes (the producer's planes as the daemon maps
or copies them).  The working set is what scoring one frame allocates on
top, per feature instance, as bytes per luma pixel.  The figures below were
measured on the CPU lane (tracemalloc peak while pushing one frame through
each feature's CPU twin, minus the pictures; 640x360, and 1920x1080 for the
rows marked so) and rounded up with room to spare:

=============  ========  ===========
feature        measured  budgeted
=============  ========  ===========
adm            ~12 B/px  32 B/px (1080p; the DWT and the masking run in strips of rows; 23 before)
motion         ~5 B/px   8 B/px (a blurred previous frame is kept)
vif            ~1 B/px   8 B/px (strips; its scales add a third)
psnr           ~2 B/px   8 B/px
float_ssim     ~1 B/px   8 B/px
float_ms_ssim  ~1 B/px   8 B/px
psnr_hvs       ~2 B/px   32 B/px (1080p; chunks of block rows; 68 before)
cambi          ~16 B/px  32 B/px (1080p)
float_psnr     ~8 B/px   32 B/px (24 at 16 bits: the in-order double sum)
float_moment   ~12 B/px  32 B/px (28 at 16 bits)
float_ansnr    ~24 B/px  32 B/px
=============  ========  ===========

A feature not in the table is budgeted :data:`DEFAULT_BYTES_PER_PIXEL`.  The
instances run one after another, so their peaks do not add up; summing them
overstates the peak a little and keeps the bound safe.  The GPU lanes' device
working set is of the same order (their kernels keep float planes per
feature and scale), and they use the same estimate.
"""

from __future__ import annotations

from vmafx.formats import storage_planes

from .layout import Geometry

__all__ = ["BYTES_PER_PIXEL", "DEFAULT_BYTES_PER_PIXEL", "picture_bytes", "working_set_bytes", "frame_bytes",
           "batched_frame_bytes"]

#: a feature's working memory for one frame, in bytes per luma pixel (see the table above)
BYTES_PER_PIXEL: dict[str, int] = {
    "adm": 32,
    "float_adm": 32,
    "motion": 8,
    "float_motion": 8,
    "vif": 8,
    "float_vif": 8,
    "psnr": 8,
    "float_ssim": 8,
    "float_ms_ssim": 8,
    "float_psnr": 32,
    "float_moment": 32,
    "float_ansnr": 32,
}
#: for a feature the table does not name (a new one, cambi ...): as much as the largest
DEFAULT_BYTES_PER_PIXEL = 32
#: fixed per frame: metric dicts, the frame's records, the lane's job
FIXED_BYTES = 64 << 10


def picture_bytes(geometry: Geometry) -> int:
    """Stored bytes of one picture of this geometry (all planes)."""
    planes = storage_planes(geometry.pixel_format, geometry.width, geometry.height, geometry.bitdepth)
    return sum(p.row_bytes * p.height for p in planes)


def working_set_bytes(plan, geometry: Geometry) -> int:
    """Bytes scoring one frame of ``geometry`` allocates for ``plan`` (a ScoringPlan)."""
    pixels = geometry.width * geometry.height
    per_pixel = sum(BYTES_PER_PIXEL.get(inst.decl.name, DEFAULT_BYTES_PER_PIXEL) for inst in plan.instances)
    return per_pixel * pixels + FIXED_BYTES


def frame_bytes(plan, geometry: Geometry) -> int:
    """One frame in flight: its reference and distorted pictures plus the working set."""
    return 2 * picture_bytes(geometry) + working_set_bytes(plan, geometry)


def batched_frame_bytes(geometry: Geometry) -> int:
    """One frame in flight on a lane that scores in batches on a device (the GPU lanes).

    Such a lane allocates its working set per batch while the batch runs (at most ``max_batch``
    frames, a few batches per session), not per frame waiting in the queue: frames in flight
    beyond a batch hold only their pictures as the batch stages them and their records.
    Counting the whole working set per frame would refuse a normal load (128 frames of 1080p in
    flight, each "costing" ~100 MiB of working memory that never exists at once)."""
    return 2 * picture_bytes(geometry) + FIXED_BYTES
