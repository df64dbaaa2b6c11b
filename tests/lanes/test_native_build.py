"""Building the native kernels: all at once into the kernel cache, and an interrupted build leaves nothing."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(cache: Path) -> dict:
    return {**os.environ, "VMAFXD_KERNEL_CACHE": str(cache), "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}


def test_python_m_native_builds_every_kernel_then_loads_them(tmp_path):
    from vmafxd.lanes import emulated
    from vmafxd.lanes.native import HOST_LIBRARIES, NATIVE_FEATURES

    if emulated._compiler() is None:
        pytest.skip("no host C++ compiler")
    out = subprocess.run([sys.executable, "-m", "vmafxd.lanes.native"], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    built = {p.name.split("-")[0] for p in (tmp_path / "native").glob("*.so")}
    assert built == {spec.split(":")[0] for spec in NATIVE_FEATURES.values()} | set(HOST_LIBRARIES)
    assert not [p for p in (tmp_path / "native").iterdir() if not p.name.endswith(".so")]  # no temporaries
    again = subprocess.run([sys.executable, "-m", "vmafxd.lanes.native"], env=_env(tmp_path), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and "built" in again.stdout


def test_an_interrupted_build_kills_the_compiler_and_leaves_no_file(tmp_path, monkeypatch):
    from vmafxd.lanes import emulated

    # a "compiler" that writes a temporary file where compilers do ($TMPDIR), starts a child of
    # its own (as g++ starts cc1plus) and takes its time
    marker = tmp_path / "child.pid"
    cxx = tmp_path / "slowcxx"
    cxx.write_text(f"#!/bin/sh\necho x > \"$TMPDIR/cc123.s\"\nsleep 60 &\necho $! > {marker}\nwait\n")
    cxx.chmod(0o755)
    out = tmp_path / "cache"
    out.mkdir()
    lib = out / "slow-0.so"
    raised = []
    real = subprocess.Popen.communicate
    started = time.monotonic()

    def communicate(self, *a, **k):  # the interrupt as the build sees it: out of its wait for the compiler
        if time.monotonic() - started > 0.5:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "communicate", communicate)

    def build():
        try:
            emulated.build_library(str(cxx), "int f() { return 1; }", [], lib, "slow")
        except BaseException as e:  # noqa: BLE001 - what the interrupt raised
            raised.append(e)

    t = threading.Thread(target=build)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive() and raised and isinstance(raised[0], KeyboardInterrupt)
    assert list(out.iterdir()) == []  # no library, no source, no compiler temporaries
    child = int(marker.read_text())
    time.sleep(0.2)
    try:  # the compiler's own child went with it (gone, or a zombie where no init reaps it)
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X")
