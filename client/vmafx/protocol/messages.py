"""The messages of the vmafxd protocol: each declared once, its fields' wire checks with it.

Every packet on the ``SOCK_SEQPACKET`` socket is one msgpack map
``{"t": TYPE, ...fields}``; some types carry file descriptors (SCM_RIGHTS),
which fields reference by index into the packet's fd array.  This module only
turns dicts into validated dataclasses and back (:mod:`.codec` turns them into
packets and back): it never touches a socket and imports nothing but the
standard library and the package's errors and limits (a test checks it).

Validation names the offending field (``planes[1].pitch``); the codec raises
it as :class:`RemoteProtocolError` for what the peer sent, or
:class:`LocalProtocolError` for what we were about to send.  Which problems
are fatal is decided by the code: ``E_PROTO`` (the packet is not a message
of this protocol at all) ends the connection; ``E_INVAL`` (a message of the
right shape with a wrong value) does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar

from .errors import ErrorCode
from .limits import MAX_FDS_PER_PACKET, MAX_FRAMES_PER_SUBMIT

__all__ = [
    "Message", "Request", "Reply", "MESSAGE_TYPES",
    "Hello", "HelloReply", "OpenSession", "SessionOpened", "CloseSession", "SessionClosed",
    "RegisterBuffer", "BufferRegistered", "UnregisterBuffer", "BufferUnregistered",
    "Submit", "SubmitMany", "SubmitFrame", "BadFrame", "Result", "ResultMany", "FrameError", "Released",
    "ReleasedMany", "Status", "StatusReply",
    "ListSessions", "SessionsReply", "ScoreFiles", "FilesFrames", "FilesScored", "Error", "Goodbye",
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
#: value types to_wire writes as they are (no to_wire lookup)
_PLAIN = frozenset({int, str, bool, float, bytes, dict, list})


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
                fd=_uint(MAX_FDS_PER_PACKET - 1)(v["fd"], f"{path}.fd"),
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
            return cls(kind, fd=_uint(MAX_FDS_PER_PACKET - 1)(v["fd"], f"{path}.fd"))
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


def _wire(check: Callable[[Any, str], Any], default: Any, *, required: bool = False) -> Any:
    """A message field, declared once: the check of its wire value, its default (what a map
    without it means; a ``{}`` default is a fresh dict per message) and whether the sender
    must put it in the map."""
    meta = {"check": check, "required": required}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


def _message(type_name: str, *, takes_fds: bool = False):
    """Declares a message class: a frozen dataclass whose ``_wire`` fields make its SCHEMA and
    REQUIRED, registered under its wire type ``t``."""

    def declare(cls: type["Message"]) -> type["Message"]:
        cls = dataclass(frozen=True)(cls)
        wired = [f for f in fields(cls) if "check" in f.metadata]
        cls.TYPE, cls.TAKES_FDS = type_name, takes_fds
        cls.SCHEMA = {f.name: f.metadata["check"] for f in wired}
        cls.REQUIRED = tuple(f.name for f in wired if f.metadata["required"])
        # what to_wire writes, found once per class (dataclasses.fields per message was measurable)
        cls.WIRE_FIELDS = tuple(f.name for f in fields(cls) if f.name != "fds")
        MESSAGE_TYPES[type_name] = cls
        return cls

    return declare


@dataclass(frozen=True)
class Message:
    TYPE: ClassVar[str] = ""
    #: field name -> checker; fields absent from the map take the dataclass default
    SCHEMA: ClassVar[dict[str, Callable]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    TAKES_FDS: ClassVar[bool] = False
    #: the fields to_wire writes, in declaration order (all but ``fds``)
    WIRE_FIELDS: ClassVar[tuple[str, ...]] = ()

    def fd_refs(self) -> list[tuple[str, int]]:
        """(field path, fd index) for every fd this message references."""
        return []

    def to_wire(self) -> dict:
        d: dict[str, Any] = {"t": self.TYPE}
        for name in self.WIRE_FIELDS:
            v = getattr(self, name)
            if v is None:
                continue
            cls = type(v)
            if cls is tuple:
                v = [x.to_wire() for x in v] if v and hasattr(v[0], "to_wire") else list(v)
            elif cls not in _PLAIN and hasattr(v, "to_wire"):
                v = v.to_wire()
            d[name] = v
        return d

    @classmethod
    def check_wire(cls, d: dict) -> dict[str, Any]:
        """The checked values of wire map ``d``'s fields (raises _Bad naming the field)."""
        kw: dict[str, Any] = {}
        schema = cls.SCHEMA
        for key in d:
            if key != "t" and key not in schema:
                raise _Bad(key, f"unknown field of {cls.TYPE}")
        for name in cls.REQUIRED:
            if name not in d:
                raise _Bad(name, f"missing from {cls.TYPE}")
        for name, v in d.items():
            if name != "t":
                kw[name] = schema[name](v, name)
        return kw

    @classmethod
    def from_wire(cls, d: dict, fds: tuple[int, ...] = ()) -> "Message":
        kw = cls.check_wire(d)
        if cls.TAKES_FDS:
            kw["fds"] = tuple(fds)
        msg = cls(**kw)
        msg.validate()
        return msg

    def check_sendable(self, checked: dict[str, Any]) -> None:
        """Before sending: ``checked`` is check_wire of our own wire map; the cross-field checks
        run on this message itself (no second message is built: this runs for every message sent)."""
        self.validate()

    def validate(self) -> None:
        """Cross-field checks; raise _Bad."""
        if not self.TAKES_FDS:
            return  # the fd checks below are all there is (and this runs for every message sent)
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
class Request(Message):
    """A message the client sends and the daemon answers: its ``seq`` comes back as the reply's
    (or the error's) ``re``."""

    seq: int = _wire(_uint(), 0, required=True)


