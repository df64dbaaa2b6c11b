"""The limits a daemon enforces and announces in its hello.

Every count a client controls is bounded here, so no client can make the
daemon hold unbounded memory, fds or work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..formats import MAX_DIMENSION

__all__ = ["Limits", "PROTOCOL_VERSION", "MAX_FDS_PER_PACKET", "MAX_FRAMES_PER_SUBMIT"]

PROTOCOL_VERSION = 1
#: the most fds one ``sendmsg`` can carry (the kernel's SCM_MAX_FD): no limit may exceed it
MAX_FDS_PER_PACKET = 253
#: the most frames one ``submit_many`` may carry on the wire (``max_frames_per_submit`` may be lower)
MAX_FRAMES_PER_SUBMIT = 1024


@dataclass(frozen=True)
class Limits:
    #: bytes of one packet (one msgpack message); larger ones are truncated by the kernel and refused
    max_message_bytes: int = 65536
    #: fds attached to one packet; more set MSG_CTRUNC and are refused (at most MAX_FDS_PER_PACKET)
    max_fds_per_message: int = 8
    #: frames of one ``submit_many`` packet (at most MAX_FRAMES_PER_SUBMIT)
    max_frames_per_submit: int = 64
    max_buffers_per_client: int = 256
    max_sessions_per_client: int = 16
    #: frames submitted and not yet answered, per client (all its sessions)
    max_frames_in_flight: int = 64
    max_clients: int = 256
    max_width: int = MAX_DIMENSION
    max_height: int = MAX_DIMENSION
    #: bytes of one registered buffer
    max_buffer_bytes: int = 1 << 31
    #: the bounded host wait on an acquire fence (R2)
    fence_timeout_ms: int = 5000
    #: the bounded wait for a dma-buf's implicit write fences when no fence is given (R8)
    implicit_fence_timeout_ms: int = 1000
    max_models_per_session: int = 8
    max_features_per_session: int = 16
    # -- fair admission: what one user (peer uid) may hold, summed over its connections
    max_clients_per_uid: int = 32
    max_sessions_per_uid: int = 64
    max_buffers_per_uid: int = 1024
    max_frames_in_flight_per_uid: int = 256
    # -- what the whole daemon holds (its fd needs are derived from these, see vmafxd.admission)
    max_buffers_total: int = 4096
    max_frames_in_flight_total: int = 1024
    # -- memory: a frame's cost is its two pictures plus the lane's working set for the plan
    #: the most one frame may cost (a geometry that costs more is refused at open_session)
    max_frame_bytes: int = 4 << 30
    #: the cost of one client's frames in flight
    max_bytes_in_flight_per_client: int = 8 << 30
    #: the cost of all frames in flight in the daemon (the lane may lower it: device memory)
    max_bytes_in_flight_total: int = 16 << 30

    def to_wire(self) -> dict:
        return asdict(self)

    @classmethod
    def from_wire(cls, d: dict) -> "Limits":
        known = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in d.items() if k in known and isinstance(v, int)})
