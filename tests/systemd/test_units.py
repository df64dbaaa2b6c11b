"""The systemd units, sysusers and tmpfiles snippets: verified by systemd's own tools, and read for the
properties the operations guide promises.

``systemd-analyze verify`` needs the unit's ExecStart binary to exist, and
prints bad keys only as warnings with exit status 0 -- so the test verifies
a copy of the units whose ExecStart names this environment's ``vmafxd``
console script, and fails on *any* stderr output (a negative control shows
that a bad key does print there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmafx.defaults import DEFAULT_SOCKET

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
VMAFXD = Path(sys.executable).parent / "vmafxd"

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze is missing (Debian package 'systemd'; scripts/bootstrap.sh test installs it)")


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values (systemd keys repeat, so every value is kept, in order)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        assert current is not None, f"{path.name}: {line!r} outside a section"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _verify_copy(tmp_path: Path, extra_service_line: str | None = None) -> subprocess.CompletedProcess:
    for name in ("vmafxd.service", "vmafxd.socket"):
        shutil.copy(UNITS / name, tmp_path / name)
    svc = tmp_path / "vmafxd.service"
    text = svc.read_text()
    assert "ExecStart=/usr/bin/vmafxd" in text
    text = text.replace("ExecStart=/usr/bin/vmafxd", f"ExecStart={VMAFXD}")
    if extra_service_line:
        text = text.replace("[Service]\n", f"[Service]\n{extra_service_line}\n")
    svc.write_text(text)
    return subprocess.run(["systemd-analyze", "verify", str(svc), str(tmp_path / "vmafxd.socket")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


@needs_analyze
def test_systemd_analyze_verify_passes_with_nothing_on_stderr(tmp_path):
    assert VMAFXD.exists(), f"{VMAFXD} (the console script) is missing: pip install -e ."
    r = _verify_copy(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr


@needs_analyze
def test_verify_would_catch_a_bad_key(tmp_path):
    """Negative control: a misspelt key exits 0 but warns on stderr, which the test above refuses."""
    r = _verify_copy(tmp_path, "NoNewPrivilege=yes")
    assert r.returncode == 0
    assert "Unknown key" in r.stderr and "NoNewPrivilege" in r.stderr


def test_socket_unit_listens_where_the_client_looks_with_a_group_restricted_mode():
    sock = parse_unit(UNITS / "vmafxd.socket")["Socket"]
    assert sock["ListenSequentialPacket"] == [DEFAULT_SOCKET]
    assert sock["FileDescriptorName"] == ["vmafxd"]  # the name the daemon picks among LISTEN_FDS
    assert sock["SocketGroup"] == ["vmafx"] and sock["SocketMode"] == ["0660"]
    assert sock["RemoveOnStop"] == ["yes"] and sock["Accept"] == ["no"]


def test_service_unit_is_notify_typed_hardened_and_reaches_only_gpu_devices():
    unit = parse_unit(UNITS / "vmafxd.service")
    svc = unit["Service"]
    assert unit["Unit"]["Requires"] == ["vmafxd.socket"] and unit["Unit"]["After"] == ["vmafxd.socket"]
    assert svc["Type"] == ["notify"] and svc["NotifyAccess"] == ["main"] and svc["WatchdogSec"]
    assert (svc["User"], svc["Group"]) == (["vmafx"], ["vmafx"])
    for key, value in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                       ("PrivateTmp", "yes"), ("PrivateNetwork", "yes"), ("RestrictAddressFamilies", "AF_UNIX"),
                       ("DevicePolicy", "closed"), ("LockPersonality", "yes"), ("RestrictRealtime", "yes"),
                       ("SystemCallArchitectures", "native"), ("ProtectKernelTunables", "yes"),
                       ("ProtectKernelModules", "yes"), ("ProtectKernelLogs", "yes"),
                       ("ProtectControlGroups", "yes"), ("RestrictNamespaces", "yes"),
                       ("CacheDirectory", "vmafx"), ("StandardOutput", "journal"), ("KillMode", "mixed")]:
        assert svc.get(key) == [value], key
    # GPU JIT needs W+X mappings; device nodes must stay visible; no runtime dir that would eat the socket
    for absent in ("MemoryDenyWriteExecute", "PrivateDevices", "PrivateUsers", "RuntimeDirectory"):
        assert absent not in svc, absent
    allowed = [v.split()[0] for v in svc["DeviceAllow"]]
    assert allowed == ["/dev/kfd", "char-drm", "char-nvidia", "char-nvidiactl", "char-nvidia-uvm", "char-nvidia-caps"]
    # device *paths* take no globs (only char-GROUP names do)
    assert not any("*" in a for a in allowed if a.startswith("/dev/"))


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None or shutil.which("systemd-tmpfiles") is None,
                    reason="systemd-sysusers/systemd-tmpfiles are missing (Debian package 'systemd')")
def test_sysusers_and_tmpfiles_create_the_user_its_gpu_groups_and_the_socket_directory(tmp_path):
    (tmp_path / "etc").mkdir()
    r = subprocess.run(["systemd-sysusers", f"--root={tmp_path}", str(UNITS / "vmafx.sysusers.conf")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    passwd = {l.split(":")[0]: l.split(":") for l in (tmp_path / "etc/passwd").read_text().splitlines()}
    groups = {l.split(":")[0]: l.split(":") for l in (tmp_path / "etc/group").read_text().splitlines()}
    assert "vmafx" in passwd and passwd["vmafx"][3] == groups["vmafx"][2]  # primary group vmafx
    assert "vmafx" in groups["render"][3].split(",") and "vmafx" in groups["video"][3].split(",")
    r = subprocess.run(["systemd-tmpfiles", "--create", f"--root={tmp_path}", str(UNITS / "vmafx.tmpfiles.conf")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    st = (tmp_path / "run/vmafx").stat()
    assert oct(st.st_mode & 0o777) == "0o750"
    if os.geteuid() == 0:
        assert st.st_gid == int(groups["vmafx"][2])


def test_example_config_is_what_the_daemon_accepts():
    """The shipped example must load (unknown keys are errors there) and say what it says."""
    pytest.importorskip("vmafxd.config")
    from vmafxd.config import load_config

    cfg = load_config(str(UNITS / "vmafxd.toml"), {})
    assert cfg.lane == "auto" and cfg.socket == DEFAULT_SOCKET
    assert cfg.limits.max_frames_in_flight == 64 and cfg.limits.fence_timeout_ms == 5000