@dataclass(frozen=True)
class Reply(Message):
    """The daemon's answer to a request: ``re`` is the request's ``seq``."""

    re: int = _wire(_uint(), 0, required=True)


@dataclass(frozen=True)
class _Failure(Message):
    """What an ``error`` and a ``frame_error`` both say: the code, the field it names, why."""

    code: str = _wire(_choice([c.value for c in ErrorCode]), "E_INTERNAL", required=True)
    field: str = _wire(_text(256), "")
    message: str = _wire(_text(1024), "")


@_message("hello")
class Hello(Request):
    version: int = _wire(_uint(), 0, required=True)
    client: str | None = _wire(_optional(_text(128)), None)
    #: the client reads bundles: packets holding several of the daemon's messages
    bundles: bool | None = _wire(_optional(_boolean), None)
    #: the client reads session_opened's max_frames_in_flight (an older client would refuse it)
    session_budgets: bool | None = _wire(_optional(_boolean), None)
    #: the client would send submit_many (several frames in one packet) if the daemon takes it
    submit_many: bool | None = _wire(_optional(_boolean), None)
    #: the client would send score_files (two open files, scored by the daemon) if the daemon takes it
    score_files: bool | None = _wire(_optional(_boolean), None)
    #: the client reads result_many and released_many (a run of frames' outcomes in one message)
    outcome_runs: bool | None = _wire(_optional(_boolean), None)


@_message("hello_reply")
class HelloReply(Reply):
    version: int = _wire(_uint(), 0, required=True)
    server: str = _wire(_text(128), "", required=True)
    limits: dict = _wire(_anymap, {}, required=True)
    lanes: tuple = _wire(_list_of(_anymap, 16), ())
    features: tuple = _wire(_list_of(_text(64), 256), ())
    models: tuple = _wire(_list_of(_text(64), 64), ())
    #: the daemon will bundle (only ever when the hello asked for it)
    bundles: bool | None = _wire(_optional(_boolean), None)
    #: the daemon takes submit_many from this client (only ever when the hello asked for it)
    submit_many: bool | None = _wire(_optional(_boolean), None)
    #: the daemon takes score_files from this client (only ever when the hello asked for it)
    score_files: bool | None = _wire(_optional(_boolean), None)
    #: the daemon sends runs of outcomes, result_many and released_many (only ever when the hello asked)
    outcome_runs: bool | None = _wire(_optional(_boolean), None)


