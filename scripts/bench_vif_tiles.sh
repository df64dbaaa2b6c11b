#!/usr/bin/env bash
# Times the 8-bit scale-0 VIF statistics kernel (vif.cu) in several variants, against the kernel
# of another revision (OLD_REV, default: the one before the folded taps), on 32 random 1080p
# frames: one binary a variant.
#   scripts/bench_vif_tiles.sh build [DIR]   # nvcc here (sm_90), binaries into DIR (default .vifbench)
#   scripts/bench_vif_tiles.sh run [DIR]     # on the GPU machine: each variant's µs per batch and a
#                                            # checksum of its sums (every variant must print the same;
#                                            # the *_down variants also the same scale-1 checksum)
# Variants: old_* (OLD_REV's vif.cu), the tile shapes, and the arithmetic (vif.cu's VIF_VFOLD /
# VIF_HFOLD / VIF_HSPLIT: which passes fold the mirrored taps, how the horizontal moments sum;
# VIF_MMA=0: the passes of scale 0 on the CUDA cores, not the tensor cores; VIF_HMMA=0: its
# horizontal pass alone there);
# old_stats_down vs fused_down: scale 0's statistics and the decimation to scale 1 in two
# launches (before) or one (vx_vif_stats0_down_u8, what the lane launches now).
set -eu
cmd=${1:-}; dir=${2:-.vifbench}
cd "$(dirname "$0")/.."
case "$cmd" in
build)
    mkdir -p "$dir"
    tmp=$(mktemp -d)
    cat vmafxd/features/kernels/vmafx_prelude.h vmafxd/features/kernels/vif.cu > "$tmp/vif_new.cu"
    rev=${OLD_REV:-07820bb}
    { git show "$rev:vmafxd/features/kernels/vmafx_prelude.h"; git show "$rev:vmafxd/features/kernels/vif.cu"; } > "$tmp/vif_old.cu"
    one() {  # NAME SOURCE TW TH [-D...]
        local name=$1 src=$2 tw=$3 th=$4; shift 4
        nvcc -O3 -arch=sm_90 -fmad=false -I"$tmp" -DKERNEL_SOURCE="\"$src\"" -DVARIANT="\"$name\"" \
            -DTW_HOST="$tw" -DTH_HOST="$th" "$@" scripts/bench_vif_tiles.cu -o "$dir/vb_$name"
    }
    one old_48x32 vif_old.cu 48 32
    one old_stats_down vif_old.cu 48 32 -DSEPARATE_DOWN
    one 48x32_default vif_new.cu 48 32
    one fused_down vif_new.cu 48 32 -DFUSED
    one fused_down_unfolded vif_new.cu 48 32 -DFUSED -DVIF_SYM=0
    one unfolded vif_new.cu 48 32 -DVIF_SYM=0
    one hfold_split2 vif_new.cu 48 32 -DVIF_HFOLD=1
    one hfold_split3 vif_new.cu 48 32 -DVIF_HFOLD=1 -DVIF_HSPLIT=3
    one hfold_wide vif_new.cu 48 32 -DVIF_HFOLD=1 -DVIF_HSPLIT=0
    one fused_down_treesums vif_new.cu 48 32 -DFUSED -DVIF_BSUM=0
    one fused_down_int64 vif_new.cu 48 32 -DFUSED -DVIF_HF64=0
    one fused_down_scalar_vertical vif_new.cu 48 32 -DFUSED -DVIF_MMA=0
    one fused_down_scalar_horizontal vif_new.cu 48 32 -DFUSED -DVIF_HMMA=0
    one fused_down_r4x3 vif_new.cu 48 32 -DFUSED -DVIF_TW=48 -DVIF_TH=32 -DVIF_RV=4 -DVIF_RH=3 -DVIF_STATS_MINB=3
    one fused_down_int64_r4x3 vif_new.cu 48 32 -DFUSED -DVIF_HF64=0 -DVIF_TW=48 -DVIF_TH=32 -DVIF_RV=4 -DVIF_RH=3 -DVIF_STATS_MINB=3
    v() { one "$1x$2_r$3x$4_b$5" vif_new.cu "$1" "$2" -DVIF_TW="$1" -DVIF_TH="$2" -DVIF_RV="$3" -DVIF_RH="$4" -DVIF_STATS_MINB="$5"; }
    v 48 32 4 6 3; v 48 32 8 3 2; v 32 32 4 2 4; v 64 16 4 4 3
    rm -rf "$tmp"; ls "$dir"
    ;;
run)
    for b in "$dir"/vb_*; do "$b"; done
    ;;
*) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
