"""Packets of the vmafxd protocol: a message to bytes and fds, bytes and fds to a message.

:func:`encode` checks what we send as the peer will check it; :func:`decode` and
:func:`decode_packet` raise :class:`RemoteProtocolError` naming the field.  The
messages of every frame (a result, two ``released``)
go through written-out checks of the plain case first: the same checks as
``check_wire``'s for the values a daemon or a client makes, anything else the
general way (:mod:`.messages`).  Sans I/O: the standard library and msgpack.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import msgpack

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .messages import _U32, MESSAGE_TYPES, Message, Released, Result, _Bad, _new_object, _set_attr

__all__ = ["encode", "decode", "decode_packet", "bundle", "peek"]


def plain_u32s(*values) -> bool:
    """Every value is plainly an unsigned 32-bit integer (the fast paths' check;
    vmafxd/frame_packets.py writes the same out)."""
    for v in values:
        if type(v) is not int or not 0 <= v <= _U32:
            return False
    return True


def plain_metrics(metrics) -> bool:
    """``metrics`` is plainly what a result's check takes as it is: a dict of at most 4096
    str -> float or None (the fast paths' check; vmafxd/frame_packets.py writes the same out)."""
    if type(metrics) is not dict or len(metrics) > 4096:
        return False
    for k, v in metrics.items():
        if type(k) is not str or (v is not None and type(v) is not float):
            return False
    return True


def _released_map(msg: "Released") -> dict | None:
    """A released's wire map when every value is plainly what check_wire takes, else None."""
    if plain_u32s(msg.buffer, msg.session, msg.index) and (msg.role == "ref" or msg.role == "dist"):
        return {"t": "released", "buffer": msg.buffer, "session": msg.session, "index": msg.index,
                "role": msg.role}
    return None


def _result_map(msg: "Result") -> dict | None:
    """A result's wire map when every value is plainly what check_wire takes, else None."""
    if plain_u32s(msg.session, msg.index) and plain_metrics(msg.metrics):
        return {"t": "result", "session": msg.session, "index": msg.index, "metrics": msg.metrics}
    return None


#: The daemon's messages of every frame (a result, two released), checked written out: the
#: same checks as check_wire's for the values a daemon makes (ints, metric floats), the same
#: map as to_wire's; anything else (None) goes the general way, which names the field.
_PLAIN_MAPS: dict[type, Callable[[Any], dict | None]] = {Released: _released_map, Result: _result_map}


# The client's side: the messages it receives for every frame (three a frame), read without the
# dataclass __init__ (a frozen one sets each field through object.__setattr__).  The checks are
# check_wire's for the plain case: the map has exactly the message's fields, each plainly of its
# type; the map itself (the unpacker's own, less its "t") then becomes the message's attributes.
# Anything else returns None and goes the general way, which names the field.

def _released_read(d: dict) -> "Released | None":
    """A received released map whose values are plainly valid (else None: the general path)."""
    if len(d) == 5:
        b, s, i, r = d.get("buffer"), d.get("session"), d.get("index"), d.get("role")
        if (type(b) is int and type(s) is int and type(i) is int and 0 <= b <= _U32 and 0 <= s <= _U32
                and 0 <= i <= _U32 and (r == "ref" or r == "dist")):
            del d["t"]
            msg = _new_object(Released)
            _set_attr(msg, "__dict__", d)
            return msg
    return None


def _result_read(d: dict) -> "Result | None":
    """A received result map whose values are plainly valid (else None: the general path)."""
    if len(d) == 4:
        s, i, metrics = d.get("session"), d.get("index"), d.get("metrics")
        if (type(s) is int and type(i) is int and 0 <= s <= _U32 and 0 <= i <= _U32 and type(metrics) is dict
                and len(metrics) <= 4096):
            for k, v in metrics.items():  # plain_metrics's check, written out
                if type(k) is not str or (type(v) is not float and v is not None):
                    return None
            del d["t"]
            msg = _new_object(Result)  # its metrics: a fresh dict of the unpacker's
            _set_attr(msg, "__dict__", d)
            return msg
    return None


_PLAIN_READS: dict[type, Callable[[dict], Any]] = {Released: _released_read, Result: _result_read}
#: the same by wire type, for a bundle's messages
_PLAIN_READS_BY_TYPE: dict[str, Callable[[dict], Any]] = {cls.TYPE: read for cls, read in _PLAIN_READS.items()}


def encode(msg: Message, *, max_bytes: int | None = None) -> tuple[bytes, tuple[int, ...]]:
    """(packet bytes, fds to attach).  Raises LocalProtocolError for an invalid or oversized message."""
    plain = _PLAIN_MAPS.get(type(msg))
    d = plain(msg) if plain is not None else None
    if d is None:
        try:
            # checked as the peer will check it, so we never send what it would refuse
            d = msg.to_wire()
            msg.check_sendable(type(msg).check_wire(d))
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
    plain = _PLAIN_READS.get(cls)
    if plain is not None:
        msg = plain(obj)
        if msg is not None:
            return msg
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
        out: list[Message] = []
        reads = _PLAIN_READS_BY_TYPE
        for i, x in enumerate(obj):
            if type(x) is dict:
                t = x.get("t")
                read = reads.get(t) if type(t) is str else None
                if read is not None:
                    msg = read(x)
                    if msg is not None:
                        out.append(msg)
                        continue
            out.append(_from_obj(x, (), f"message[{i}]"))
        return out
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