#: the most characters of model JSON one open_session carries (all models together must also
#: fit in max_message_bytes, 64 KiB by default)
MODEL_TEXT_MAX = 60000


@_message("open_session")
class OpenSession(Request):
    models: tuple = _wire(_list_of(_text(4096), 16), ())
    features: tuple = _wire(_list_of(_text(1024), 64), ())
    width: int = _wire(_uint(), 0, required=True)
    height: int = _wire(_uint(), 0, required=True)
    pixel_format: str = _wire(_text(32), "", required=True)
    bitdepth: int = _wire(_uint(16), 8)
    lane: str = _wire(_choice(("auto", "cpu", "cuda", "hip")), "auto")
    device: int | None = _wire(_optional(_uint(255)), None)
    name: str | None = _wire(_optional(_text(128)), None)
    # models[i]'s JSON text when the client read it (a path= model): the daemon never opens
    # a client's path; bounded so the whole message stays under max_message_bytes
    model_texts: tuple = _wire(_list_of(_optional(_text(MODEL_TEXT_MAX)), 16), ())


@_message("session_opened")
class SessionOpened(Reply):
    session: int = _wire(_uint(), 0, required=True)
    lane: str = _wire(_text(16), "", required=True)
    device: int | None = _wire(_optional(_uint(255)), None)
    metrics: tuple = _wire(_list_of(_text(128), 4096), ())
    models: tuple = _wire(_list_of(_text(128), 64), ())
    #: frames of this session the daemon's byte budgets hold at once (when the client has no
    #: other frames in flight); sent only when the hello asked for session_budgets
    max_frames_in_flight: int | None = _wire(_optional(_uint()), None)


@_message("close_session")
class CloseSession(Request):
    session: int = _wire(_uint(), 0, required=True)


@_message("session_closed")
class SessionClosed(Message):
    """Sent after the last ``result``/``frame_error`` of the session: the pooled summary."""

    re: int | None = _wire(_optional(_uint()), None)
    session: int = _wire(_uint(), 0, required=True)
    frames: int = _wire(_uint(), 0, required=True)
    failed: int = _wire(_uint(), 0)
    pooled: dict = _wire(_anymap, {})
    aggregate: dict = _wire(_anymap, {})


@_message("register_buffer", takes_fds=True)
class RegisterBuffer(Request):
    kind: str = _wire(_choice(BUFFER_KINDS), "memfd", required=True)
    width: int = _wire(_uint(), 0, required=True)
    height: int = _wire(_uint(), 0, required=True)
    pixel_format: str = _wire(_text(32), "", required=True)
    bitdepth: int = _wire(_uint(16), 8)
    size: int = _wire(_uint(_I64 - 1), 0, required=True)
    #: DRM format modifier (0: DRM_FORMAT_MOD_LINEAR)
    modifier: int = _wire(_uint((1 << 64) - 1), 0)
    planes: tuple[Plane, ...] = _wire(_list_of(Plane.check, 4), (), required=True)
    flags: int = _wire(_uint(), 0)
    #: the GPU the memory lives on (GPU kinds)
    device: int | None = _wire(_optional(_uint(255)), None)
    #: a CUDA/HIP IPC memory handle (kind cuda_ipc/hip_ipc: no fd)
    handle: bytes | None = _wire(_optional(_binary(64)), None)
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


@_message("buffer_registered")
class BufferRegistered(Reply):
    buffer: int = _wire(_uint(), 0, required=True)
    zero_copy: bool = _wire(_boolean, True)


@_message("unregister_buffer")
class UnregisterBuffer(Request):
    buffer: int = _wire(_uint(), 0, required=True)


@_message("buffer_unregistered")
class BufferUnregistered(Reply):
    """Sent once no frame in flight references the buffer and the daemon has let go of it."""

    buffer: int = _wire(_uint(), 0, required=True)


@_message("submit", takes_fds=True)
class Submit(Message):
    """One frame: indices strictly increase within a session; no reply but its outcome."""

    session: int = _wire(_uint(), 0, required=True)
    index: int = _wire(_uint(), 0, required=True)
    ref: int = _wire(_uint(), 0, required=True)
    dist: int = _wire(_uint(), 0, required=True)
    ref_fence: Fence | None = _wire(_optional(Fence.check), None)
    dist_fence: Fence | None = _wire(_optional(Fence.check), None)
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


