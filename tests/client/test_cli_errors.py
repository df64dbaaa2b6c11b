"""Every row of docs/cli.md's table of bad inputs: the one line on stderr and the exit status.

The table in the doc and ROWS here are the same list; test_the_doc_lists_every_row checks that.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd, stdin=None, timeout=120):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}", "VMAFX_SOCKET": "/nonexistent/vmafxd.sock"}
    return subprocess.run([sys.executable, "-m", "vmafx.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=stdin)


def _y4m(path: Path, w: int, h: int, n: int, seed: int, colour="420jpeg", depth=8) -> Path:
    r = np.random.default_rng(seed)
    cw, ch = (w + 1) // 2, (h + 1) // 2
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F24:1 Ip A1:1 C{colour}\n".encode())
        for _ in range(n):
            f.write(b"FRAME\n")
            if depth == 8:
                f.write(r.integers(0, 256, w * h + 2 * cw * ch, dtype=np.uint8).tobytes())
            else:
                f.write(r.integers(0, 1024, w * h + 2 * cw * ch, dtype="<u2").tobytes())
    return path


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    _y4m(d / "ref.y4m", 96, 64, 3, 1)
    _y4m(d / "dist.y4m", 96, 64, 3, 2)
    _y4m(d / "big.y4m", 128, 64, 3, 3)
    _y4m(d / "deep.y4m", 96, 64, 3, 4, colour="420p10", depth=10)
    (d / "garbage.mp4").write_bytes(np.random.default_rng(5).integers(0, 256, 20000, dtype=np.uint8).tobytes())
    (d / "notes.txt").write_text("not a video\n" * 100)
    (d / "fake.y4m").write_bytes(b"hello world\n" * 100)
    (d / "y4m_named.yuv").write_bytes((d / "dist.y4m").read_bytes())
    data = (d / "dist.y4m").read_bytes()
    (d / "truncated.y4m").write_bytes(data[: len(data) - 1000])
    (d / "odd.yuv").write_bytes(b"\0" * (96 * 64 * 3 // 2 * 2 + 7))
    (d / "model.json").write_text("{not json")
    return d


#: (id, arguments, exit status, a regex the one stderr line must match) -- docs/cli.md's table
ROWS = [
    ("no -d", ["-r", "ref.y4m"], 2, r"-d/--distorted is required"),
    ("unknown option", ["-r", "ref.y4m", "-d", "dist.y4m", "--bogus"], 2, r"unrecognized arguments: --bogus"),
    ("-h is the height", ["-r", "ref.y4m", "-d", "dist.y4m", "-h", "x"], 2,
     r"argument -h/--height: expected an unsigned integer, got 'x'"),
    ("bad pixel format", ["-r", "a.yuv", "-d", "b.yuv", "-w", "8", "-h", "8", "-p", "411"], 2,
     r"argument -p/--pixel_format.*: expected 420, 422 or 444, got '411'"),
    ("bad preset", ["-r", "ref.y4m", "-d", "dist.y4m", "--aom_ctc", "v9.0"], 2, r"--aom_ctc: bad version 'v9.0'"),
    ("-n without features", ["-r", "ref.y4m", "-d", "dist.y4m", "-n"], 2, r"-n/--no_prediction needs"),
    ("in-process on a GPU lane this machine lacks", ["-r", "ref.y4m", "-d", "dist.y4m", "--in-process", "--lane",
                                                     "hip"], 69,
     r"--in-process --lane hip: hip: .*; score through a daemon \(without --in-process\) or on --lane cpu"),
    ("a GPU lane this machine lacks, no daemon answering", ["-r", "ref.y4m", "-d", "dist.y4m", "--lane", "hip"], 69,
     r"^vmafxctl: --lane hip: hip: .*; start vmafxd \(systemctl start vmafxd\), or score with --private or on "
     r"--lane cpu$"),
    ("missing file", ["-r", "nope.y4m", "-d", "dist.y4m"], 1, r"nope\.y4m: no such file"),
    ("a directory", ["-r", ".", "-d", "dist.y4m"], 1, r"\.: is a directory, not a video file"),
    ("random bytes named .mp4", ["-r", "ref.y4m", "-d", "garbage.mp4"], 1,
     r"garbage\.mp4: not a video file FFmpeg can read"),
    ("a text file", ["-r", "ref.y4m", "-d", "notes.txt"], 1, r"notes\.txt: not a video file FFmpeg can read"),
    ("not y4m named .y4m", ["-r", "ref.y4m", "-d", "fake.y4m"], 1,
     r"fake\.y4m: named \.y4m but does not start with YUV4MPEG2"),
    ("y4m named .yuv, with raw geometry", ["-r", "y4m_named.yuv", "-d", "y4m_named.yuv", "-w", "96", "-h", "64",
                                           "-p", "420", "-b", "8"], 1,
     r"y4m_named\.yuv: is a YUV4MPEG2 \(y4m\) stream, not raw video"),
    (".yuv without geometry", ["-r", "odd.yuv", "-d", "odd.yuv"], 1, r"odd\.yuv: raw \.yuv input needs -w/--width"),
    ("raw .yuv of the wrong geometry", ["-r", "odd.yuv", "-d", "odd.yuv", "-w", "96", "-h", "64", "-p", "420",
                                        "-b", "8"], 1, r"odd\.yuv: 18439 bytes is not a whole number of 96x64"),
    ("truncated y4m", ["-r", "ref.y4m", "-d", "truncated.y4m"], 1, r"truncated\.y4m: frame 2 is truncated"),
    ("sizes differ", ["-r", "ref.y4m", "-d", "big.y4m"], 1,
     r"big\.y4m: is 128x64, the reference ref\.y4m is 96x64; add --scale"),
    ("bit depths differ", ["-r", "ref.y4m", "-d", "deep.y4m"], 1,
     r"deep\.y4m: is 10-bit, the reference ref\.y4m is 8-bit"),
    ("output folder missing", ["-r", "ref.y4m", "-d", "dist.y4m", "-o", "no/such/dir/log.xml"], 1,
     r"-o/--output no/such/dir/log\.xml: the folder .* does not exist"),
    ("output is a folder", ["-r", "ref.y4m", "-d", "dist.y4m", "-o", "."], 1, r"-o/--output \.: is a directory"),
    ("model file not JSON", ["-r", "ref.y4m", "-d", "dist.y4m", "-m", "path=model.json"], 1,
     r"model: model\.json is not JSON"),
    ("model file missing", ["-r", "ref.y4m", "-d", "dist.y4m", "-m", "path=none.json"], 1,
     r"model\.path: cannot read none\.json"),
    ("unknown feature", ["-r", "ref.y4m", "-d", "dist.y4m", "--feature", "nosuch"], 1,
     r"unknown feature 'nosuch'"),
    ("no daemon at --socket", ["-r", "ref.y4m", "-d", "dist.y4m", "--socket", "/nonexistent/x.sock"], 69,
     r"no daemon answers at /nonexistent/x\.sock \(.*\); start it"),
]


def _hip_runs_here() -> bool:
    try:
        from vmafxd.lanes import hip

        return hip.load().device_count() > 0
    except Exception:
        return False


@pytest.mark.parametrize("args, code, says", [pytest.param(a, c, s, id=i) for i, a, c, s in ROWS])
def test_bad_input_gives_one_line_and_the_exit_status(d, args, code, says):
    if "hip" in args and _hip_runs_here():
        pytest.skip("an AMD GPU is here: --in-process --lane hip scores")
    r = run("score", *args, cwd=d)
    assert r.returncode == code, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr  # one line: no traceback, no usage dump
    assert re.match(r"vmafxctl( score)?: ", lines[0]) and re.search(says, lines[0]), lines[0]
    assert not list(d.glob("*.vmafx-partial-*"))


def test_the_doc_lists_every_row():
    doc = (ROOT / "docs" / "cli.md").read_text()
    for ident, _a, code, _s in ROWS:
        assert re.search(rf"^\| {re.escape(ident)} \|.*\| {code} \|$", doc, re.M), ident


@pytest.mark.parametrize("where", [[], ["--private", "--lane", "cpu"]], ids=["in-process", "private-daemon"])
def test_ctrl_c_stops_within_a_second_exit_130_and_leaves_nothing(d, tmp_path, where):
    """A FIFO reference whose writer stalls: the run blocks reading; SIGINT ends it, and neither
    a log nor a private daemon's folder is left."""
    fifo = d / "stall.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}", "VMAFX_SOCKET": "/nonexistent/vmafxd.sock",
           "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "vmafx.cli", "score", "-r", str(fifo), "-d", "dist.y4m",
                             "-o", "ctrlc.xml", *where], cwd=d, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with open(fifo, "wb") as w:
        data = (d / "ref.y4m").read_bytes()
        w.write(data[: len(data) // 2])  # header and a frame or so, then stall
        w.flush()
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert took < 1.0
    assert "Traceback" not in err and err.strip() == "vmafxctl: interrupted"
    assert not (d / "ctrlc.xml").exists() and not list(d.glob("*.vmafx-partial-*"))
    assert list(tmp.iterdir()) == []


def test_xml_log_is_escaped_and_well_formed(d):
    """A model name with XML's special characters: the log still parses and keeps the name."""
    import xml.etree.ElementTree as ET

    r = run("score", "-r", "ref.y4m", "-d", "dist.y4m", "-m", 'version=vmaf_v0.6.1:name=v<1>"&x', "-o", "esc.xml",
            "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    root = ET.parse(d / "esc.xml").getroot()  # XML is the default format
    assert root.tag == "VMAF" and root.get("version").endswith("+libvmaf.f85a8536")
    assert [m.get("name") for m in root.iter("metric")][-1] == 'v<1>"&x'
    assert len(root.find("frames")) == 3


def test_h_is_the_height_as_in_libvmaf(d):
    raw = d / "ref.yuv"
    data = (d / "ref.y4m").read_bytes()
    raw.write_bytes(b"".join(data.split(b"\n", 1)[1].split(b"FRAME\n")))
    r = run("score", "-r", "ref.yuv", "-d", "ref.yuv", "-w", "96", "-h", "64", "-p", "420", "-b", "8", cwd=d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("vmaf: ") and float(r.stdout.split()[1]) > 90  # identical inputs
