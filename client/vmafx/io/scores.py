"""Score logs in libvmaf's layouts (JSON, XML, CSV, SUB), with the same keys.

Numbers print as libvmaf's ``output.c`` prints them: ``%.6f``, or ``%.16f``
when seven or more zeros follow the decimal point (so ``60.00000000000001``
and ``1.0000002377970294`` keep their tails); non-finite values are ``null``.
"""

from __future__ import annotations

import math

__all__ = ["format_score", "count_leading_zeros", "write_json", "write_xml", "write_csv", "write_sub", "WRITERS"]


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
    if count_leading_zeros(value) <= 6:
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


def write_json(out, frames, pooled, aggregate=None, *, version: str, fps: float | None = None) -> None:
    """libvmaf's JSON log: version, fps, frames[].frameNum/metrics, pooled_metrics, aggregate_metrics."""
    w = out.write
    w("{\n")
    w(f'  "version": "{version}",\n')
    if fps is None or not math.isfinite(fps):
        w('  "fps": null,\n')
    else:
        w(f'  "fps": {fps:.2f},\n')
    w('  "frames": [')
    for i, (idx, metrics) in enumerate(frames):
        w(",\n" if i > 0 else "\n")
        w("    {\n")
        w(f'      "frameNum": {idx},\n')
        w('      "metrics": {\n')
        items = list(metrics.items())
        for j, (name, value) in enumerate(items):
            w(f'        "{name}": {format_score(value)}{"," if j < len(items) - 1 else ""}\n')
        w("      }\n")
        w("    }")
    w("\n  ],\n")
    w('  "pooled_metrics": {')
    for i, (name, methods) in enumerate(pooled.items()):
        w(",\n" if i > 0 else "\n")
        w(f'    "{name}": {{')
        for j, m in enumerate(("min", "max", "mean", "harmonic_mean")):
            if m in methods:
                w(",\n" if j > 0 else "\n")
                w(f'      "{m}": {format_score(methods[m])}')
        w("\n    }")
    w("\n  },\n")
    w('  "aggregate_metrics": {')
    agg = list((aggregate or {}).items())
    for i, (name, value) in enumerate(agg):
        w(f'\n    "{name}": {format_score(value)}{"," if i < len(agg) - 1 else ""}')
    w("\n  }\n")
    w("}\n")


def _xml_attr(value: float | None) -> str:
    return format_score(value)


def write_xml(out, frames, pooled, aggregate=None, *, version: str, width: int, height: int, fps: float | None = None) -> None:
    """libvmaf's XML log."""
    w = out.write
    w(f'<VMAF version="{version}">\n')
    w(f'  <params qualityWidth="{width}" qualityHeight="{height}" />\n')
    w(f'  <fyi fps="{(fps or 0.0):.2f}" />\n')
    w("  <frames>\n")
    for idx, metrics in frames:
        attrs = "".join(f'{n}="{_xml_attr(v)}" ' for n, v in metrics.items())
        w(f'    <frame frameNum="{idx}" {attrs}/>\n')
    w("  </frames>\n")
    w("  <pooled_metrics>\n")
    for name, methods in pooled.items():
        attrs = "".join(f'{m}="{_xml_attr(methods[m])}" ' for m in ("min", "max", "mean", "harmonic_mean") if m in methods)
        w(f'    <metric name="{name}" {attrs}/>\n')
    w("  </pooled_metrics>\n")
    attrs = "".join(f'{n}="{_xml_attr(v)}" ' for n, v in (aggregate or {}).items())
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