_FRAME_KEYS = frozenset({"index", "ref", "dist", "ref_fence", "dist_fence"})


_new_object = object.__new__
_set_attr = object.__setattr__


def _u32_or_none(v) -> int | None:
    return v if type(v) is int and 0 <= v <= _U32 else None


@dataclass(frozen=True)
class SubmitFrame:
    """One frame of a ``submit_many``: a submit's fields but its session."""

    index: int
    ref: int
    dist: int
    ref_fence: Fence | None = None
    dist_fence: Fence | None = None

    @classmethod
    def check(cls, v: dict, path: str) -> "SubmitFrame":
        # Written out, not through _uint(): it runs for every frame received, and the
        # field's path is only built when there is something wrong with it.
        for k in v:
            if k not in _FRAME_KEYS:
                raise _Bad(f"{path}.{k}", "unknown field")
        try:
            index, ref, dist = v["index"], v["ref"], v["dist"]
        except KeyError as e:
            raise _Bad(f"{path}.{e.args[0]}", "missing") from None
        for name, x in (("index", index), ("ref", ref), ("dist", dist)):
            if type(x) is not int or not 0 <= x <= _U32:
                _uint()(x, f"{path}.{name}")  # raises, naming the field
        rf, df = v.get("ref_fence"), v.get("dist_fence")
        if rf is not None:
            rf = Fence.check(rf, f"{path}.ref_fence")
        if df is not None:
            df = Fence.check(df, f"{path}.dist_fence")
        # What __init__ leaves, without it: a frozen dataclass's __init__ sets each field
        # through object.__setattr__, five calls for every frame received.
        frame = _new_object(cls)
        frame.__dict__.update(index=index, ref=ref, dist=dist, ref_fence=rf, dist_fence=df)
        return frame

    def to_wire(self) -> dict:
        d: dict[str, Any] = {"index": self.index, "ref": self.ref, "dist": self.dist}
        if self.ref_fence is not None:
            d["ref_fence"] = self.ref_fence.to_wire()
        if self.dist_fence is not None:
            d["dist_fence"] = self.dist_fence.to_wire()
        return d

    def fence_fds(self) -> list[tuple[str, int]]:
        """(role, fd index) of its fd fences."""
        out = []
        if self.ref_fence is not None and self.ref_fence.fd is not None:
            out.append(("ref_fence", self.ref_fence.fd))
        if self.dist_fence is not None and self.dist_fence.fd is not None:
            out.append(("dist_fence", self.dist_fence.fd))
        return out


@dataclass(frozen=True)
class BadFrame:
    """A frame of a received ``submit_many`` that did not decode, though its index did: the daemon
    answers it alone (a ``frame_error`` with this code and field, both buffers released when named)
    and goes on with the others.  Only ever decoded, never sent."""

    index: int
    ref: int | None
    dist: int | None
    code: ErrorCode
    field: str
    message: str
    #: fence fd indices it named (closed with the packet, unwaited)
    fds: tuple[int, ...] = ()

    def to_wire(self) -> dict:
        raise _Bad(self.field, self.message, self.code)


def _named_fence_fds(v: dict) -> tuple[int, ...]:
    """Best effort: the fd indices a bad frame's fences name (they count as referenced)."""
    out = []
    for role in ("ref_fence", "dist_fence"):
        f = v.get(role)
        if isinstance(f, dict) and type(f.get("fd")) is int and 0 <= f["fd"] < MAX_FDS_PER_PACKET:
            out.append(f["fd"])
    return tuple(out)


