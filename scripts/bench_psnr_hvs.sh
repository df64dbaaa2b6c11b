#!/usr/bin/env bash
# Times the PSNR-HVS kernels (psnr_hvs.cu) in several shapes, and the one-launch kernel before
# the terms/sum split (from git: OLD_REV), on 32 random 1080p 8-bit 4:2:0 frames: one binary a variant.
#   scripts/bench_psnr_hvs.sh build [DIR]   # nvcc here (sm_90), binaries into DIR (default .hvsbench)
#   scripts/bench_psnr_hvs.sh run [DIR]     # on the GPU machine: each variant's µs per batch (terms and
#                                           # sum kernels apart) and a checksum of its 96 plane sums
#                                           # (every variant, the old one too, must print the same)
set -eu
cmd=${1:-}; dir=${2:-.hvsbench}
cd "$(dirname "$0")/.."
case "$cmd" in
build)
    mkdir -p "$dir"; rm -f "$dir"/hb_*
    tmp=$(mktemp -d)
    py=${PYTHON:-python3}
    PYTHONPATH=$PWD:$PWD/client "$py" -c "from vmafxd.lanes.gpu import kernels; print(kernels.source('psnr_hvs.cu'))" \
        > "$tmp/hvs_new.cu"
    rev=${OLD_REV:-4e81e15}
    { git show "$rev:vmafxd/features/kernels/vmafx_prelude.h"
      PYTHONPATH=$PWD:$PWD/client "$py" -c "from vmafxd.lanes.gpu import kernels; print(kernels.kernel_tables('psnr_hvs.cu'))" \
          | grep -v 'hvs_mask\['  # the old source computes its masks itself
      git show "$rev:vmafxd/features/kernels/psnr_hvs.cu"; } > "$tmp/hvs_old.cu"
    one() {  # NAME SOURCE [-D...]
        local name=$1 src=$2; shift 2
        nvcc -O3 -arch=sm_90 -fmad=false -std=c++17 -DVX_KERNELS=1 -I"$tmp" -DKERNEL_SOURCE="\"$src\"" \
            -DVARIANT="\"$name\"" "$@" scripts/bench_psnr_hvs.cu -o "$dir/hb_$name"
    }
    one old hvs_old.cu -DOLD_KERNEL
    one new hvs_new.cu  # the defaults: chunk 16, 1024 sum threads, split phases, no register cap
    v() { one "c$1_t$2_mb$3_split$4" hvs_new.cu -DHVS_CHUNK="$1" -DHVS_SUM_THREADS="$2" -DHVS_TERMS_MIN_BLOCKS="$3" \
              -DHVS_SPLIT_PHASES="$4"; }
    v 16 1024 1 0; v 16 1024 4 1; v 16 1024 5 1; v 8 1024 1 1; v 32 1024 1 1; v 16 512 1 1; v 32 512 1 1
    rm -rf "$tmp"; ls "$dir"
    ;;
run)
    for b in "$dir"/hb_*; do "$b"; done
    ;;
*) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
