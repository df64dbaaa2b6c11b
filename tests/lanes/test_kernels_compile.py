"""Every kernel compiles for the GPUs we target, with no GPU present.

NVRTC for sm_90 (the H200); HIPRTC for gfx1036/gfx1030/gfx90a lives in
test_hip_compile.py.  A compile error fails here with the compiler's log.
"""

import pytest

from vmafxd.lanes.gpu import kernels


def _nvrtc():
    try:
        from vmafxd.lanes import cuda

        version = cuda.compiler_version()
    except Exception as e:  # no cuda-bindings / nvrtc wheel
        pytest.skip(f"NVRTC is not installed here: {e}")
    return cuda, version


@pytest.mark.parametrize("name", kernels.available_sources())
def test_kernel_compiles_with_nvrtc_for_sm90(name, tmp_path, monkeypatch):
    cuda, version = _nvrtc()
    monkeypatch.setenv("VMAFXD_KERNEL_CACHE", str(tmp_path))
    cubin = kernels.compile_cached(name, "sm_90", version, cuda.nvrtc_compile, kernels.NVRTC_OPTIONS)
    # an ELF cubin for sm_90: machine EM_CUDA (190); NVRTC 13 writes the
    # SM number into bits 8..15 of e_flags (0x5a = 90)
    assert cubin[:4] == b"\x7fELF"
    assert int.from_bytes(cubin[18:20], "little") == 190
    assert (int.from_bytes(cubin[48:52], "little") >> 8) & 0xFF == 90
    # second call comes from the cache, byte for byte
    calls = []
    again = kernels.compile_cached(name, "sm_90", version, lambda *a: calls.append(a) or b"", kernels.NVRTC_OPTIONS)
    assert again == cubin and not calls


def test_every_declared_kernel_source_exists():
    from vmafxd import features

    for decl in features.all_declarations():
        if decl.kernel:
            assert decl.kernel in kernels.SOURCES, decl.name
