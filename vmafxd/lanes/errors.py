"""What a lane raises, and reports for a frame, when it will not or cannot go on.

Lanes know nothing of the wire: they raise these, naming the field, and the
daemon turns each class into the protocol's error code at its one boundary
with the lanes (:mod:`vmafxd.lane_errors`).  A plan a lane cannot run is a
:class:`~vmafxd.core.scoring.PlanError` (also a :class:`FieldError`), and a
fd that cannot even be inspected a plain :class:`FieldError` from
:mod:`vmafxd.core.fdkinds`; both are invalid input.
"""

from __future__ import annotations

from vmafx.field_error import FieldError

__all__ = ["LaneError", "InvalidInput", "Unsupported", "OutOfMemory", "LaneFailure", "LaneStopped"]


class LaneError(FieldError):
    """A lane refuses a request or fails a frame; ``field`` names the culprit ("" for none)."""


class InvalidInput(LaneError):
    """What the client sent is wrong: the fd is not what it says, the sizes disagree, no such device."""


class Unsupported(LaneError):
    """Well formed, but not something this lane does: a buffer kind, a modifier, a fence kind."""


class OutOfMemory(LaneError):
    """The lane could not get the memory (a mapping refused with ENOMEM)."""


class LaneFailure(LaneError):
    """The lane itself failed (a device error while scoring, a session it could not open)."""


class LaneStopped(LaneError):
    """The lane stopped (shutdown) before it scored the frame."""
