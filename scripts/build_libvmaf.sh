#!/usr/bin/env bash
# Build libvmaf's own command-line tool `vmaf` from a libvmaf source tree, outside this repository,
# so that benchmarks (scripts/bench_cpu.py --libvmaf) and exactness checks can run it beside vmafxd.
#
#   scripts/build_libvmaf.sh [--cuda] [--nvcodec DIR] [--cuda-home DIR] [--no-cpu] SRC_DIR BUILD_DIR
#
# SRC_DIR   a Netflix/vmaf tree holding libvmaf/ and model/ (e.g. `git archive f85a8536 libvmaf model`,
#           or a checkout); it is only read: its two folders are copied to BUILD_DIR/src first.
# BUILD_DIR where everything goes: BUILD_DIR/src (the copy), BUILD_DIR/src/libvmaf/build_{cpu,cuda}
#           (meson build trees), and the tools BUILD_DIR/cpu/vmaf and BUILD_DIR/cuda/vmaf.
#
# Both builds: release, libvmaf linked statically into the tool, the float feature extractors on
# (float_vif, float_adm, float_motion, float_ssim, float_ms_ssim) and every built-in model compiled in,
# so that `--feature NAME` and `--model version=NAME` work without JSON files beside the binary.
# Needs gcc, meson (>= 0.56.1), ninja, nasm (x86 SIMD; without it the build uses C only and is slower)
# and xxd (built-in models). On Debian: apt-get install -y meson ninja-build nasm xxd.
#
# --cuda also builds the CUDA tool (needs nvcc, and bin2c from the same toolkit; CUDA_HOME or
# --cuda-home, default /usr/local/cuda). libvmaf's CUDA code reaches the driver through the loader of
# FFmpeg's nv-codec-headers (`ffnvcodec/dynlink_loader.h`): give a checkout with --nvcodec DIR (its
# include/ffnvcodec is used). libvmaf 3.2 calls a few driver entry points that older headers' loader
# does not list; they are added to a private copy of the headers (BUILD_DIR/inc) when missing.
# libvmaf's meson rule for .cu files uses paths relative to libvmaf/<builddir>, which is why the build
# trees sit inside the copied source. The CUDA half builds on the development machine (CUDA 13.0, no GPU;
# nv-codec-headers f2fb9b36: all seven entry points added, the tool links, `vmaf --version` runs, and
# without a driver it says so and falls back to the CPU); it is run on a GPU by
# scripts/bench_vs_libvmaf.sh files. The CPU half reproduces shared/reference/scores (p01, 4 models).
set -euo pipefail

usage() { sed -n '5p' "$0" | sed 's/^# *//' >&2; exit 2; }
want_cpu=1 want_cuda=0 nvcodec="" cuda_home="${CUDA_HOME:-/usr/local/cuda}"
while [ $# -gt 0 ]; do
    case "$1" in
        --cuda) want_cuda=1 ;;
        --no-cpu) want_cpu=0 ;;
        --nvcodec) nvcodec="$2"; shift ;;
        --cuda-home) cuda_home="$2"; shift ;;
        -h|--help) usage ;;
        --*) echo "build_libvmaf.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
    shift