def _submit_frames(v, path):
    """``submit_many``'s frames: each a SubmitFrame, or a BadFrame answered on its own.  What
    leaves no frame answerable -- not a list, empty, too long, an entry that is no map or has
    no index -- is E_PROTO: the packet as a whole is not this protocol."""
    if not isinstance(v, list):
        raise _Bad(path, "expected a list of frames", ErrorCode.E_PROTO)
    if not v:
        raise _Bad(path, "no frames", ErrorCode.E_PROTO)
    if len(v) > MAX_FRAMES_PER_SUBMIT:
        raise _Bad(path, f"{len(v)} frames exceed {MAX_FRAMES_PER_SUBMIT}", ErrorCode.E_PROTO)
    out: list[SubmitFrame | BadFrame] = []
    used: set[int] = set()
    for i, x in enumerate(v):
        if type(x) is dict and len(x) == 3:
            # The common frame, written out: exactly index, ref and dist, each plainly a u32 (no
            # fences, so no fd to count).  Its checked map becomes the frame's own attributes (the
            # fences are the class's None); anything else takes SubmitFrame.check, which names it.
            index, ref, dist = x.get("index"), x.get("ref"), x.get("dist")
            if (type(index) is int and type(ref) is int and type(dist) is int
                    and 0 <= index <= _U32 and 0 <= ref <= _U32 and 0 <= dist <= _U32):
                frame = _new_object(SubmitFrame)
                _set_attr(frame, "__dict__", x)
                out.append(frame)
                continue
        if not isinstance(x, dict):
            raise _Bad(f"{path}[{i}]", "expected a map with index, ref and dist", ErrorCode.E_PROTO)
        index = _u32_or_none(x.get("index"))
        if index is None:
            raise _Bad(f"{path}[{i}].index", "missing or not an unsigned 32-bit integer: the frame cannot be "
                                             "answered", ErrorCode.E_PROTO)
        try:
            frame = SubmitFrame.check(x, f"{path}[{i}]")
            for role, fd in frame.fence_fds():
                if fd in used:
                    raise _Bad(f"{path}[{i}].{role}.fd", f"fd {fd} is already another fence's (each fence fd "
                                                        f"is consumed)")
                used.add(fd)
        except _Bad as e:
            out.append(BadFrame(index, _u32_or_none(x.get("ref")), _u32_or_none(x.get("dist")), e.code, e.field,
                                e.message, _named_fence_fds(x)))
            continue
        out.append(frame)
    return tuple(out)


@_message("submit_many", takes_fds=True)
class SubmitMany(Message):
    """Several frames of one session in one packet (a client whose hello asked, and the daemon said
    yes).  Each frame is answered as if it came in a ``submit`` of its own, in the list's order;
    its fence fds are the packet's, by index."""

    session: int = _wire(_uint(), 0, required=True)
    frames: tuple = _wire(_submit_frames, (), required=True)
    fds: tuple[int, ...] = ()

    def fd_refs(self):
        out = []
        for i, f in enumerate(self.frames):
            if type(f) is SubmitFrame:
                out += [(f"frames[{i}].{role}.fd", fd) for role, fd in f.fence_fds()]
            else:
                out += [(f"frames[{i}]", fd) for fd in f.fds]
        return out

    def validate(self):
        if not self.fds:  # the common case: no fences at all, nothing to match
            for f in self.frames:
                if type(f) is BadFrame:
                    if f.fds:
                        break
                elif f.ref_fence is not None or f.dist_fence is not None:
                    break
            else:
                return
        super().validate()

    @classmethod
    def check_wire(cls, d):
        # A bad frame is answered alone (a BadFrame); what escapes is the packet's own shape,
        # which leaves no frame of it answerable: not this protocol.
        try:
            return super().check_wire(d)
        except _Bad as e:
            raise _Bad(e.field, e.message, ErrorCode.E_PROTO) from None

    def check_sendable(self, checked):
        for f in checked["frames"]:
            if type(f) is BadFrame:
                raise _Bad(f.field, f.message, f.code)
        self.validate()


@_message("result")
class Result(Message):
    session: int = _wire(_uint(), 0, required=True)
    index: int = _wire(_uint(), 0, required=True)
    metrics: dict = _wire(_metrics, {}, required=True)


#: the most frames one ``result_many`` or ``released_many`` names (a run is also bounded by
#: max_message_bytes: the daemon splits longer runs)
MAX_FRAMES_PER_RUN = 1024


