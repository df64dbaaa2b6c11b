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


def _ptx(source: str, arch: str, *defines: str) -> str:
    """NVRTC's PTX of ``source`` for the virtual architecture ``arch`` (compute_XY), with
    ``defines`` ("NAME=VALUE") as -D options."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"k.cu", 0, [], [])
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *[o.encode() for o in kernels.NVRTC_OPTIONS],
                *[f"-D{d}".encode() for d in defines]]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _entries(ptx: str) -> dict[str, str]:
    """Each kernel's PTX body, by name."""
    out, name = {}, None
    for line in ptx.splitlines():
        if ".entry " in line:
            name = line.split(".entry ", 1)[1].split("(", 1)[0].strip()
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def test_vif_scale0_of_8_bit_samples_takes_the_tensor_cores_from_sm80():
    """vif.cu's VIF_MMA: the 8-bit scale-0 kernels' vertical pass as u8 matrix products
    (32 a warp: the means' 8, the three moments' 24), their horizontal pass too (VIF_HMMA: 32
    more, in a loop over a warp's two products), and the decimation's to scale 1 (8 more), on
    sm_80 and up; the scalar passes below and in every other kernel.  The GPU lane's tests
    hold the products to the CPU twin."""
    _nvrtc()
    src = kernels.source("vif.cu")
    mma = "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32"
    for arch in ("compute_90", "compute_80"):
        body = _entries(_ptx(src, arch))
        assert body["vx_vif_stats0_u8"].count(mma) == 32 + 32, arch
        assert body["vx_vif_stats0_down_u8"].count(mma) == 32 + 32 + 8, arch
        for name in ("vx_vif_stats0_down_u16", "vx_vif_stats1_down", "vx_vif_stats2_down", "vx_vif_stats3"):
            assert mma not in body[name], (arch, name)
    body = _entries(_ptx(src, "compute_90", "VIF_HMMA=0"))  # the vertical pass alone
    assert body["vx_vif_stats0_u8"].count(mma) == 32
    assert body["vx_vif_stats0_down_u8"].count(mma) == 32 + 8
    assert mma not in _ptx(src, "compute_75")
