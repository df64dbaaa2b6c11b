"""The messages of the vmafxd protocol and their wire form.

Every packet on the ``SOCK_SEQPACKET`` socket is one msgpack map
``{"t": TYPE, ...fields}``; some types carry file descriptors (SCM_RIGHTS),
which fields reference by index into the packet's fd array.  This module only
turns dicts into validated dataclasses and back: it never touches a socket
and imports nothing but the standard library and msgpack (a test checks it).

Validation names the offending field (``planes[1].pitch``) and raises
:class:`RemoteProtocolError` for what the peer sent, or
:class:`LocalProtocolError` for what we were about to send.  Which problems
are fatal is decided by the code: ``E_PROTO`` (the packet is not a message
of this protocol at all) ends the connection; ``E_INVAL`` (a message of the
right shape with a wrong value) does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Sequence

import msgpack

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError

__all__ = [
    "Message", "encode", "decode", "decode_packet", "bundle", "peek", "MESSAGE_TYPES",
    "Hello", "HelloReply", "OpenSession", "SessionOpened", "CloseSession", "SessionClosed",
    "RegisterBuffer", "BufferRegistered", "UnregisterBuffer", "BufferUnregistered",
    "Submit", "Result", "FrameError", "Released", "Status", "StatusReply",
    "ListSessions", "SessionsReply", "Error", "Goodbye",
    "Plane", "Fence", "BUFFER_KINDS", "FENCE_KINDS", "FLAG_ALLOW_COPY",
]

#: buffer kinds a client may register (which ones a lane imports is the lane's business)
BUFFER_KINDS = ("memfd", "dmabuf", "cuda_vmm", "cuda_ipc", "hip_ipc", "hip_vmm")
#: acquire fence kinds: fds checked on the host (R2), or a GPU interprocess event
FENCE_KINDS = ("sync_file", "eventfd", "cuda_ipc_event", "hip_ipc_event")
#: the producer consents to a GPU or host copy where zero-copy is impossible
FLAG_ALLOW_COPY = 1
_KNOWN_FLAGS = FLAG_ALLOW_COPY

_U32 = (1 << 32) - 1
_I64 = 1 << 63


class _Bad(Exception):
    def __init__(self, field: str, message: str, code: ErrorCode = ErrorCode.E_INVAL):
        self.field, self.message, self.code = field, message, code


# -- value checkers: each takes (value, path) and returns the value ----------

def _uint(maximum: int = _U32) -> Callable[[Any, str], int]:
    def check(v, path):
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Bad(path, f"expected an unsigned integer, got {type(v).__name__}")
        if not 0 <= v <= maximum:
            raise _Bad(path, f"{v} is outside 0..{maximum}")
        return v
    return check


def _int64(v, path):
    if isinstance(v, bool) or not isinstance(v, int) or not -_I64 <= v < _I64:
        raise _Bad(path, "expected a 64-bit integer")
    return v


def _text(max_len: int = 256) -> Callable[[Any, str], str]:
    def check(v, path):
        if not isinstance(v, str):
            raise _Bad(path, f"expected a string, got {type(v).__name__}")
        if len(v) > max_len:
            raise _Bad(path, f"longer than {max_len} characters")
        return v
    return check


def _choice(options) -> Callable[[Any, str], str]:
    def check(v, path):
        if not isinstance(v, str) or v not in options:
            raise _Bad(path, f"{v!r} is not one of {', '.join(options)}")
        return v
    return check


def _boolean(v, path):
    if not isinstance(v, bool):
        raise _Bad(path, "expected true or false")
    return v


def _binary(max_len: int) -> Callable[[Any, str], bytes]:
    def check(v, path):
        if not isinstance(v, (bytes, bytearray)) or len(v) > max_len:
            raise _Bad(path, f"expected at most {max_len} bytes of binary")
        return bytes(v)
    return check


def _optional(check):
    def opt(v, path):
        return None if v is None else check(v, path)
    return opt


def _list_of(check, max_len: int):
    def lst(v, path):
        if not isinstance(v, (list, tuple)):
            raise _Bad(path, "expected a list")
        if len(v) > max_len:
            raise _Bad(path, f"more than {max_len} entries")
        return tuple(check(x, f"{path}[{i}]") for i, x in enumerate(v))
    return lst


def _metrics(v, path):
    if not isinstance(v, dict) or len(v) > 4096:
        raise _Bad(path, "expected a map of metric names to numbers")
    out = {}
    for k, x in v.items():
        if not isinstance(k, str):
            raise _Bad(path, "metric names must be strings")
        if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float))):
            raise _Bad(f"{path}.{k}", "expected a number or nil")
        out[k] = None if x is None else float(x)
    return out


def _anymap(v, path):
    if not isinstance(v, dict):
        raise _Bad(path, "expected a map")
    return v


@dataclass(frozen=True)
class Plane:
    """Where one plane lives: which of the packet's fds, at which byte offset, with which row pitch."""

    fd: int
    offset: int
    pitch: int

    @classmethod
    def check(cls, v, path):
        if not isinstance(v, dict):
            raise _Bad(path, "expected a map with fd, offset and pitch")
        for k in v:
            if k not in ("fd", "offset", "pitch"):
                raise _Bad(f"{path}.{k}", "unknown field")
        try:
            return cls(
                fd=_uint(255)(v["fd"], f"{path}.fd"),
                offset=_uint(_I64 - 1)(v["offset"], f"{path}.offset"),
                pitch=_uint(1 << 31)(v["pitch"], f"{path}.pitch"),
            )
        except KeyError as e:
            raise _Bad(f"{path}.{e.args[0]}", "missing") from None

    def to_wire(self):
        return {"fd": self.fd, "offset": self.offset, "pitch": self.pitch}