def _u32_run(what: str, whats: str, least: int) -> Callable[[Any, str], tuple[int, ...]]:
    """A run's column of u32 (frame indices, buffer ids), at least ``least`` of them."""
    def check(v, path):
        if type(v) is not list or not least <= len(v) <= MAX_FRAMES_PER_RUN:
            raise _Bad(path, f"expected a list of {least}..{MAX_FRAMES_PER_RUN} {whats}")
        for x in v:
            if type(x) is not int or not 0 <= x <= _U32:
                raise _Bad(path, f"{x!r} is not a {what} (an unsigned 32-bit integer)")
        return tuple(v)
    return check


_run_indices = _u32_run("frame index", "frame indices", 1)
_u32_column = _u32_run("buffer id", "buffer ids", 0)


def _metric_columns(v, path):
    """Metric name -> one value a frame of the run (a number or nil)."""
    if type(v) is not dict or len(v) > 4096:
        raise _Bad(path, "expected a map of metric names to lists of numbers")
    out = {}
    for k, col in v.items():
        if type(k) is not str:
            raise _Bad(path, "metric names must be strings")
        if type(col) is not list:
            raise _Bad(f"{path}.{k}", "expected a list of numbers or nil, one a frame")
        for x in col:
            if type(x) is not float and x is not None:
                if isinstance(x, bool) or not isinstance(x, int):
                    raise _Bad(f"{path}.{k}", "expected numbers or nil")
                col = [None if y is None else float(y) for y in col]
                break
        out[k] = col
    return out


@_message("result_many")
class ResultMany(Message):
    """The results of a run of frames of one session, in order: for each ``k`` what a ``result`` of
    frame ``indices[k]`` says, its metrics each name's ``k``-th value.  The daemon sends it only to
    a client whose hello asked for ``outcome_runs``."""

    session: int = _wire(_uint(), 0, required=True)
    indices: tuple = _wire(_run_indices, (), required=True)
    metrics: dict = _wire(_metric_columns, {}, required=True)

    def validate(self):
        n = len(self.indices)
        for k, col in self.metrics.items():
            if len(col) != n:
                raise _Bad(f"metrics.{k}", f"{len(col)} values for {n} frames")

    def frames(self) -> list[tuple[int, dict[str, float | None]]]:
        """Each frame's (index, metrics), in order."""
        names = tuple(self.metrics)
        rows = zip(*self.metrics.values()) if names else ((),) * len(self.indices)
        return [(i, dict(zip(names, row))) for i, row in zip(self.indices, rows)]

    def results(self) -> list["Result"]:
        """The run as the ``result`` messages it stands for."""
        return [Result(session=self.session, index=i, metrics=mt) for i, mt in self.frames()]


@_message("frame_error")
class FrameError(_Failure):
    session: int = _wire(_uint(), 0, required=True)
    index: int = _wire(_uint(), 0, required=True)


@_message("released")
class Released(Message):
    """The producer may reuse ``buffer`` as far as frame ``index`` of ``session`` (``role``) is concerned."""

    buffer: int = _wire(_uint(), 0, required=True)
    session: int = _wire(_uint(), 0, required=True)
    index: int = _wire(_uint(), 0, required=True)
    role: str = _wire(_choice(("ref", "dist")), "ref", required=True)


@_message("released_many")
class ReleasedMany(Message):
    """Both buffers of a run of frames of one session released: for each ``k``, a ``released`` of
    buffer ``ref[k]`` (role ref), then of ``dist[k]`` (role dist), for frame ``indices[k]``.  The
    daemon sends it only to a client whose hello asked for ``outcome_runs``."""

    session: int = _wire(_uint(), 0, required=True)
    indices: tuple = _wire(_run_indices, (), required=True)
    ref: tuple = _wire(_u32_column, (), required=True)
    dist: tuple = _wire(_u32_column, (), required=True)

    def validate(self):
        n = len(self.indices)
        for name in ("ref", "dist"):
            if len(getattr(self, name)) != n:
                raise _Bad(name, f"{len(getattr(self, name))} buffers for {n} frames")

    def released(self) -> list[Released]:
        """The run as the ``released`` messages it stands for, in order."""
        s = self.session
        out = []
        for i, r, d in zip(self.indices, self.ref, self.dist):
            out += [Released(buffer=r, session=s, index=i, role="ref"),
                    Released(buffer=d, session=s, index=i, role="dist")]
        return out


