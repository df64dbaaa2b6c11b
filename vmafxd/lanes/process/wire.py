"""What crosses between the daemon and a lane's worker process: a small message set over two sockets.

Each worker process (:mod:`.child`) has two ``AF_UNIX``/``SOCK_SEQPACKET``
socketpairs with the daemon (:mod:`.proxy`):

* the **stream**: asynchronous, both ways, each packet a msgpack *list of
  messages* -- many submits in one packet one way (a run of a session's
  frames as one ``SUBMIT_MANY``), results, failures and releases of many
  frames in one packet the other.  A message is a list whose first item is
  its code (below).
* the **rpc**: one request, one reply, in the daemon's calling thread, for
  what the lane interface answers synchronously: ``import_buffer`` (the fds
  travel with ``SCM_RIGHTS``), closing imports (the reaper's thread), the
  device-memory figures ``status`` reads.

A packet larger than :data:`INLINE_MAX` (a session's plan with a bootstrap
model, a very large coalesced batch) travels as a sealed memfd attached to a
one-byte packet, so no message is ever refused for its size.

Values cross as plain msgpack (ints, floats as IEEE doubles -- scores cross
bit for bit --, strings, bytes, lists, maps).  A session's plan holds loaded
models (numpy arrays), so it crosses as a pickle of its models and its
feature instances by registry name: the socket is a private socketpair
between the daemon and a child it spawned from its own code, not a trust
boundary.
"""

from __future__ import annotations

import os
import pickle
import socket
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import msgpack

from vmafx.formats import PixelFormat
from vmafx.field_error import FieldError
from vmafx.transport import OwnedFd, Packet, recv_packet_blocking, send_packet_blocking

from ...core.layout import BufferLayout, Geometry, PlaneSpec
from ...core.scoring import FeatureInstance, PlanError, ScoringPlan
from ..errors import InvalidInput, LaneError, LaneFailure, LaneStopped, OutOfMemory, Unsupported

__all__ = [
    "OPEN", "SUBMIT", "SUBMIT_MANY", "FINISH", "ABORT", "STOP",
    "READY", "OPENED", "SCORED", "FAILED", "RELEASED", "FINISHED",
    "RPC_IMPORT", "RPC_CLOSE", "RPC_STATS", "INLINE_MAX", "MAX_FDS",
    "encode", "decode", "packet_bytes", "send_blocking", "recv_blocking",
    "error_to_wire", "error_from_wire", "layout_to_wire", "layout_from_wire",
    "geometry_to_wire", "geometry_from_wire", "plan_to_wire", "plan_from_wire", "fence_to_wire", "fence_from_wire",
]

# daemon -> worker (stream)
OPEN = 1  # [OPEN, sid, plan, geometry, name, client_name]
SUBMIT = 2  # [SUBMIT, sid, token, index, ref_import, dist_import, ref_fence, dist_fence]
FINISH = 3  # [FINISH, sid]
ABORT = 4  # [ABORT, sid]
STOP = 5  # [STOP]: finish what is running, drop what is queued (LaneStopped), report, exit
#: [SUBMIT_MANY, sid, [[token, index, ref_import, dist_import], ...]]: a run of frames of one session, in
#: index order, handed to the worker's session as one job group (LaneSession.submit_many); a frame with a
#: GPU fence carries both: [token, index, ref_import, dist_import, ref_fence, dist_fence]
SUBMIT_MANY = 6

# worker -> daemon (stream)
READY = 10  # [READY, info] or [READY, None, reason] (the lane is not available here)
OPENED = 11  # [OPENED, sid, error | None, device]
SCORED = 12  # [SCORED, sid, [[index, metrics], ...]]
FAILED = 13  # [FAILED, sid, [[index, error], ...]]
RELEASED = 14  # [RELEASED, [token, ...]]: the frames' last reader has finished
FINISHED = 15  # [FINISHED, sid, pooled, aggregate]

# daemon -> worker (rpc); replies are [0, value] or [1, error]
RPC_IMPORT = 20  # [RPC_IMPORT, import_id, layout, fd_keys] + fds -> {zero_copy, implicit_fences}
RPC_CLOSE = 21  # [RPC_CLOSE, [import_id, ...]] -> None
RPC_STATS = 22  # [RPC_STATS] -> {host_copies, device_memory, memory_budget}

#: packets up to this size go inline; larger ones through a memfd (the socket's send
#: buffer bounds a SEQPACKET record: ~208 KiB by default)
INLINE_MAX = 60 * 1024
#: most fds one rpc packet carries (a buffer's planes: at most 3)
MAX_FDS = 8
_MEMFD_MARK = b"\xc1"  # msgpack's one "never used" byte: cannot start an inline packet


def _plain(value: Any) -> Any:
    """A numpy scalar (a metric a feature left as float32, say) as the Python number it holds; a
    mapping that is not a dict as one, a sequence that is not a list or tuple as a list.  (msgpack
    asks only for what it cannot pack itself: a dict, list or tuple costs nothing here.)"""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence):  # str and bytes never come here: msgpack packs them
        return list(value)
    item = getattr(value, "item", None)
    if item is None:
        raise TypeError(f"cannot send a {type(value).__name__} to or from a lane worker")
    return item()


def encode(messages: Sequence[Any]) -> bytes:
    return msgpack.packb(messages, use_bin_type=True, default=_plain)


