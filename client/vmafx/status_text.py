"""Human-readable ``vmafxctl status`` and ``vmafxctl sessions``.

The daemon's ``status_reply`` is a map (docs/protocol.md); the well-known
keys are shown first, in a fixed order and with labels, and any key this
version of the client does not know is still shown after them, so a newer
daemon's additions are never hidden.  ``--json`` prints the map itself.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["format_status", "format_sessions"]

#: (key, label) of the status fields shown first, in this order
_KNOWN = (
    ("server", "server"),
    ("version", "version"),
    ("protocol", "protocol"),
    ("uptime_s", "uptime"),
    ("stopping", "stopping"),
    ("clients", "clients"),
    ("sessions", "sessions"),
    ("frames_scored", "frames scored"),
    ("frames_failed", "frames failed"),
    ("frames_in_flight", "frames in flight"),
    ("pending_releases", "pending releases"),
    ("host_copies", "host copies"),
    ("buffers", "buffers"),
)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_value(x) for x in v) if v else "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items()) if v else "-"
    if v is None:
        return "-"
    return str(v)


def _uptime(seconds: float) -> str:
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}d " if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def _device_text(d: Any) -> str:
    if not isinstance(d, dict):
        return str(d)
    name = d.get("name") or d.get("model") or ""
    idx = d.get("index", d.get("device", d.get("id")))
    extra = {k: v for k, v in d.items() if k not in ("name", "model", "index", "device", "id")}
    head = f"{idx}: {name}".strip(": ") if idx is not None else name or "device"
    return head + (f" ({_value(extra)})" if extra else "")


def _lanes_lines(lanes: Any) -> list[str]:
    lines = []
    if isinstance(lanes, dict):
        lanes = [dict(lane=k, **(v if isinstance(v, dict) else {"devices": v})) for k, v in lanes.items()]
    for lane in lanes or ():
        if not isinstance(lane, dict):
            lines.append(f"  {lane}")
            continue
        name = lane.get("lane", "?")
        devices = lane.get("devices") or []
        rest = {k: v for k, v in lane.items() if k not in ("lane", "devices")}
        suffix = f" ({_value(rest)})" if rest else ""
        if not devices:
            lines.append(f"  {name}{suffix}")
        for d in devices:
            lines.append(f"  {name}  {_device_text(d)}{suffix}")
    return lines or ["  (none)"]


def format_status(status: dict, info=None) -> str:
    """The status map as aligned ``label: value`` lines, lanes and devices listed below."""
    rows: list[tuple[str, str]] = []
    if info is not None and "server" not in status:
        rows.append(("server", f"{info.server} (protocol {info.version})"))
    shown = {"lanes"}
    for key, label in _KNOWN:
        if key in status:
            v = status[key]
            rows.append((label, _uptime(v) if key == "uptime_s" and isinstance(v, (int, float)) else _value(v)))
            shown.add(key)
    for key in sorted(k for k in status if k not in shown):
        rows.append((key.replace("_", " "), _value(status[key])))
    width = max((len(label) for label, _ in rows), default=0)
    out = [f"{label + ':':<{width + 1}} {value}" for label, value in rows]
    lanes = status.get("lanes", info.lanes if info is not None else None)
    out.append("lanes:")
    out.extend(_lanes_lines(lanes))
    return "\n".join(out) + "\n"


#: session columns shown first (others follow)
_SESSION_COLUMNS = ("session", "client", "name", "lane", "device", "width", "height", "pixel_format",
                    "bitdepth", "models", "state", "submitted", "scored", "failed", "in_flight")


def format_sessions(sessions: Sequence[dict]) -> str:
    """One row per open session, columns aligned; "no open sessions" when there are none."""
    if not sessions:
        return "no open sessions\n"
    keys = [k for k in _SESSION_COLUMNS if any(k in s for s in sessions)]
    keys += sorted({k for s in sessions for k in s} - set(keys))
    table = [[k.replace("_", " ") for k in keys]] + [[_value(s.get(k)) for k in keys] for s in sessions]
    widths = [max(len(row[i]) for row in table) for i in range(len(keys))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in table)