@dataclass(frozen=True)
class Fence:
    """An acquire fence: an fd of the packet (sync_file, eventfd) or a GPU IPC event handle."""

    kind: str
    fd: int | None = None
    handle: bytes | None = None

    @classmethod
    def check(cls, v, path):
        if not isinstance(v, dict):
            raise _Bad(path, "expected a map with kind and fd or handle")
        kind = _choice(FENCE_KINDS)(v.get("kind"), f"{path}.kind")
        if kind in ("sync_file", "eventfd"):
            if "fd" not in v:
                raise _Bad(f"{path}.fd", "missing")
            return cls(kind, fd=_uint(255)(v["fd"], f"{path}.fd"))
        if "handle" not in v:
            raise _Bad(f"{path}.handle", "missing")
        return cls(kind, handle=_binary(64)(v["handle"], f"{path}.handle"))

    def to_wire(self):
        d: dict[str, Any] = {"kind": self.kind}
        if self.fd is not None:
            d["fd"] = self.fd
        if self.handle is not None:
            d["handle"] = self.handle
        return d


# -- messages -----------------------------------------------------------------

MESSAGE_TYPES: dict[str, type["Message"]] = {}


@dataclass(frozen=True)
class Message:
    TYPE: ClassVar[str] = ""
    #: field name -> checker; fields absent from the map take the dataclass default
    SCHEMA: ClassVar[dict[str, Callable]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    TAKES_FDS: ClassVar[bool] = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.TYPE:
            MESSAGE_TYPES[cls.TYPE] = cls

    def fd_refs(self) -> list[tuple[str, int]]:
        """(field path, fd index) for every fd this message references."""
        return []

    def to_wire(self) -> dict:
        d: dict[str, Any] = {"t": self.TYPE}
        for f in fields(self):
            if f.name == "fds":
                continue
            v = getattr(self, f.name)
            if v is None:
                continue
            if isinstance(v, tuple) and v and hasattr(v[0], "to_wire"):
                v = [x.to_wire() for x in v]
            elif hasattr(v, "to_wire"):
                v = v.to_wire()
            elif isinstance(v, tuple):
                v = list(v)
            d[f.name] = v
        return d

    @classmethod
    def from_wire(cls, d: dict, fds: tuple[int, ...] = ()) -> "Message":
        kw: dict[str, Any] = {}
        for key in d:
            if key != "t" and key not in cls.SCHEMA:
                raise _Bad(key, f"unknown field of {cls.TYPE}")
        for name in cls.REQUIRED:
            if name not in d:
                raise _Bad(name, f"missing from {cls.TYPE}")
        for name, check in cls.SCHEMA.items():
            if name in d:
                kw[name] = check(d[name], name)
        if cls.TAKES_FDS:
            kw["fds"] = tuple(fds)
        msg = cls(**kw)
        msg.validate()
        return msg

    def validate(self) -> None:
        """Cross-field checks; raise _Bad."""
        refs = self.fd_refs()
        fds = getattr(self, "fds", ())
        for path, idx in refs:
            if idx >= len(fds):
                raise _Bad(path, f"fd index {idx} but the packet carries {len(fds)} fds", ErrorCode.E_PROTO)
        used = {idx for _, idx in refs}
        for i in range(len(fds)):
            if i not in used:
                raise _Bad(f"fds[{i}]", "attached fd is not referenced by any field", ErrorCode.E_PROTO)


@dataclass(frozen=True)
class Hello(Message):
    TYPE: ClassVar[str] = "hello"
    SCHEMA: ClassVar = {"seq": _uint(), "version": _uint(), "client": _optional(_text(128)),
                        "bundles": _optional(_boolean), "session_budgets": _optional(_boolean)}
    REQUIRED: ClassVar = ("seq", "version")
    seq: int = 0
    version: int = 0
    client: str | None = None
    #: the client reads bundles: packets holding several of the daemon's messages
    bundles: bool | None = None
    #: the client reads session_opened's max_frames_in_flight (an older client would refuse it)
    session_budgets: bool | None = None


@dataclass(frozen=True)
class HelloReply(Message):
    TYPE: ClassVar[str] = "hello_reply"
    SCHEMA: ClassVar = {
        "re": _uint(), "version": _uint(), "server": _text(128), "limits": _anymap,
        "lanes": _list_of(_anymap, 16), "features": _list_of(_text(64), 256), "models": _list_of(_text(64), 64),
        "bundles": _optional(_boolean),
    }
    REQUIRED: ClassVar = ("re", "version", "server", "limits")
    re: int = 0
    version: int = 0
    server: str = ""
    limits: dict = field(default_factory=dict)
    lanes: tuple = ()
    features: tuple = ()
    models: tuple = ()
    #: the daemon will bundle (only ever when the hello asked for it)
    bundles: bool | None = None


#: the most characters of model JSON one open_session carries (all models together must also
#: fit in max_message_bytes, 64 KiB by default)
MODEL_TEXT_MAX = 60000


@dataclass(frozen=True)
class OpenSession(Message):
    TYPE: ClassVar[str] = "open_session"
    SCHEMA: ClassVar = {
        "seq": _uint(),
        "models": _list_of(_text(4096), 16),
        "features": _list_of(_text(1024), 64),
        "width": _uint(), "height": _uint(),
        "pixel_format": _text(32), "bitdepth": _uint(16),
        "lane": _choice(("auto", "cpu", "cuda", "hip")),
        "device": _optional(_uint(255)),
        "name": _optional(_text(128)),
        # models[i]'s JSON text when the client read it (a path= model): the daemon never opens
        # a client's path; bounded so the whole message stays under max_message_bytes
        "model_texts": _list_of(_optional(_text(MODEL_TEXT_MAX)), 16),
    }
    REQUIRED: ClassVar = ("seq", "width", "height", "pixel_format")
    seq: int = 0
    models: tuple = ()
    features: tuple = ()
    width: int = 0
    height: int = 0
    pixel_format: str = ""
    bitdepth: int = 8
    lane: str = "auto"
    device: int | None = None
    name: str | None = None
    model_texts: tuple = ()


@dataclass(frozen=True)
class SessionOpened(Message):
    TYPE: ClassVar[str] = "session_opened"
    SCHEMA: ClassVar = {"re": _uint(), "session": _uint(), "lane": _text(16), "device": _optional(_uint(255)),
                        "metrics": _list_of(_text(128), 4096), "models": _list_of(_text(128), 64),
                        "max_frames_in_flight": _optional(_uint())}
    REQUIRED: ClassVar = ("re", "session", "lane")
    re: int = 0
    session: int = 0
    lane: str = ""
    device: int | None = None
    metrics: tuple = ()
    models: tuple = ()
    #: frames of this session the daemon's byte budgets hold at once (when the client has no
    #: other frames in flight); sent only when the hello asked for session_budgets
    max_frames_in_flight: int | None = None


@dataclass(frozen=True)
class CloseSession(Message):
    TYPE: ClassVar[str] = "close_session"
    SCHEMA: ClassVar = {"seq": _uint(), "session": _uint()}
    REQUIRED: ClassVar = ("seq", "session")
    seq: int = 0
    session: int = 0


@dataclass(frozen=True)
class SessionClosed(Message):
    """Sent after the last ``result``/``frame_error`` of the session: the pooled summary."""

    TYPE: ClassVar[str] = "session_closed"
    SCHEMA: ClassVar = {"re": _optional(_uint()), "session": _uint(), "frames": _uint(), "failed": _uint(),
                        "pooled": _anymap, "aggregate": _anymap}
    REQUIRED: ClassVar = ("session", "frames")
    re: int | None = None
    session: int = 0
    frames: int = 0
    failed: int = 0
    pooled: dict = field(default_factory=dict)
    aggregate: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RegisterBuffer(Message):
    TYPE: ClassVar[str] = "register_buffer"
    TAKES_FDS: ClassVar = True
    SCHEMA: ClassVar = {
        "seq": _uint(), "kind": _choice(BUFFER_KINDS),
        "width": _uint(), "height": _uint(), "pixel_format": _text(32), "bitdepth": _uint(16),
        "size": _uint(_I64 - 1), "modifier": _uint((1 << 64) - 1),
        "planes": _list_of(Plane.check, 4), "flags": _uint(),
        "device": _optional(_uint(255)), "handle": _optional(_binary(64)),
    }
    REQUIRED: ClassVar = ("seq", "kind", "width", "height", "pixel_format", "size", "planes")
    seq: int = 0
    kind: str = "memfd"
    width: int = 0
    height: int = 0
    pixel_format: str = ""
    bitdepth: int = 8
    size: int = 0
    #: DRM format modifier (0: DRM_FORMAT_MOD_LINEAR)
    modifier: int = 0
    planes: tuple[Plane, ...] = ()
    flags: int = 0
    #: the GPU the memory lives on (GPU kinds)
    device: int | None = None
    #: a CUDA/HIP IPC memory handle (kind cuda_ipc/hip_ipc: no fd)
    handle: bytes | None = None
    fds: tuple[int, ...] = ()

    def fd_refs(self):
        return [(f"planes[{i}].fd", p.fd) for i, p in enumerate(self.planes)] if not self.handle else []

    def validate(self):
        if self.flags & ~_KNOWN_FLAGS:
            raise _Bad("flags", f"unknown flag bits {self.flags & ~_KNOWN_FLAGS:#x}")
        if self.kind in ("cuda_ipc", "hip_ipc"):
            if self.handle is None:
                raise _Bad("handle", f"a {self.kind} buffer needs its 64-byte IPC handle")
        elif not self.planes:
            raise _Bad("planes", "at least one plane is needed")
        super().validate()


@dataclass(frozen=True)
class BufferRegistered(Message):
    TYPE: ClassVar[str] = "buffer_registered"
    SCHEMA: ClassVar = {"re": _uint(), "buffer": _uint(), "zero_copy": _boolean}
    REQUIRED: ClassVar = ("re", "buffer")
    re: int = 0
    buffer: int = 0
    zero_copy: bool = True


@dataclass(frozen=True)
class UnregisterBuffer(Message):
    TYPE: ClassVar[str] = "unregister_buffer"
    SCHEMA: ClassVar = {"seq": _uint(), "buffer": _uint()}
    REQUIRED: ClassVar = ("seq", "buffer")
    seq: int = 0
    buffer: int = 0


@dataclass(frozen=True)
class BufferUnregistered(Message):
    """Sent once no frame in flight references the buffer and the daemon has let go of it."""

    TYPE: ClassVar[str] = "buffer_unregistered"
    SCHEMA: ClassVar = {"re": _uint(), "buffer": _uint()}
    REQUIRED: ClassVar = ("re", "buffer")
    re: int = 0
    buffer: int = 0


@dataclass(frozen=True)
class Submit(Message):
    """One frame: indices strictly increase within a session; no reply but its outcome."""

    TYPE: ClassVar[str] = "submit"
    TAKES_FDS: ClassVar = True
    SCHEMA: ClassVar = {
        "session": _uint(), "index": _uint(), "ref": _uint(), "dist": _uint(),
        "ref_fence": _optional(Fence.check), "dist_fence": _optional(Fence.check),
    }
    REQUIRED: ClassVar = ("session", "index", "ref", "dist")
    session: int = 0
    index: int = 0
    ref: int = 0
    dist: int = 0
    ref_fence: Fence | None = None
    dist_fence: Fence | None = None
    fds: tuple[int, ...] = ()

    def fd_refs(self):
        out = []
        for role in ("ref_fence", "dist_fence"):
            f = getattr(self, role)
            if f is not None and f.fd is not None:
                out.append((f"{role}.fd", f.fd))
        return out

    def validate(self):
        super().validate()
        if self.ref_fence and self.dist_fence and self.ref_fence.fd is not None and self.ref_fence.fd == self.dist_fence.fd:
            raise _Bad("dist_fence.fd", "the same fd cannot be both fences (each fence fd is consumed)")


@dataclass(frozen=True)
class Result(Message):
    TYPE: ClassVar[str] = "result"
    SCHEMA: ClassVar = {"session": _uint(), "index": _uint(), "metrics": _metrics}
    REQUIRED: ClassVar = ("session", "index", "metrics")
    session: int = 0
    index: int = 0
    metrics: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FrameError(Message):
    TYPE: ClassVar[str] = "frame_error"
    SCHEMA: ClassVar = {"session": _uint(), "index": _uint(), "code": _choice([c.value for c in ErrorCode]),
                        "field": _text(256), "message": _text(1024)}
    REQUIRED: ClassVar = ("session", "index", "code")
    session: int = 0
    index: int = 0
    code: str = "E_INTERNAL"
    field: str = ""
    message: str = ""


@dataclass(frozen=True)
class Released(Message):
    """The producer may reuse ``buffer`` as far as frame ``index`` of ``session`` (``role``) is concerned."""

    TYPE: ClassVar[str] = "released"
    SCHEMA: ClassVar = {"buffer": _uint(), "session": _uint(), "index": _uint(), "role": _choice(("ref", "dist"))}
    REQUIRED: ClassVar = ("buffer", "session", "index", "role")
    buffer: int = 0
    session: int = 0
    index: int = 0
    role: str = "ref"


@dataclass(frozen=True)
class Status(Message):
    TYPE: ClassVar[str] = "status"
    SCHEMA: ClassVar = {"seq": _uint()}
    REQUIRED: ClassVar = ("seq",)
    seq: int = 0


@dataclass(frozen=True)
class StatusReply(Message):
    TYPE: ClassVar[str] = "status_reply"
    SCHEMA: ClassVar = {"re": _uint(), "status": _anymap}
    REQUIRED: ClassVar = ("re", "status")
    re: int = 0
    status: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ListSessions(Message):
    TYPE: ClassVar[str] = "list_sessions"
    SCHEMA: ClassVar = {"seq": _uint()}
    REQUIRED: ClassVar = ("seq",)
    seq: int = 0


@dataclass(frozen=True)
class SessionsReply(Message):
    TYPE: ClassVar[str] = "sessions_reply"
    SCHEMA: ClassVar = {"re": _uint(), "sessions": _list_of(_anymap, 65536)}
    REQUIRED: ClassVar = ("re", "sessions")
    re: int = 0
    sessions: tuple = ()


@dataclass(frozen=True)
class Error(Message):
    """A request failed.  ``re`` is the request's ``seq`` (nil when the packet had none)."""

    TYPE: ClassVar[str] = "error"
    SCHEMA: ClassVar = {"re": _optional(_uint()), "code": _choice([c.value for c in ErrorCode]),
                        "field": _text(256), "message": _text(1024)}
    REQUIRED: ClassVar = ("code",)
    re: int | None = None
    code: str = "E_INTERNAL"
    field: str = ""
    message: str = ""


@dataclass(frozen=True)
class Goodbye(Message):
    """The daemon is closing this connection (shutdown, or after a fatal error)."""

    TYPE: ClassVar[str] = "goodbye"
    SCHEMA: ClassVar = {"reason": _text(1024)}
    reason: str = ""


def encode(msg: Message, *, max_bytes: int | None = None) -> tuple[bytes, tuple[int, ...]]:
    """(packet bytes, fds to attach).  Raises LocalProtocolError for an invalid or oversized message."""
    try:
        # round-trip through validation so we never send what the peer would refuse
        d = msg.to_wire()
        type(msg).from_wire(d, getattr(msg, "fds", ()))
    except _Bad as e:
        raise LocalProtocolError(e.code, e.field, e.message) from None
    data = msgpack.packb(d, use_bin_type=True)
    if max_bytes is not None and len(data) > max_bytes:
        raise LocalProtocolError(ErrorCode.E_INVAL, "message", f"{len(data)} bytes exceed the limit of {max_bytes}")
    return data, tuple(getattr(msg, "fds", ()))


_UNPACK_LIMITS = dict(raw=False, strict_map_key=True, use_list=True,
                      max_str_len=1 << 16, max_bin_len=1 << 16, max_array_len=1 << 16, max_map_len=1 << 12)


def _unpack(data: bytes):
    try:
        return msgpack.unpackb(data, **_UNPACK_LIMITS)
    except Exception as e:  # msgpack raises several types for malformed input
        raise RemoteProtocolError(ErrorCode.E_PROTO, "message", f"not a msgpack message ({type(e).__name__})") from None


def _from_obj(obj, fds: tuple[int, ...], path: str = "message") -> Message:
    if not isinstance(obj, dict):
        raise RemoteProtocolError(ErrorCode.E_PROTO, path, "not a msgpack map")
    t = obj.get("t")
    cls = MESSAGE_TYPES.get(t) if isinstance(t, str) else None
    if cls is None:
        raise RemoteProtocolError(ErrorCode.E_PROTO, "t", f"unknown message type {t!r}")
    if fds and not cls.TAKES_FDS:
        raise RemoteProtocolError(ErrorCode.E_PROTO, "fds", f"{t} takes no fds but {len(fds)} were attached")
    try:
        return cls.from_wire(obj, fds)
    except _Bad as e:
        raise RemoteProtocolError(e.code, e.field, e.message) from None
    except (TypeError, ValueError, OverflowError) as e:
        raise RemoteProtocolError(ErrorCode.E_INVAL, "message", str(e)) from None


def decode(data: bytes, fds: tuple[int, ...] = ()) -> Message:
    """A message from one packet.  Raises RemoteProtocolError naming the field.

    The fds stay the caller's: on an error the caller closes them.
    """
    return _from_obj(_unpack(data), fds)


def bundle(packets: Sequence[bytes]) -> bytes:
    """One packet holding several encoded messages (a msgpack array of their maps).

    Encoded messages are msgpack maps, so the bundle is the array's header and
    the messages' bytes as they are."""
    n = len(packets)
    if n < 16:
        head = bytes((0x90 | n,))
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        raise ValueError(f"a bundle holds at most 65535 messages, not {n}")
    return head + b"".join(packets)


def decode_packet(data: bytes, *, bundles: bool) -> list[Message]:
    """The messages of one fd-less packet from the daemon: one message, or (``bundles``: the
    client asked for them) a bundle of several.  Raises RemoteProtocolError naming the field."""
    obj = _unpack(data)
    if isinstance(obj, list):
        if not bundles:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "a bundle, but the hello did not ask for bundles")
        if not obj:
            raise RemoteProtocolError(ErrorCode.E_PROTO, "message", "an empty bundle")
        return [_from_obj(x, (), f"message[{i}]") for i, x in enumerate(obj)]
    return [_from_obj(obj, ())]


def peek(data: bytes, extra: tuple[str, ...] = ()) -> dict:
    """Best effort: the integer ``t``/``seq``/``session``/``index`` of a packet that failed
    validation, so the error can say which request or frame it answers.  ``extra`` names
    more integer fields to recover (the daemon asks for a bad submit's ``ref``/``dist`` so
    that it can still release them)."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False, max_str_len=1 << 16,
                              max_bin_len=1 << 16, max_array_len=1 << 16, max_map_len=1 << 12)
    except Exception:
        return {}
    if not isinstance(obj, dict):
        return {}
    out: dict[str, Any] = {}
    if isinstance(obj.get("t"), str):
        out["t"] = obj["t"]
    for key in ("seq", "session", "index", *extra):
        v = obj.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _U32:
            out[key] = v
    return out
