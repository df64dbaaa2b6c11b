"""A frame's ``result`` and ``released`` packets, built straight from their values.

Three messages leave the daemon for every frame.  Built as message objects, each was
checked, turned into its wire map and packed: several Python calls per message on the
trio thread.  The ledger (vmafxd/ledger.py) builds their bytes here instead, with the
protocol's own fast-path checks for the values a daemon makes (``plain_u32s``,
``plain_metrics``: u32 integers, float or nil metrics) and the same map as
``to_wire``'s, so the bytes are the general path's; a value outside them returns None
and the ledger takes the general path, which names the field.
"""

from __future__ import annotations

from typing import Any

import msgpack

#: the largest u32 (vmafx.protocol.messages' bound for the fields below)
_U32 = (1 << 32) - 1

__all__ = ["FramePackets"]


class FramePackets:
    """The daemon's messages of every frame, encoded straight from their values: no message object,
    no to_wire.  Each method returns the bytes ``vmafx.protocol.codec.encode`` gives for the
    same message (tests/daemon/test_frame_packets.py checks), or None when a value is not plainly
    what the message's ``check_wire`` takes (then the general way, which names the field).  One
    per thread: it keeps its own msgpack packer (a fresh one per packet, as ``msgpack.packb``
    makes, costs more than the packing)."""

    __slots__ = ("_pack",)

    def __init__(self) -> None:
        self._pack = msgpack.Packer(use_bin_type=True).pack

    # The checks are plain_u32s's and plain_metrics's, written out: a call with *args and a loop
    # cost more than the packing (three packets a frame).

    def released_pair(self, session: int, index: int, ref: Any, dist: Any) -> tuple[bytes, bytes] | None:
        """A frame's two ``released`` (ref, then dist)."""
        if (type(session) is int and type(index) is int and type(ref) is int and type(dist) is int
                and 0 <= session <= _U32 and 0 <= index <= _U32 and 0 <= ref <= _U32 and 0 <= dist <= _U32):
            pack = self._pack
            return (pack({"t": "released", "buffer": ref, "session": session, "index": index, "role": "ref"}),
                    pack({"t": "released", "buffer": dist, "session": session, "index": index, "role": "dist"}))
        return None

    def result(self, session: int, index: int, metrics: dict) -> bytes | None:
        """A frame's ``result`` (metrics: str -> float or None)."""
        if (type(session) is int and type(index) is int and 0 <= session <= _U32 and 0 <= index <= _U32
                and type(metrics) is dict and len(metrics) <= 4096):
            for k, v in metrics.items():
                if type(k) is not str or (type(v) is not float and v is not None):
                    return None
            return self._pack({"t": "result", "session": session, "index": index, "metrics": metrics})
        return None
