"""scripts/bench_vs_libvmaf_summary.py on fabricated logs: the figures it prints are the logs' figures.

The logs are written here the way scripts/bench_vs_libvmaf.sh writes them (runs.tsv, libvmaf-layout
JSON logs, bench_gpu.py's output), with numbers chosen so each printed figure is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import load_script

summary = load_script("bench_vs_libvmaf_summary")

HEADER = "\t".join(summary.COLUMNS)


def _log(path: Path, vmaf: list[float], fps: float | None = None) -> None:
    d = {"version": "x", "frames": [{"frameNum": i, "metrics": {"vmaf": v}} for i, v in enumerate(vmaf)],
         "pooled_metrics": {"vmaf": {"mean": sum(vmaf) / len(vmaf)}}}
    if fps is not None:
        d["fps"] = fps
    path.write_text(json.dumps(d))


def _row(size, frames, tool, rep, rc, wall, user="0.5", sys_="0.5", dcpu="-", json_name="-"):
    return "\t".join(str(x) for x in (size, frames, tool, rep, rc, wall, user, sys_, dcpu,
                                      f"{tool}_{size}_r{rep}.log", json_name))


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """Two sizes; at 64x64 every tool ran 3 times (vx's third run failed), at 32x32 cuda never ran."""
    base = [80.0, 81.0, 82.0, 83.0]
    rows = [HEADER]
    walls = {"cat": (0.01, 0.02, 0.04), "pyread": (1.0, 1.0, 1.0), "cpu": (2.0, 4.0, 8.0),
             "cuda": (1.0, 2.0, 4.0), "vx": (0.5, 1.0, 99.0), "vxs": (0.25, 0.5, 1.0)}
    for rep in (1, 2, 3):
        for tool, w in walls.items():
            name = f"{tool}_64x64_r{rep}.json" if tool in summary.SCORERS else "-"
            rc = 1 if (tool == "vx" and rep == 3) else 0
            dcpu = "3.00" if tool == "vxs" else "-"
            rows.append(_row("64x64", 4, tool, rep, rc, w[rep - 1], dcpu=dcpu, json_name=name))
            if name == "-":
                continue
            v = list(base)
            if tool == "cuda":
                v[2] += 0.25  # cuda differs from the others on one frame
            if tool == "vx" and rep == 3:
                continue  # the failed run left no log
            if rep == 1 or tool != "vxs":
                _log(tmp_path / name, v, fps=123.0 if tool in ("cpu", "cuda") else None)
            else:  # vxs's repetitions as the shell script keeps them: a reference to the first
                (tmp_path / name).write_text(json.dumps({"same_as": "vxs_64x64_r1.json"}))
    # pyread's own figure wins over its wall clock (no interpreter start in it)
    for rep in (1, 2, 3):
        (tmp_path / f"pyread_64x64_r{rep}.log").write_text(
            f"pyread 4 frames in 0.001 s: {1000 * rep}.0 frames/s, 1.00 GB/s (both files)\n")
    for tool in ("cpu", "vx"):
        rows.append(_row("32x32", 2, tool, 1, 0, 1.0, json_name=f"{tool}_32x32_r1.json"))
    _log(tmp_path / "cpu_32x32_r1.json", [50.0, 60.0])
    _log(tmp_path / "vx_32x32_r1.json", [50.0])  # one frame short: scored, but not every frame
    (tmp_path / "runs.tsv").write_text("\n".join(rows) + "\n")
    return tmp_path


def _line(lines: list[str], start: str) -> str:
    found = [x for x in lines if x.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


def test_results_are_medians_of_the_complete_runs(logs: Path):
    lines = summary.summarize_files(logs)
    # cpu: 4 frames in 2, 4, 8 s -> 2, 1, 0.5 frames/s, median 1.0
    cpu = _line(lines, "RESULT 64x64 cpu:")
    assert "1.0 frames/s median of 3" in cpu and "3/3 complete" in cpu
    assert "libvmaf's own fps median 123.0" in cpu and "pooled VMAF 81.500000" in cpu
    # CPU per 1,000 frames: (0.5 + 0.5) s / 4 frames * 1000
    assert "CPU 250.00 s per 1,000 frames" in cpu
    # vx: the failed third run is left out of the median (8 and 4 frames/s -> 6)
    vx = _line(lines, "RESULT 64x64 vx:")
    assert "6.0 frames/s median of 2" in vx and "2/3 complete" in vx
    # vxs: the running daemon's 3 s are counted: (1 + 3) / 4 * 1000
    vxs = _line(lines, "RESULT 64x64 vxs:")
    assert "CPU 1,000.00 s per 1,000 frames" in vxs and "8.0 frames/s median of 3" in vxs
    assert "2,000.0 frames/s median of 3" in _line(lines, "RESULT 64x64 pyread:")
    assert "200.0 frames/s" in _line(lines, "RESULT 64x64 cat:")


def test_ratios(logs: Path):
    lines = summary.summarize_files(logs)
    assert _line(lines, "RATIO 64x64 vx/cuda:").startswith("RATIO 64x64 vx/cuda: 3x (vx 6.0 / cuda 2.0")
    assert _line(lines, "RATIO 64x64 vxs/cpu:").startswith("RATIO 64x64 vxs/cpu: 8x")
    assert _line(lines, "RATIO 64x64 vx/pyread:").startswith("RATIO 64x64 vx/pyread: 0.003x")
    assert _line(lines, "RATIO 64x64 vx/cat:").startswith("RATIO 64x64 vx/cat: 0.03x")
    assert "cuda: not run" in _line(lines, "RATIO 32x32 vx/cuda:")
    # at 32x32 vx scored one frame of two: not a complete run, so no ratio either
    assert "vx: no complete run" in _line(lines, "RATIO 32x32 vx/cpu:")
    assert "no complete run of 1" in _line(lines, "RESULT 32x32 vx:")


def test_accuracy_between_every_two_scorers(logs: Path):
    lines = summary.summarize_files(logs)
    assert "max |per-frame VMAF diff| 0.250000 over 4 frames (1 differ)" in _line(lines, "ACCURACY 64x64 cpu vs cuda:")
    assert "|pooled mean diff| 0.062500" in _line(lines, "ACCURACY 64x64 cuda vs vxs:")
    assert "0.000000 over 4 frames (0 differ)" in _line(lines, "ACCURACY 64x64 vx vs vxs:")
    pairs = [x for x in lines if x.startswith("ACCURACY 64x64") and " vs " in x]
    assert len(pairs) == 6
    assert _line(lines, "ACCURACY 64x64 repetitions identical:").endswith("cpu yes, cuda yes, vx yes, vxs yes")
    assert "not comparable (2 vs 1 frames)" in _line(lines, "ACCURACY 32x32 cpu vs vx:")


def test_libvmaf_cuda_falling_back_to_the_cpu_is_no_cuda_figure(logs: Path):
    (logs / "cuda_64x64_r3.log").write_text("Cannot load libcuda.so.1\n"
                                            "problem during vmaf_cuda_state_init, using CPU\n")
    lines = summary.summarize_files(logs)
    cuda = _line(lines, "RESULT 64x64 cuda:")
    # 4 frames in 1 and 2 s -> 4 and 2 frames/s, median 3; the third run is out
    assert "3.0 frames/s median of 2" in cuda and "2/3 complete" in cuda and "FELL BACK TO THE CPU in 1" in cuda
    for rep in (1, 2):
        (logs / f"cuda_64x64_r{rep}.log").write_text("problem during vmaf_cuda_state_init, using CPU\n")
    cuda = _line(summary.summarize_files(logs), "RESULT 64x64 cuda:")
    assert "no complete run of 3" in cuda and "fell back to the CPU in 3" in cuda
    assert _line(summary.summarize_files(logs), "ACCURACY 64x64 cpu vs cuda:").endswith("(cuda fell back to the CPU)")


def test_a_repetition_that_scored_differently_is_said(logs: Path):
    _log(logs / "cpu_64x64_r2.json", [80.0, 81.0, 82.0, 83.5])
    lines = summary.summarize_files(logs)
    assert "cpu NO" in _line(lines, "ACCURACY 64x64 repetitions identical:")


@pytest.mark.parametrize("text, message", [
    ("size\tframes\n", "header"),
    (HEADER + "\n64x64\t4\tcpu\n", "3 fields"),
    (HEADER + "\n" + _row("64x64", 4, "ffmpeg", 1, 0, 1.0) + "\n", "tool 'ffmpeg'"),
    (HEADER + "\n" + _row("64x64", "four", "cpu", 1, 0, 1.0) + "\n", ":2:"),
])
def test_malformed_runs_tsv_is_refused_naming_the_line(tmp_path: Path, text: str, message: str):
    (tmp_path / "runs.tsv").write_text(text)
    with pytest.raises(summary.SummaryError, match=message):
        summary.summarize_files(tmp_path)


BENCH_LOG = """\
daemon cuda version=vmaf_v0.6.1 576x324: 4386 fps (min 4133, max 4828); latency p50 28.1 ms, p95 32.6 ms, p99 33.0 ms, 3.7 frames per packet read (960 frames, batch 32, 128 in flight)
daemon cuda version=vmaf_v0.6.1 1920x1080: 4632 fps (min 4610, max 4866); latency p50 24.6 ms (960 frames, batch 32, 128 in flight)
some other line
"""
LATENCY_LOG = "daemon cuda version=vmaf_v0.6.1 1920x1080: 968 fps (min 917, max 1171); latency p50 4.3 ms (300 frames, batch 32, 4 in flight)\n"
ENGINE_LOG = "engine version=vmaf_v0.6.1 1920x1080: 5368 fps (min 5349, max 5372; 186 us/frame)\n"


def test_bench_lines_and_daemon_over_engine(tmp_path: Path):
    (tmp_path / "bench_daemon.log").write_text(BENCH_LOG)
    (tmp_path / "bench_latency.log").write_text(LATENCY_LOG)
    (tmp_path / "bench_engine.log").write_text(ENGINE_LOG)
    (tmp_path / "bench_producers.log").write_text("producers 16 cuda 1920x1080: aggregate 4000 fps\n")
    lines = summary.summarize_bench(tmp_path)
    assert sum(x.startswith("RESULT bench daemon: daemon cuda") for x in lines) == 2
    assert sum(x.startswith("RESULT bench ") for x in lines) == 5
    assert "RESULT bench producers: producers 16 cuda 1920x1080: aggregate 4000 fps" in lines
    # the 128-in-flight figure, not the 4-in-flight one, over the engine's
    assert _line(lines, "RATIO bench 1920x1080 daemon/engine:").startswith(
        "RATIO bench 1920x1080 daemon/engine: 0.863 (daemon 4632 fps at 128 in flight")
    assert not [x for x in lines if x.startswith("RATIO bench 576x324")]  # no engine figure at that size


def test_bench_without_figures_says_so(tmp_path: Path):
    (tmp_path / "bench_daemon.log").write_text("Traceback ...\n")
    assert summary.summarize_bench(tmp_path) == ["RESULT bench: no figure lines found (see the bench_*.log files)"]