done
[ $# -eq 2 ] || usage
src_in=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
[ -f "$src_in/libvmaf/meson.build" ] && [ -d "$src_in/model" ] \
    || { echo "build_libvmaf.sh: $src_in must hold libvmaf/meson.build and model/" >&2; exit 2; }
for tool in meson ninja cc; do
    command -v "$tool" >/dev/null || { echo "build_libvmaf.sh: $tool not found" >&2; exit 2; }
done
command -v nasm >/dev/null || echo "build_libvmaf.sh: nasm not found: libvmaf's SIMD is left out" >&2
if [ "$want_cuda" = 1 ]; then  # checked before anything is built
    [ -n "$nvcodec" ] && [ -f "$nvcodec/include/ffnvcodec/dynlink_loader.h" ] \
        || { echo "build_libvmaf.sh: --cuda needs --nvcodec DIR holding include/ffnvcodec (nv-codec-headers)" >&2; exit 2; }
    nvcodec=$(cd "$nvcodec" && pwd)
    [ -x "$cuda_home/bin/nvcc" ] || { echo "build_libvmaf.sh: no nvcc in $cuda_home/bin (set --cuda-home)" >&2; exit 2; }
    command -v python3 >/dev/null || { echo "build_libvmaf.sh: --cuda needs python3 (header patch)" >&2; exit 2; }
fi

# A fresh copy each time: the source may be read-only, and a stale copy would hide an edit.
rm -rf "$out/src"
mkdir -p "$out/src"
cp -a "$src_in/libvmaf" "$src_in/model" "$out/src/"
chmod -R u+w "$out/src"
lib="$out/src/libvmaf"

asm=true
command -v nasm >/dev/null || asm=false
opts=(--buildtype=release -Ddefault_library=static -Denable_tests=false -Denable_docs=false
      -Denable_float=true -Dbuilt_in_models=true -Denable_asm=$asm)

if [ "$want_cpu" = 1 ]; then
    meson setup "$lib/build_cpu" "$lib" "${opts[@]}"
    ninja -C "$lib/build_cpu" tools/vmaf
    mkdir -p "$out/cpu"
    cp "$lib/build_cpu/tools/vmaf" "$out/cpu/vmaf"
    echo "cpu: $out/cpu/vmaf ($("$out/cpu/vmaf" --version 2>&1))"
fi

if [ "$want_cuda" = 1 ]; then
    rm -rf "$out/inc"
    mkdir -p "$out/inc"
    cp -r "$nvcodec/include/ffnvcodec" "$out/inc/"
    # Add to our copy each driver entry point libvmaf 3.2's CUDA code calls through the loader and the
    # headers lack: a typedef in dynlink_cuda.h, a member and a LOAD_SYMBOL line in dynlink_loader.h.
    python3 - "$out/inc/ffnvcodec" <<'PY'
import re, sys
folder = sys.argv[1]
# name -> C parameter list, from the CUDA driver API (cuda.h) for the entry points libvmaf/src/cuda uses
needed = {
    "cuCtxGetStreamPriorityRange": "int *leastPriority, int *greatestPriority",
    "cuStreamCreateWithPriority": "CUstream *phStream, unsigned int flags, int priority",
    "cuCtxSynchronize": "void",
    "cuLaunchHostFunc": "CUstream hStream, CUhostFn *fn, void *userData",
    "cuMemFreeAsync": "CUdeviceptr dptr, CUstream hStream",
    "cuMemFreeHost": "void *p",
    "cuMemHostAlloc": "void **pp, size_t bytesize, unsigned int Flags",
}
cuda_h = open(f"{folder}/dynlink_cuda.h").read()
loader_h = open(f"{folder}/dynlink_loader.h").read()
missing = [n for n in needed if not re.search(rf"\bt{n}\s*\*\s*{n}\s*;", loader_h)]
if missing:
    # insert after the typedef and the loader lines of cuStreamSynchronize, which every version has
    anchor_t = re.search(r"typedef CUresult CUDAAPI tcuStreamSynchronize\([^)]*\);\n", cuda_h)
    anchor_m = re.search(r"\n\s*tcuStreamSynchronize \*cuStreamSynchronize;", loader_h)
    anchor_l = re.search(r"\n\s*LOAD_SYMBOL\(cuStreamSynchronize,[^\n]*", loader_h)
    if not (anchor_t and anchor_m and anchor_l):
        sys.exit("nv-codec-headers: cuStreamSynchronize not found; cannot place the missing entry points")
    typedefs = "".join(f"typedef CUresult CUDAAPI t{n}({needed[n]});\n" for n in missing
                       if not re.search(rf"\bt{n}\(", cuda_h))
    if "cuLaunchHostFunc" in missing and "CUhostFn" not in cuda_h:
        typedefs = "typedef void CUDAAPI CUhostFn(void *userData);\n" + typedefs
    cuda_h = cuda_h[:anchor_t.end()] + typedefs + cuda_h[anchor_t.end():]
    members = "".join(f"\n    t{n} *{n};" for n in missing)
    loads = "".join(f'\n    LOAD_SYMBOL({n}, t{n}, "{n}");' for n in missing)
    # the load lines come after the members in the file: insert the later one first
    loader_h = loader_h[:anchor_l.end()] + loads + loader_h[anchor_l.end():]
    loader_h = loader_h[:anchor_m.end()] + members + loader_h[anchor_m.end():]
    open(f"{folder}/dynlink_cuda.h", "w").write(cuda_h)
    open(f"{folder}/dynlink_loader.h", "w").write(loader_h)
print("nv-codec-headers: added", ", ".join(missing) if missing else "nothing (all present)")
PY
    # libvmaf's meson compiles each .cu for sm_75/80/90 (and sm_100/120 with CUDA > 12.8): an H200
    # (sm_90) runs machine code, no JIT. nvcc gets no c_args: its include goes through NVCC_APPEND_FLAGS.
    export PATH="$cuda_home/bin:$PATH"
    meson setup "$lib/build_cuda" "$lib" "${opts[@]}" -Denable_cuda=true -Denable_nvcc=true \
        -Dc_args="-I$out/inc" -Dcpp_args="-I$out/inc"
    NVCC_APPEND_FLAGS="-I$out/inc" ninja -C "$lib/build_cuda" tools/vmaf
    mkdir -p "$out/cuda"
    cp "$lib/build_cuda/tools/vmaf" "$out/cuda/vmaf"
    echo "cuda: $out/cuda/vmaf ($("$out/cuda/vmaf" --version 2>&1))"
fi