@_message("status")
class Status(Request):
    """Asks for the daemon's status (a ``status_reply`` answers)."""


@_message("status_reply")
class StatusReply(Reply):
    status: dict = _wire(_anymap, {}, required=True)


@_message("list_sessions")
class ListSessions(Request):
    """Asks for the daemon's sessions (a ``sessions_reply`` answers)."""


@_message("sessions_reply")
class SessionsReply(Reply):
    sessions: tuple = _wire(_list_of(_anymap, 65536), (), required=True)


@_message("score_files", takes_fds=True)
class ScoreFiles(Request):
    """Score two uncompressed files (y4m, or raw when ``width`` .. ``pixel_format`` say its
    geometry) that the client opened: their fds ride with this request (``reference`` and
    ``distorted`` are indices into them), never a path, so the daemon reads only what the
    client could.  The daemon reads them itself, from their first frame, until either ends
    or ``max_frames``; ``files_frames`` bring the frames' metrics in order, then
    ``files_scored`` answers.  ``models``/``features``/``model_texts`` as in open_session."""

    reference: int = _wire(_uint(255), 0, required=True)
    distorted: int = _wire(_uint(255), 0, required=True)
    models: tuple = _wire(_list_of(_text(4096), 16), ())
    features: tuple = _wire(_list_of(_text(1024), 64), ())
    model_texts: tuple = _wire(_list_of(_optional(_text(MODEL_TEXT_MAX)), 16), ())
    lane: str = _wire(_choice(("auto", "cpu", "cuda", "hip")), "auto")
    device: int | None = _wire(_optional(_uint(255)), None)
    width: int | None = _wire(_optional(_uint()), None)
    height: int | None = _wire(_optional(_uint()), None)
    pixel_format: str | None = _wire(_optional(_text(32)), None)
    bitdepth: int | None = _wire(_optional(_uint(16)), None)
    max_frames: int | None = _wire(_optional(_uint()), None)
    fds: tuple[int, ...] = ()

    def fd_refs(self):
        return [("reference", self.reference), ("distorted", self.distorted)]

    def validate(self):
        if self.reference == self.distorted:
            raise _Bad("distorted", "the reference and the distorted file need an fd each")
        raw = [f for f in ("width", "height", "pixel_format") if getattr(self, f) is not None]
        if raw and len(raw) < 3:
            missing = [f for f in ("width", "height", "pixel_format") if getattr(self, f) is None]
            raise _Bad(missing[0], "raw files need width, height and pixel_format")
        super().validate()


@_message("files_frames")
class FilesFrames(Message):
    """Metrics of consecutive frames of a ``score_files`` (``re``), from frame ``first`` on."""

    re: int = _wire(_uint(), 0, required=True)
    first: int = _wire(_uint(), 0, required=True)
    frames: tuple = _wire(_list_of(_metrics, 4096), (), required=True)


@_message("files_scored")
class FilesScored(Reply):
    """A ``score_files`` is done: ``frames`` scored (every ``files_frames`` came before this).
    ``reference_ended``/``distorted_ended``: that file has no frame after the last scored."""

    frames: int = _wire(_uint(), 0, required=True)
    lane: str = _wire(_text(16), "", required=True)
    width: int = _wire(_uint(), 0)
    height: int = _wire(_uint(), 0)
    models: tuple = _wire(_list_of(_text(128), 64), ())
    pooled: dict = _wire(_anymap, {})
    aggregate: dict = _wire(_anymap, {})
    reference_ended: bool = _wire(_boolean, True)
    distorted_ended: bool = _wire(_boolean, True)


@_message("error")
class Error(_Failure):
    """A request failed.  ``re`` is the request's ``seq`` (nil when the packet had none)."""

    re: int | None = _wire(_optional(_uint()), None)


@_message("goodbye")
class Goodbye(Message):
    """The daemon is closing this connection (shutdown, or after a fatal error)."""

    reason: str = _wire(_text(1024), "")
