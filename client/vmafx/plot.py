"""``vmafxctl plot LOG... -o out.png|svg``: the per-frame curve of one or several score logs.

Reads libvmaf's or our logs (JSON, XML or CSV, told apart by content), draws the chosen
metric (``--metric``, default ``vmaf``) per frame, one line per log (a ladder on one
chart), and marks each log's mean, harmonic mean and 1st/5th percentile.  matplotlib is
the ``[plot]`` extra; it is imported only here.
"""

from __future__ import annotations

import os

from .stats import summary

__all__ = ["COMMAND", "read_log", "draw"]


def read_log(path: str) -> dict[int, dict[str, float]]:
    """{frame number: {metric: value}} from a JSON, XML or CSV log."""
    # the readers are imported here, not with the module: every vmafxctl command imports
    # this one (COMMAND, to build its parser), and xml.etree and csv cost ~5 ms of its start
    import csv
    import io
    import json
    import xml.etree.ElementTree as ET

    with open(path, encoding="utf-8") as f:
        text = f.read()
    head = text.lstrip()[:1]
    try:
        if head == "{":
            doc = json.loads(text)
            return {int(fr["frameNum"]): {k: v for k, v in fr["metrics"].items() if v is not None}
                    for fr in doc["frames"]}
        if head == "<":
            root = ET.fromstring(text)
            out = {}
            for fr in root.iter("frame"):
                attrs = dict(fr.attrib)
                idx = int(attrs.pop("frameNum"))
                out[idx] = {k: float(v) for k, v in attrs.items()}
            return out
        if text.startswith("Frame,"):
            rows = list(csv.reader(io.StringIO(text)))
            names = [n for n in rows[0][1:] if n]
            return {int(r[0]): {n: float(v) for n, v in zip(names, r[1:]) if v} for r in rows[1:] if r}
    except (ValueError, KeyError, TypeError, ET.ParseError) as e:
        raise ValueError(f"{path}: not a readable score log ({e})") from None
    raise ValueError(f"{path}: not a JSON, XML or CSV score log")


def draw(logs: list[str], out: str, metric: str = "vmaf", title: str | None = None) -> None:
    try:
        import matplotlib
    except ImportError:
        raise ValueError("plot needs matplotlib: pip install 'vmafxd[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=100)
    for i, path in enumerate(logs):
        frames = read_log(path)
        pts = sorted((n, m[metric]) for n, m in frames.items() if metric in m)
        if not pts:
            raise ValueError(f"{path}: has no metric {metric!r} (use --metric)")
        xs, ys = zip(*pts)
        s = summary(ys)
        label = os.path.splitext(os.path.basename(path))[0]
        line, = ax.plot(xs, ys, lw=1.4, label=f"{label}: mean {s['mean']:.2f}, hmean {s['harmonic_mean']:.2f}, "
                                              f"p5 {s['p5']:.2f}, p1 {s['p1']:.2f}")
        c = line.get_color()
        ax.axhline(s["mean"], color=c, lw=0.9, ls="--")
        ax.axhline(s["harmonic_mean"], color=c, lw=0.9, ls="-.")
        ax.axhline(s["p5"], color=c, lw=0.8, ls=":")
        ax.axhline(s["p1"], color=c, lw=0.8, ls=(0, (1, 4)))
    ax.set_xlabel("frame")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} per frame  (-- mean, -. harmonic mean, : 5th pct, .. 1st pct)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


class COMMAND:
    help = "draw the per-frame scores of one or several logs (needs the [plot] extra)"

    @staticmethod
    def add_arguments(p):
        p.add_argument("logs", nargs="+", metavar="LOG", help="score logs (JSON, XML or CSV; libvmaf's or ours)")
        p.add_argument("-o", "--output", required=True, help="the picture: .png or .svg")
        p.add_argument("--metric", default="vmaf", help="the metric to draw (default vmaf)")
        p.add_argument("--title", help="the chart's title")

    @staticmethod
    def run(args) -> int:
        if not args.output.lower().endswith((".png", ".svg", ".pdf")):
            from .score_cmd import CliError

            raise CliError(f"-o/--output {args.output}: expected a .png or .svg file name", 2)
        draw(args.logs, args.output, args.metric, args.title)
        return 0
