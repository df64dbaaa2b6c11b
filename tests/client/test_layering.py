"""The client's one door to the scoring core: only vmafx/in_process.py imports vmafxd."""

from __future__ import annotations

import ast
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client" / "vmafx"


def _imports_vmafxd(path: Path) -> bool:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "vmafxd" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vmafxd":
            return True
    return False


def test_only_in_process_imports_vmafxd():
    offenders = sorted(str(p.relative_to(CLIENT)) for p in CLIENT.rglob("*.py") if _imports_vmafxd(p))
    assert offenders == ["in_process.py"]


def test_scoring_in_this_process_loads_no_daemon_side(tmp_path):
    # what `vmafxctl score` pays for at start-up without a daemon (docs/performance.md,
    # "Start-up"): no trio (the lanes' interface), no msgpack or wire protocol (the client's
    # errors, only for a daemon), no urllib.request (an XML escape, only for an XML log), no
    # log readers (xml.etree, csv: vmafxctl plot's), no PyAV (a y4m needs none), and of the
    # features only the default model's three
    import os
    import subprocess
    import sys

    w, h = 176, 144
    frame = b"FRAME\n" + bytes(range(256)) * (w * h * 3 // 2 // 256) + bytes(w * h * 3 // 2 % 256)
    for name in ("ref.y4m", "dist.y4m"):
        (tmp_path / name).write_bytes(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420jpeg\n".encode() + frame)
    code = (
        "import sys\n"
        "from vmafx.cli import main\n"
        f"rc = main(['score', '-r', {str(tmp_path / 'ref.y4m')!r}, '-d', {str(tmp_path / 'dist.y4m')!r}, '-q',"
        " '--in-process'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
        "sys.exit(rc)\n"
    )
    root = CLIENT.parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "client"), *sys.path]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("vmaf: ") and 0 < float(lines[0].split()[1]) <= 100  # a frame was scored
    loaded = set(lines[-1].split())
    unused = ("urllib.request", "xml.etree", "vmafx.protocol", "vmafx.transport", "vmafxd.lanes.device")
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("trio", "msgpack", "av", "http", "email", "csv")
                   or m.startswith(unused))
    assert heavy == []
    leaves = [m.rsplit(".", 1)[1] for m in loaded if m.startswith("vmafxd.features.")]
    features = sorted(n for n in leaves if not n.startswith("_") and n not in ("declaration", "names"))
    assert features == ["adm", "motion", "vif"]


def test_commands_that_score_nothing_load_no_numpy(tmp_path):
    # `vmafxctl --help`, `score --help` and `status` (here: no daemon, one line) import neither
    # numpy nor PyAV: the scaler's names live in vmafx.formats and the blocking client names
    # FrameBuffer only for its annotations
    import os
    import subprocess
    import sys

    root = CLIENT.parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "client"), *sys.path]))
    for args in (["--help"], ["score", "--help"], ["status", "--socket", str(tmp_path / "none.sock")]):
        code = ("import sys\nfrom vmafx.cli import main\n"
                f"try:\n    rc = main({args!r})\nexcept SystemExit as e:\n    rc = e.code\n"
                "print('MODULES', ' '.join(sorted(sys.modules)))\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        loaded = set(out.stdout.rsplit("MODULES", 1)[1].split())
        assert "vmafx.cli" in loaded and not {"numpy", "av"} & loaded, args


def test_two_y4m_files_go_to_a_daemon_before_numpy_or_trio_is_loaded(tmp_path):
    # `vmafxctl score --socket S -r a.y4m -d b.y4m` sends score_files first (vmafx/remote_files.py)
    # and loads numpy and the scoring core while the daemon works: what the command has loaded
    # when the job is sent holds neither numpy nor trio (nor the daemon's packages)
    import os
    import subprocess
    import sys

    root = CLIENT.parents[1]
    for name in ("ref.y4m", "dist.y4m"):
        (tmp_path / name).write_bytes(b"YUV4MPEG2 W8 H8 F25:1 C420jpeg\nFRAME\n" + bytes(96))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "client"), *sys.path]))
    code = ("import sys\nfrom vmafx import remote_files\nseen = []\n"
            "class Job:\n    def __init__(self, *a, **k):\n        seen.append(sorted(sys.modules))\n"
            "remote_files.FilesJob = Job\n"
            "from vmafx import cli, score_cmd\n"
            f"args = cli.build_parser().parse_args(['score', '--socket', {str(tmp_path / 's.sock')!r}, "
            f"'-r', {str(tmp_path / 'ref.y4m')!r}, '-d', {str(tmp_path / 'dist.y4m')!r}])\n"
            "score_cmd._start_early(args)\n"
            "print('MODULES', ' '.join(seen[0]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    loaded = set(out.stdout.rsplit("MODULES", 1)[1].split())
    assert "vmafx.blocking" in loaded
    assert not {"numpy", "trio", "vmafxd"} & loaded, sorted({"numpy", "trio", "vmafxd"} & loaded)
