#!/usr/bin/env python3
"""Compare the GPU engine with the CPU lane on the reference pairs (quick check, prints a table).

    python3 scripts/gpu_engine_check.py [feature ...]     (default: psnr motion vif)
"""

import sys
import time

import _checkout  # noqa: F401  (this tree first on sys.path)

from tests.lanes.test_gpu_engine import _differences, cpu_scores, gpu_scores  # noqa: E402
from tests.reference import full_pairs, vendored_pairs  # noqa: E402
from vmafxd.core.scoring import FeatureRequest, ScoringPlan  # noqa: E402


def main() -> int:
    feats = sys.argv[1:] or ["psnr", "motion", "vif"]
    from vmafxd.lanes import cuda

    rt = cuda.load()
    dev = rt.device(0)
    plan = ScoringPlan.build([], [FeatureRequest(f, {"debug": "true"} if f in ("vif", "adm", "motion", "float_vif", "float_adm", "float_motion") else {})
                                  for f in feats])
    bad = 0
    for pair in vendored_pairs() + full_pairs():
        t = time.perf_counter()
        cpu = cpu_scores(plan, pair)
        tc = time.perf_counter() - t
        t = time.perf_counter()
        gpu = gpu_scores(rt, dev, plan, pair)
        tg = time.perf_counter() - t
        diffs = _differences(cpu, gpu)
        bad += bool(diffs)
        print(f"{'ok  ' if not diffs else 'DIFF'} {pair.id} frames={len(cpu)} cpu={tc:.2f}s gpu={tg:.2f}s "
              f"diffs={len(diffs)} {diffs[:4]}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
