"""The HIP lane without an AMD GPU: every kernel compiles with HIPRTC, and the no-device paths are typed.

HIPRTC comes from Debian's ROCm 5.2 runtime (libamdhip64-5 + libhiprtc-builtins5,
which scripts/bootstrap.sh installs); it keeps hiprtc inside libamdhip64, so the
tests point hip-python at it through a folder of symlinks.  Each code object's
ELF header must say AMDGPU (e_machine 224) and the target in e_flags' low byte.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmafxd.lanes.gpu import kernels

ROCM_LIB = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
#: EF_AMDGPU_MACH values of the targets
ARCHES = {"gfx1036": 0x45, "gfx1030": 0x36, "gfx90a": 0x3F}


def _have_hip_python() -> bool:
    try:
        import hip  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def rocm_env(tmp_path_factory):
    if not _have_hip_python():
        pytest.skip("hip-python is not installed (vmafxd[hip])")
    if not ROCM_LIB.exists():
        pytest.skip(f"{ROCM_LIB} is missing: apt-get install libamdhip64-5 libhiprtc-builtins5")
    d = tmp_path_factory.mktemp("rocm")
    for name in ("libhiprtc.so", "libamdhip64.so"):
        (d / name).symlink_to(ROCM_LIB)
    env = dict(os.environ, LD_LIBRARY_PATH=str(d))
    return env


def _run(code: str, env) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_kernel_compiles_for_amd_targets(rocm_env):
    code = f"""
import json
from vmafxd.lanes import hip
from vmafxd.lanes.gpu import kernels
res = {{}}
for arch in {list(ARCHES)!r}:
    for name in kernels.available_sources():
        b = hip.hiprtc_compile(kernels.source(name), name, arch, [*kernels.COMMON_OPTIONS, *kernels.HIPRTC_OPTIONS])
        res[arch + "/" + name] = [b[:4].hex(), int.from_bytes(b[18:20], "little"), int.from_bytes(b[48:52], "little")]
print(json.dumps(res))
"""
    res = _run(code, rocm_env)
    assert len(res) == len(ARCHES) * len(kernels.available_sources())
    for key, (magic, machine, flags) in res.items():
        arch = key.split("/")[0]
        assert magic == "7f454c46", key
        assert machine == 224, key  # EM_AMDGPU
        assert flags & 0xFF == ARCHES[arch], (key, hex(flags))


def test_compile_errors_come_back_with_the_log(rocm_env):
    code = """
import json
from vmafxd.lanes import hip
from vmafxd.lanes.runtime import CompileError
try:
    hip.hiprtc_compile('extern "C" __global__ void k() { undeclared_thing = 1; }', "bad.cu", "gfx1036", [])
    print(json.dumps({"raised": False}))
except CompileError as e:
    print(json.dumps({"raised": True, "runtime": e.runtime, "has_name": "undeclared_thing" in e.log}))
"""
    assert _run(code, rocm_env) == {"raised": True, "runtime": "hip", "has_name": True}


def test_no_device_is_a_typed_readable_error(rocm_env):
    code = """
import json
from vmafxd.lanes import hip
from vmafxd.lanes.runtime import RuntimeUnavailable
try:
    hip.load()
    print(json.dumps({"raised": False}))
except RuntimeUnavailable as e:
    print(json.dumps({"raised": True, "runtime": e.runtime, "reason": e.reason}))
"""
    got = _run(code, rocm_env)
    if not got["raised"]:
        pytest.skip("an AMD GPU is present: the no-device path does not apply")
    assert got["runtime"] == "hip" and "no AMD GPU" in got["reason"]


def test_missing_runtime_library_is_a_typed_readable_error(tmp_path):
    if not _have_hip_python():
        pytest.skip("hip-python is not installed (vmafxd[hip])")
    code = """
import json
from vmafxd.lanes import hip
from vmafxd.lanes.runtime import RuntimeUnavailable
try:
    hip.load()
    print(json.dumps({"raised": False}))
except RuntimeUnavailable as e:
    print(json.dumps({"raised": True, "reason": e.reason}))
"""
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))  # an empty folder: no libamdhip64.so
    got = _run(code, env)
    if not got["raised"]:
        pytest.skip("libamdhip64.so is on the default library path here")
    assert "libamdhip64" in got["reason"]


def test_missing_hip_python_is_a_typed_readable_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake(name, *a, **k):
        if name == "hip" or name.startswith("hip."):
            raise ImportError("No module named 'hip'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    from vmafxd.lanes import hip as binding
    from vmafxd.lanes.runtime import RuntimeUnavailable

    monkeypatch.setattr(binding, "_runtime", None)
    with pytest.raises(RuntimeUnavailable) as e:
        binding.HipRuntime()
    assert e.value.runtime == "hip" and "hip-python" in e.value.reason
