"""Score logs in libvmaf's layouts (JSON, XML, CSV, SUB), with the same keys.

Numbers print as libvmaf's ``output.c`` prints them: ``%.6f``, or ``%.16f``
when seven or more zeros follow the decimal point (so ``60.00000000000001``
and ``1.0000002377970294`` keep their tails); non-finite values are ``null``.
"""

from __future__ import annotations

import json
import math

__all__ = ["format_score", "count_leading_zeros", "write_json", "write_xml", "write_csv", "write_sub", "WRITERS",
           "LIBVMAF_VERSION", "log_version", "in_collector_order", "subsampled"]

#: the libvmaf commit whose numbers vmafxd reproduces (``vmaf --version`` of that build)
LIBVMAF_VERSION = "f85a8536"


def log_version(ours: str) -> str:
    """The ``version`` of our logs: ``<vmafx version>+libvmaf.<libvmaf version>`` (PEP 440 local form).

    libvmaf writes ``vmaf_version()`` there (``f85a8536``); a parser that wants the
    libvmaf version takes what follows ``+libvmaf.``.
    """
    return f"{ours}+libvmaf.{LIBVMAF_VERSION}"


def in_collector_order(frames, pooled, order):
    """Frames and pooled metrics with their keys in ``order`` (libvmaf's feature-collector order).

    Names not in ``order`` keep their relative order and follow it (model outputs, which
    libvmaf appends after every feature, since it predicts once extraction is done).
    """
    rank = {n: i for i, n in enumerate(order)}
    seen: dict[str, int] = {}
    for _, m in frames:
        for n in m:
            seen.setdefault(n, len(seen))
    for n in pooled:
        seen.setdefault(n, len(seen))
    big = len(rank)
    key = lambda n: (rank.get(n, big), seen.get(n, 0))  # noqa: E731
    orders: dict[tuple, list[str]] = {}  # a frame's names in order, by the names as they come (few kinds a log)
    out_frames = []
    for i, m in frames:
        names = tuple(m)
        ordered = orders.get(names)
        if ordered is None:
            ordered = sorted(names, key=key)
            orders[names] = ordered = None if tuple(ordered) == names else ordered  # None: already in order
        out_frames.append((i, m if ordered is None else {n: m[n] for n in ordered}))
    out_pooled = {n: pooled[n] for n in sorted(pooled, key=key)}
    return out_frames, out_pooled


def subsampled(frames, n: int):
    """libvmaf's ``--subsample N``: only frames whose index is a multiple of N are logged."""
    if n is None or n <= 1:
        return frames
    return [(i, m) for i, m in frames if i % n == 0]


def count_leading_zeros(x: float) -> int:
    """libvmaf's ``count_leading_zeros_d``: zeros after the point before the first digit."""
    x = abs(x)
    frac = x - int(x)
    n = 0
    while frac < 1.0 and frac != 0:
        frac *= 10
        n += 1
    return n