def decode(data: bytes) -> list:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)


def packet_bytes(data: bytes) -> tuple[bytes, list[OwnedFd]]:
    """(bytes to send, fds to attach): inline, or a sealed memfd holding ``data``."""
    if len(data) <= INLINE_MAX:
        return data, []
    fd = OwnedFd(os.memfd_create("vmafxd-lane-msg", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING))
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd.fileno(), view)
            view = view[n:]
    except BaseException:
        fd.close()
        raise
    return _MEMFD_MARK, [fd]


def unpack_packet(pkt: Packet) -> tuple[bytes, list[OwnedFd]]:
    """The packet's message bytes (read from its memfd when it came as one) and its other fds."""
    if pkt.data == _MEMFD_MARK and pkt.fds:
        fd = pkt.fds.pop(0)
        try:
            size = os.fstat(fd.fileno()).st_size
            data = os.pread(fd.fileno(), size, 0)
        finally:
            fd.close()
        return data, pkt.fds
    return pkt.data, pkt.fds


def send_blocking(sock: socket.socket, messages: Any, fds: Sequence[Any] = ()) -> None:
    data, extra = packet_bytes(encode(messages))
    try:
        send_packet_blocking(sock, data, [*extra, *fds])
    finally:
        for f in extra:
            f.close()


async def send_async(send, messages: Sequence[Any]) -> None:
    """``messages`` as one packet through ``send(data, fds)`` (a trio stream's or channel's);
    a memfd made for a large packet is closed once sent."""
    data, fds = packet_bytes(encode(messages))
    try:
        await send(data, fds)
    finally:
        for f in fds:
            f.close()


def recv_blocking(sock: socket.socket) -> tuple[Any, list[OwnedFd]]:
    pkt = recv_packet_blocking(sock, INLINE_MAX + 16, MAX_FDS + 1)
    data, fds = unpack_packet(pkt)
    return decode(data), fds


# ----------------------------------------------------------------------------- values


_ERRORS: dict[str, type] = {cls.__name__: cls for cls in (
    LaneError, InvalidInput, Unsupported, OutOfMemory, LaneFailure, LaneStopped, PlanError)}


def error_to_wire(e: BaseException) -> list:
    """[class, field, reason]: a lane error keeps its class (the runtime's own errors are lane
    failures), a plan error and a plain ValueError theirs; anything else is a lane failure."""
    if isinstance(e, FieldError):
        name = next((c.__name__ for c in type(e).__mro__ if c.__name__ in _ERRORS), "FieldError")
        return [name, e.field, e.reason]
    if isinstance(e, ValueError):
        return ["ValueError", "", str(e)]
    return ["LaneFailure", "", f"{type(e).__name__}: {e}"]


def error_from_wire(w: Sequence[Any]) -> Exception:
    name, field, reason = w
    cls = _ERRORS.get(name)
    if cls is not None:
        return cls(field, reason)
    if name == "FieldError":
        return FieldError(field, reason)
    if name == "ValueError":
        return ValueError(reason)
    return LaneFailure(field, reason)


def geometry_to_wire(g: Geometry) -> list:
    return [g.width, g.height, g.pixel_format.value, g.bitdepth]


def geometry_from_wire(w: Sequence[Any]) -> Geometry:
    return Geometry(int(w[0]), int(w[1]), PixelFormat(w[2]), int(w[3]))


def layout_to_wire(layout: BufferLayout) -> list:
    return [layout.kind, geometry_to_wire(layout.geometry), layout.size, layout.modifier, layout.allow_copy,
            [[p.fd_index, p.offset, p.pitch, p.rows, p.row_bytes] for p in layout.planes],
            layout.device, layout.handle]


def layout_from_wire(w: Sequence[Any]) -> BufferLayout:
    kind, geo, size, modifier, allow_copy, planes, device, handle = w
    return BufferLayout(kind, geometry_from_wire(geo), size, modifier, bool(allow_copy),
                        tuple(PlaneSpec(*p) for p in planes), device, handle)


def plan_to_wire(plan: ScoringPlan) -> bytes:
    """The plan's models (pickled: they hold numpy arrays) and its feature instances by registry name
    (a declaration holds functions; the worker looks the same declaration up in its registry)."""
    return pickle.dumps((plan.models, plan.model_inputs, [(i.decl.name, i.values) for i in plan.instances]),
                        protocol=pickle.HIGHEST_PROTOCOL)


def plan_from_wire(data: bytes) -> ScoringPlan:
    from ... import features as registry

    models, model_inputs, instances = pickle.loads(data)
    return ScoringPlan([FeatureInstance(registry.get(name), values) for name, values in instances],
                       models, model_inputs)


def fence_to_wire(fence: Any) -> list | None:
    return None if fence is None else [fence.kind, fence.handle]


def fence_from_wire(w: Sequence[Any] | None) -> Any:
    """A :class:`~vmafxd.lanes.device.GpuFence` (kind, handle) for the worker's lane."""
    return None if w is None else SimpleNamespace(kind=w[0], handle=w[1])


def fd_map(keys: Sequence[int], fds: Sequence[OwnedFd]) -> Mapping[int, OwnedFd]:
    if len(keys) != len(fds):
        raise LaneFailure("planes", f"{len(fds)} fds arrived for {len(keys)} declared")
    return dict(zip(keys, fds))
