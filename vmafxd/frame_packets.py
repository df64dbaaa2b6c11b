"""A frame's ``result`` and ``released`` packets, built straight from their values; and runs of
them, ``result_many`` and ``released_many``, for a client whose hello asked for outcome runs.

Three messages leave the daemon for every frame (or a share of two runs).  Built as message objects, each was
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

from vmafx.protocol.messages import MAX_FRAMES_PER_RUN

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
        if self.pair_ok(session, index, ref, dist):
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

    def released_many(self, session: int, indices: list[int], refs: list[Any], dists: list[Any]) -> list[bytes]:
        """Runs of frames' two ``released`` each (``released_many``, at most MAX_FRAMES_PER_RUN frames a
        packet), for values released_pair takes: the caller checked each frame with :meth:`pair_ok`."""
        pack = self._pack
        out = []
        for a in range(0, len(indices), MAX_FRAMES_PER_RUN):
            b = a + MAX_FRAMES_PER_RUN
            out.append(pack({"t": "released_many", "session": session, "indices": indices[a:b], "ref": refs[a:b],
                             "dist": dists[a:b]}))
        return out

    @staticmethod
    def pair_ok(session: Any, index: Any, ref: Any, dist: Any) -> bool:
        """A frame's two ``released`` can be built here (released_pair, released_many): every value
        plainly a u32."""
        return (type(session) is int and type(index) is int and type(ref) is int and type(dist) is int
                and 0 <= session <= _U32 and 0 <= index <= _U32 and 0 <= ref <= _U32 and 0 <= dist <= _U32)

    def result_run(self, session: int, frames: list[tuple[int, dict]], max_bytes: int) -> list[bytes] | None:
        """Frames' results of one session, in order, as ``result_many`` packets: a packet a run of
        frames whose metrics have the same names (in the same order), cut where a packet would pass
        MAX_FRAMES_PER_RUN frames or about ``max_bytes``.  None when a value is not plainly what a
        result takes (then each frame goes its own way, which names the field)."""
        if not (type(session) is int and 0 <= session <= _U32):
            return None
        out: list[bytes] = []
        names: tuple | None = None
        indices: list[int] = []
        rows: list[tuple] = []
        cap = MAX_FRAMES_PER_RUN
        for index, metrics in frames:
            if type(index) is not int or not 0 <= index <= _U32 or type(metrics) is not dict:
                return None
            keys = tuple(metrics)
            if keys != names or len(indices) >= cap:
                if indices:
                    out.append(self._result_many(session, names, indices, rows))
                    indices, rows = [], []
                if keys != names:
                    for k in keys:
                        if type(k) is not str:
                            return None
                    names = keys
                    # a frame's share of a packet: its index and a number or nil a name (9 bytes
                    # each at most), the names once
                    cap = max(1, min(MAX_FRAMES_PER_RUN, (max_bytes - 64 - sum(len(k) + 8 for k in keys))
                                     // (5 + 9 * len(keys))))
            row = tuple(metrics.values())
            for v in row:
                if type(v) is not float and v is not None:
                    return None
            indices.append(index)
            rows.append(row)
        if indices:
            out.append(self._result_many(session, names, indices, rows))
        return out

    def _result_many(self, session: int, names, indices: list[int], rows: list[tuple]) -> bytes:
        columns = zip(*rows) if names else ()
        return self._pack({"t": "result_many", "session": session, "indices": indices,
                           "metrics": dict(zip(names, columns))})