def format_score(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    frac = abs(value) % 1.0
    # count_leading_zeros is a loop of multiplications; it can only pass 6 when the fraction
    # is below 10^-6 (from 10^-4 up it stops within five steps whatever their rounding), so
    # the common case skips it
    if frac == 0.0 or frac >= 1e-4 or count_leading_zeros(value) <= 6:
        return "%.6f" % value
    return "%.16f" % value


def _metric_names(frames) -> list[str]:
    names: list[str] = []
    seen = set()
    for _, metrics in frames:
        for n in metrics:
            if n not in seen:
                seen.add(n)
                names.append(n)
    return names


_JS_CACHE: dict[str, str] = {}


def _js(text: str) -> str:
    # A JSON string: libvmaf's plain names come out as libvmaf writes them; others stay valid JSON.
    # Cached: a log repeats the same few names on every frame.
    found = _JS_CACHE.get(text)
    if found is None:
        found = json.dumps(str(text), ensure_ascii=False)
        if len(_JS_CACHE) < 4096:
            _JS_CACHE[text] = found
    return found


def _frame_template(names: tuple) -> str:
    """A JSON log's frame whose every value is a number, as a %-template of (separator, frame
    number, the values' texts): what write_json writes value by value, in one piece."""
    lines = ",\n".join(f"        {_js(n).replace('%', '%%')}: %s" for n in names)
    return '%s    {\n      "frameNum": %d,\n      "metrics": {\n' + lines + ("\n" if names else "") + "      }\n    }"


def write_json(out, frames, pooled, aggregate=None, *, version: str, fps: float | None = None) -> None:
    """libvmaf's JSON log: version, fps, frames[].frameNum/metrics, pooled_metrics, aggregate_metrics."""
    w = out.write
    w("{\n")
    w(f'  "version": {_js(version)},\n')
    if fps is None or not math.isfinite(fps):
        w('  "fps": null,\n')
    else:
        w(f'  "fps": {fps:.2f},\n')
    w('  "frames": [')
    templates: dict[tuple, str] = {}  # a frame's text with its values left out, by its metric names
    for i, (idx, metrics) in enumerate(frames):
        texts = [format_score(v) for v in metrics.values()]
        if "null" not in texts:
            names = tuple(metrics)
            template = templates.get(names)
            if template is None:
                template = templates[names] = _frame_template(names)
            w(template % (",\n" if i > 0 else "\n", idx, *texts))
            continue
        parts = [",\n" if i > 0 else "\n", f'    {{\n      "frameNum": {idx},\n      "metrics": {{\n']
        last = len(metrics) - 1
        for j, (name, text) in enumerate(zip(metrics, texts)):
            # output.c writes a non-finite per-frame value as null *without* the newline.
            parts.append(f'        {_js(name)}: {text}{"," if j < last else ""}{"" if text == "null" else chr(10)}')
        parts.append("      }\n    }")
        w("".join(parts))
    w("\n  ],\n")
    w('  "pooled_metrics": {')
    for i, (name, methods) in enumerate(pooled.items()):
        w(",\n" if i > 0 else "\n")
        w(f'    {_js(name)}: {{')
        for j, m in enumerate(("min", "max", "mean", "harmonic_mean")):
            if m in methods:
                w(",\n" if j > 0 else "\n")
                w(f'      "{m}": {format_score(methods[m])}')
        w("\n    }")
    w("\n  },\n")
    w('  "aggregate_metrics": {')
    agg = list((aggregate or {}).items())
    for i, (name, value) in enumerate(agg):
        w(f'\n    {_js(name)}: {format_score(value)}{"," if i < len(agg) - 1 else ""}')
    w("\n  }\n")
    w("}\n")


def _xml_attr(value: float | None) -> str:
    # output.c prints non-finite values with %f (``nan``/``inf``); XML has no null.
    if value is None:
        return "nan"
    if not math.isfinite(value):
        return ("-" if value < 0 else "") + ("inf" if math.isinf(value) else "nan")
    return format_score(value)


def _q(text) -> str:
    """An XML attribute value, quoted and escaped (names come from models and options)."""
    # imported here: xml.sax.saxutils imports urllib.request (http, email, ssl: ~20 ms),
    # which every ``vmafxctl score`` would pay while only an XML log needs it
    from xml.sax.saxutils import quoteattr

    return quoteattr(str(text))


def _xml_name(name: str) -> str:
    """A metric name used as an XML attribute name: libvmaf's names are already valid
    (letters, digits, ``_``); anything else (a model ``name=`` with odd characters) is
    replaced by ``_`` so the document stays well-formed."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "_-.")) else "_" for c in name)
    return out if out and (out[0].isalpha() or out[0] == "_") else "_" + out


def write_xml(out, frames, pooled, aggregate=None, *, version: str, width: int, height: int, fps: float | None = None) -> None:
    """libvmaf's XML log."""
    w = out.write
    w(f'<VMAF version={_q(version)}>\n')
    w(f'  <params qualityWidth="{width}" qualityHeight="{height}" />\n')
    w(f'  <fyi fps="{(fps or 0.0):.2f}" />\n')
    w("  <frames>\n")
    for idx, metrics in frames:
        attrs = "".join(f'{_xml_name(n)}="{_xml_attr(v)}" ' for n, v in metrics.items())
        w(f'    <frame frameNum="{idx}" {attrs}/>\n')
    w("  </frames>\n")
    w("  <pooled_metrics>\n")
    for name, methods in pooled.items():
        attrs = "".join(f'{m}="{_xml_attr(methods[m])}" ' for m in ("min", "max", "mean", "harmonic_mean") if m in methods)
        w(f'    <metric name={_q(name)} {attrs}/>\n')
    w("  </pooled_metrics>\n")
    attrs = "".join(f'{_xml_name(n)}="{_xml_attr(v)}" ' for n, v in (aggregate or {}).items())
    w(f"  <aggregate_metrics {attrs}/>\n")
    w("</VMAF>\n")


def write_csv(out, frames, pooled=None, aggregate=None, **_ignored) -> None:
    """libvmaf's CSV log: ``Frame,name,...`` then one row a frame (trailing commas as libvmaf)."""
    names = _metric_names(frames)
    out.write("Frame," + "".join(f"{n}," for n in names) + "\n")
    for idx, metrics in frames:
        out.write(f"{idx}," + "".join(f"{format_score(metrics[n])}," for n in names if n in metrics) + "\n")


def write_sub(out, frames, pooled=None, aggregate=None, **_ignored) -> None:
    """libvmaf's SUB (MicroDVD subtitle) log."""
    for idx, metrics in frames:
        body = "".join(f"{n}: {format_score(v)}|" for n, v in metrics.items())
        out.write(f"{{{idx}}}{{{idx + 1}}}frame: {idx}|{body}\n")


WRITERS = {"json": write_json, "xml": write_xml, "csv": write_csv, "sub": write_sub}
