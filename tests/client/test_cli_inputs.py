"""vmafxctl score's inputs and outputs: one pair scored from y4m, a lossless FFV1/mkv copy (PyAV),
raw .yuv, stdin and a FIFO gives the same log; --scale equals scoring an FFmpeg-upscaled copy;
frame-count mismatch warns; -o - writes only the log; XML is the default; --summary; plot."""

from __future__ import annotations

import json
import lzma
import os
import re
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from tests.reference import VENDORED

ROOT = Path(__file__).resolve().parents[2]
N = 3  # frames scored: keep it fast
REF_XZ = VENDORED / "clips" / "src_testsrc2_576x324.y4m.xz"
DIST_XZ = VENDORED / "clips" / "dst_testsrc2_576x324_x264crf35.y4m.xz"


def vmafxctl(*args, stdin=None, cwd=None, timeout=300):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}", "VMAFX_SOCKET": "/nonexistent/vmafxd.sock"}
    return subprocess.run([sys.executable, "-m", "vmafx.cli", *args], cwd=cwd or ROOT, env=env, stdin=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _first_frames_y4m(src: Path, dest: Path, n: int) -> Path:
    data = lzma.open(src).read()
    header, _, rest = data.partition(b"\n")
    frames = rest.split(b"FRAME\n")[1: n + 1]
    dest.write_bytes(header + b"\n" + b"".join(b"FRAME\n" + f for f in frames))
    return dest


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    ref = _first_frames_y4m(REF_XZ, d / "ref.y4m", N)
    dist = _first_frames_y4m(DIST_XZ, d / "dist.y4m", N)
    return d, ref, dist


def _ffv1_copy(y4m: Path, dest: Path, size=None, flags="bicubic") -> Path:
    """A lossless FFV1/mkv copy made with PyAV (optionally scaled by FFmpeg's scale filter)."""
    av = pytest.importorskip("av")
    from vmafx.io.av_input import planes_to_frame
    from vmafx.io.inputs import open_input

    out = av.open(str(dest), "w")
    st = out.add_stream("ffv1", rate=24)
    with open_input(str(y4m)) as inp:
        w, h = size or (inp.info.width, inp.info.height)
        st.width, st.height, st.pix_fmt = w, h, "yuv420p"
        graph = None
        if size:
            graph = av.filter.Graph()
            src = graph.add_buffer(width=inp.info.width, height=inp.info.height, format="yuv420p",
                                   time_base=Fraction(1, 24))
            sc = graph.add("scale", f"{w}:{h}:flags={flags}")
            sink = graph.add("buffersink")
            src.link_to(sc)
            sc.link_to(sink)
            graph.configure()
        i = 0
        while (planes := inp.read_frame()) is not None:
            frame = planes_to_frame(planes, inp.info)
            frame.pts, frame.time_base = i, Fraction(1, 24)
            if graph is not None:
                graph.push(frame)
                frame = graph.pull()
            frame.pts = None
            for pkt in st.encode(frame):
                out.mux(pkt)
            i += 1
    for pkt in st.encode():
        out.mux(pkt)
    out.close()
    return dest


def _log(path: Path) -> str:
    return re.sub(r'"fps": [0-9.]+|null', "FPS", path.read_text())


def _score_json(ref, dist, out: Path, *extra, stdin=None) -> str:
    r = vmafxctl("score", "-r", str(ref), "-d", str(dist), "--json", "-o", str(out), "-q",
                 "--feature", "psnr", *extra, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return _log(out)


@pytest.fixture(scope="module")
def y4m_log(clips, tmp_path_factory):
    _, ref, dist = clips
    return _score_json(ref, dist, tmp_path_factory.mktemp("y4m") / "log.json")


def test_ffv1_mkv_copy_scores_like_the_y4m(clips, y4m_log, tmp_path):
    d, ref, dist = clips
    mkv = _ffv1_copy(dist, tmp_path / "dist.mkv")
    assert _score_json(ref, mkv, tmp_path / "log.json") == y4m_log
    assert json.loads((tmp_path / "log.json").read_text())["frames"][0]["metrics"]["vmaf"] > 0


def test_raw_yuv_scores_like_the_y4m(clips, y4m_log, tmp_path):
    _, ref, dist = clips
    raw = tmp_path / "dist.yuv"
    raw.write_bytes(b"".join(dist.read_bytes().split(b"\n", 1)[1].split(b"FRAME\n")))
    ref_raw = tmp_path / "ref.yuv"
    ref_raw.write_bytes(b"".join(ref.read_bytes().split(b"\n", 1)[1].split(b"FRAME\n")))
    assert _score_json(ref_raw, raw, tmp_path / "log.json", "-w", "576", "-h", "324", "-p", "420",
                       "-b", "8") == y4m_log


def test_stdin_scores_like_the_y4m(clips, y4m_log, tmp_path):
    _, ref, dist = clips
    with open(dist, "rb") as f:
        assert _score_json(ref, "-", tmp_path / "log.json", stdin=f) == y4m_log


def test_fifo_scores_like_the_y4m_as_it_arrives(clips, y4m_log, tmp_path):
    _, ref, dist = clips
    fifo = tmp_path / "dist.fifo"
    os.mkfifo(fifo)
    data = dist.read_bytes()

    def writer():
        with open(fifo, "wb") as f:
            for i in range(0, len(data), 65536):  # in pieces, as an encoder writes
                f.write(data[i:i + 65536])
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert _score_json(ref, fifo, tmp_path / "log.json") == y4m_log
    t.join(timeout=10)


def test_scale_bicubic_equals_scoring_an_ffmpeg_upscaled_copy(clips, tmp_path):
    _, ref, dist = clips
    small = _ffv1_copy(dist, tmp_path / "small.mkv", size=(288, 162))
    up = _ffv1_copy(small, tmp_path / "up.mkv", size=(576, 324), flags="bicubic")
    scaled = _score_json(ref, small, tmp_path / "a.json", "--scale", "bicubic")
    assert scaled == _score_json(ref, up, tmp_path / "b.json")
    r = vmafxctl("score", "-r", str(ref), "-d", str(small), "-q")
    assert r.returncode == 1
    assert r.stderr.strip().endswith("is 576x324; add --scale bicubic (or lanczos, ...) to scale it")
    assert "288x162" in r.stderr and r.stderr.count("\n") == 1


def test_different_frame_counts_warn_with_both_counts(clips, tmp_path):
    _, ref, dist = clips
    short = _first_frames_y4m(DIST_XZ, tmp_path / "short.y4m", 2)
    r = vmafxctl("score", "-r", str(ref), "-d", str(short), "--json", "-o", str(tmp_path / "l.json"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"short\.y4m has 2 frames, .*ref\.y4m has 3", r.stderr)
    assert len(json.loads((tmp_path / "l.json").read_text())["frames"]) == 2
    r = vmafxctl("score", "-r", str(ref), "-d", str(short), "--frame_cnt", "1")
    assert r.returncode == 0 and "warning" not in r.stderr


def test_dash_o_writes_only_the_log_to_stdout_and_xml_is_the_default(clips):
    _, ref, dist = clips
    r = vmafxctl("score", "-r", str(ref), "-d", str(dist), "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<VMAF version=\"") and r.stdout.endswith("</VMAF>\n")
    assert "vmaf: " in r.stderr  # the human line went to stderr
    import xml.etree.ElementTree as ET

    assert len(ET.fromstring(r.stdout).find("frames")) == N


def test_version_and_subsample_and_summary(clips, tmp_path):
    _, ref, dist = clips
    r = vmafxctl("score", "-v")
    assert r.returncode == 0 and re.fullmatch(r"\S+\+libvmaf\.f85a8536\n", r.stderr)
    r = vmafxctl("score", "-r", str(ref), "-d", str(dist), "--json", "-o", str(tmp_path / "s.json"),
                 "--subsample", "2", "--summary")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert [f["frameNum"] for f in doc["frames"]] == [0, 2]
    vm = [f["metrics"]["vmaf"] for f in doc["frames"]]
    assert doc["pooled_metrics"]["vmaf"]["mean"] == pytest.approx(sum(vm) / 2, abs=1e-6)
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("vmaf "))
    mn, p1, p5, mean, hmean, mx = map(float, line.split()[1:])
    assert mn <= p1 <= p5 <= mean <= mx and hmean <= mean


def test_plot_draws_a_png_of_two_logs(clips, tmp_path):
    pytest.importorskip("matplotlib")
    _, ref, dist = clips
    for name, d in (("a", dist), ("b", ref)):
        assert vmafxctl("score", "-r", str(ref), "-d", str(d), "--json", "-o", str(tmp_path / f"{name}.json"),
                        "-q").returncode == 0
    r = vmafxctl("plot", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "p.png"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = vmafxctl("plot", str(tmp_path / "a.json"), "--metric", "nope", "-o", str(tmp_path / "q.png"))
    assert r.returncode == 1 and "has no metric 'nope'" in r.stderr


def test_model_path_is_sent_as_content_to_a_daemon(clips, tmp_path):
    """--model path=FILE through a private daemon: the daemon never opens the path."""
    import importlib.util

    if importlib.util.find_spec("vmafxd.__main__") is None:
        pytest.skip("no daemon in this tree")
    _, ref, dist = clips
    model = tmp_path / "mine.json"
    model.write_text((ROOT / "vmafxd" / "model" / "builtin" / "vmaf_v0.6.1.json").read_text())
    a = vmafxctl("score", "-r", str(ref), "-d", str(dist), "-m", f"path={model}", "--private", "--lane", "cpu",
                 "--json", "-o", str(tmp_path / "a.json"), "-q")
    assert a.returncode == 0, a.stderr
    b = vmafxctl("score", "-r", str(ref), "-d", str(dist), "--json", "-o", str(tmp_path / "b.json"), "-q")
    assert b.returncode == 0, b.stderr
    assert _log(tmp_path / "a.json") == _log(tmp_path / "b.json")


@pytest.mark.parametrize("pair_id", ["p15_coffee720_10bit_x264crf35", "p17_colorwheel444_x264crf35",
                                     "p18_immuno422_x264crf30"])
def test_ffv1_copies_of_10bit_444_422_score_like_their_y4m(pair_id, tmp_path):
    """PyAV hands 10-bit, 4:4:4 and 4:2:2 planes straight to the lanes: same log as the y4m."""
    av = pytest.importorskip("av")
    from tests.reference import vendored_pairs
    from vmafx.io.av_input import _FF_NAME, planes_to_frame
    from vmafx.io.inputs import open_input

    p = next(x for x in vendored_pairs() if x.id == pair_id)
    ref = _first_frames_y4m(p.ref_file, tmp_path / "ref.y4m", 2)
    dist = _first_frames_y4m(p.dist_file, tmp_path / "dist.y4m", 2)
    mkv = tmp_path / "dist.mkv"
    out = av.open(str(mkv), "w")
    st = out.add_stream("ffv1", rate=24)
    with open_input(str(dist)) as inp:
        st.width, st.height = inp.info.width, inp.info.height
        st.pix_fmt = _FF_NAME[(inp.info.pixel_format, inp.info.bitdepth)]
        while (planes := inp.read_frame()) is not None:
            for pkt in st.encode(planes_to_frame(planes, inp.info)):
                out.mux(pkt)
    for pkt in st.encode():
        out.mux(pkt)
    out.close()
    with open_input(str(mkv)) as back:
        assert back.info == open_input(str(dist)).info
    assert _score_json(ref, mkv, tmp_path / "a.json") == _score_json(ref, dist, tmp_path / "b.json")


def test_frame_skips_equal_scoring_the_clips_without_their_first_frames(clips, tmp_path):
    _, ref, dist = clips
    data_r, data_d = ref.read_bytes(), dist.read_bytes()

    def drop_first(data: bytes, dest: Path) -> Path:
        header, _, rest = data.partition(b"\n")
        frames = rest.split(b"FRAME\n")[1:]
        dest.write_bytes(header + b"\n" + b"".join(b"FRAME\n" + f for f in frames[1:]))
        return dest
    r1, d1 = drop_first(data_r, tmp_path / "r1.y4m"), drop_first(data_d, tmp_path / "d1.y4m")
    skipped = _score_json(ref, dist, tmp_path / "a.json", "--frame_skip_ref", "1", "--frame_skip_dist", "1")
    assert skipped == _score_json(r1, d1, tmp_path / "b.json")
    assert len(json.loads((tmp_path / "a.json").read_text())["frames"]) == N - 1


def test_scale_through_a_private_daemon_equals_in_process(clips, tmp_path):
    import importlib.util

    if importlib.util.find_spec("vmafxd.__main__") is None:
        pytest.skip("no daemon in this tree")
    _, ref, dist = clips
    small = _ffv1_copy(dist, tmp_path / "small.mkv", size=(288, 162))
    a = _score_json(ref, small, tmp_path / "a.json", "--scale", "lanczos", "--private", "--lane", "cpu")
    assert a == _score_json(ref, small, tmp_path / "b.json", "--scale", "lanczos", "--in-process")


def test_presets_add_libvmafs_models_and_features_in_order():
    from vmafx.cli import build_parser

    args = build_parser().parse_args(["score", "-m", "version=vmaf_b_v0.6.3", "--aom_ctc", "v7.0",
                                      "--feature", "psnr"])
    assert args.model == ["version=vmaf_b_v0.6.3", "version=vmaf_v0.6.1:name=vmaf",
                          "version=vmaf_v0.6.1neg:name=vmaf_neg"]
    assert args.feature == ["psnr=reduced_hbd_peak=true:enable_apsnr=true:min_sse=0.5", "ciede",
                            "float_ssim=scale=1:enable_db=true:clip_db=true",
                            "float_ms_ssim=enable_db=true:clip_db=true", "psnr_hvs", "cambi", "psnr"]
    args = build_parser().parse_args(["score", "--nflx_ctc", "v1.0", "-h", "1080", "-w", "1920"])
    assert args.height == 1080 and args.width == 1920
    assert args.model[0] == "version=vmaf_4k_v0.6.1:name=vmaf" and args.feature[-1] == "cambi"


@pytest.mark.parametrize("where", [["--in-process"], ["--private", "--lane", "cpu"]])
def test_no_prediction_logs_features_only(clips, tmp_path, where):
    _, ref, dist = clips
    r = vmafxctl("score", "-r", str(ref), "-d", str(dist), "-n", "--feature", "psnr", "--json",
                 "-o", str(tmp_path / "n.json"), *where)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "n.json").read_text())
    assert list(doc["frames"][0]["metrics"]) == ["psnr_y", "psnr_cb", "psnr_cr"]
    assert list(doc["pooled_metrics"]) == ["psnr_y", "psnr_cb", "psnr_cr"]


def test_cpumask_is_accepted_and_said_to_be_ignored_and_gpumask_picks_a_device(clips):
    from types import SimpleNamespace

    from vmafx.score_cmd import _device

    _, ref, dist = clips
    r = vmafxctl("score", "-r", str(ref), "-d", str(dist), "-c", "48", "--frame_cnt", "1")
    assert r.returncode == 0, r.stderr
    assert "-c/--cpumask is ignored" in r.stderr and r.stdout.startswith("vmaf: ")
    assert [_device(SimpleNamespace(gpumask=m)) for m in (None, 0, 1, 4, 6)] == [None, None, 0, 2, 1]
