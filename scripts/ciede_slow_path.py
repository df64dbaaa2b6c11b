"""Which of bench_gpu.py's frames take ciede's slow path on a GPU lane, and their scores.

    python3 scripts/ciede_slow_path.py 3840x2160 [--lane cuda|hip|emu]

Scores bench_gpu.py's two frames of that size (its sample scaled, noise added) in one batch
and prints how many went through the device's raster-order sum (``_sequential_totals``:
the exact fixed-point sum refused) and how many through the host (the list of doubtful
pixels ran out of room), then each frame's ciede2000.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "scripts")]

from bench_gpu import device_frames  # noqa: E402
from vmafx.formats import Subsampling  # noqa: E402
from vmafxd.core.scoring import ScoringPlan, parse_feature_spec  # noqa: E402
from vmafxd.lanes.gpu import ciede as gpu_ciede  # noqa: E402
from vmafxd.lanes.gpu.engine import GpuFrame, GpuScorer, KernelSet  # noqa: E402

BINDINGS = {"cuda": "cuda", "hip": "hip", "emu": "emulated"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", help="WxH")
    ap.add_argument("--lane", default="cuda", choices=sorted(BINDINGS))
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.lower().split("x"))
    paths = {"device": 0, "host": 0}
    on_device, on_host = gpu_ciede.GpuCiede._sequential_totals, gpu_ciede.GpuCiede._slow_total

    def device(self, diffs, frames, listed):
        paths["device"] += len(frames)
        return on_device(self, diffs, frames, listed)

    def host(self, diffs, kept, frame):
        paths["host"] += 1
        return on_host(self, diffs, kept, frame)

    gpu_ciede.GpuCiede._sequential_totals = device
    gpu_ciede.GpuCiede._slow_total = host
    rt = importlib.import_module(f"vmafxd.lanes.{BINDINGS[args.lane]}").load()
    dev = rt.device(0)
    dev.make_current()
    stream = dev.create_stream()
    kernels = KernelSet(rt, dev, rt.compile_options)
    plan = ScoringPlan.build([], [parse_feature_spec("ciede")])
    scorer = GpuScorer(dev, kernels, stream, plan, w, h, 8, Subsampling.S420, max_batch=2)
    frames = [GpuFrame(*pair) for pair in device_frames(dev, stream, w, h)]
    batch = scorer.enqueue(frames)
    batch.done.synchronize()
    scores = scorer.complete(batch)
    print(f"{w}x{h} on {args.lane}: {len(frames)} frames, slow path through the device sum "
          f"{paths['device']}, through the host {paths['host']}")
    for seq, metrics in scores:
        print(f"  frame {seq}: ciede2000 {metrics['ciede2000']!r}")


if __name__ == "__main__":
    main()
