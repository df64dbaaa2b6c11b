#!/usr/bin/env bash
# Float VIF's statistics kernels (float_vif.cu) timed scale by scale on a batch of 32 1080p
# frames, a build of this tree against a build of another revision (OLD_REV, default HEAD):
#   scripts/bench_float_vif.sh build [DIR]   # nvcc here (sm_90), binaries into DIR (default .fvifbench)
#   scripts/bench_float_vif.sh run [DIR]     # on the GPU machine: µs a batch per scale, and a checksum of
#                                            # every scale's row sums and pictures (all builds must agree)
# VARIANTS="name:-DX=1,-DZ=2 name2:-DY=0" adds builds of this tree with those defines.
set -eu
cmd=${1:-}; dir=${2:-.fvifbench}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
case "$cmd" in
build)
    mkdir -p "$dir"
    tmp=$(mktemp -d)
    # a revision's translation unit, as its kernels.source() makes it
    tu() {  # ROOT OUT
        (cd "$1" && "$PY" -c 'import sys; from vmafxd.lanes.gpu import kernels; sys.stdout.write(kernels.source("float_vif.cu"))') > "$2"
    }
    mkdir -p "$tmp/old"
    git archive "${OLD_REV:-HEAD}" vmafxd | tar -x -C "$tmp/old"
    tu "$tmp/old" "$tmp/fvif_old.cu"
    tu "$PWD" "$tmp/fvif_new.cu"
    cmp -s "$tmp/fvif_old.cu" "$tmp/fvif_new.cu" && echo "note: this tree's float_vif.cu is ${OLD_REV:-HEAD}'s" >&2
    "$PY" - "$tmp/taps.h" <<'PY'
import sys
from vmafxd.features._float_vif_core import gaussian_of_width
with open(sys.argv[1], "w") as f:
    for n in (17, 9, 5, 3):
        t = gaussian_of_width(n)
        f.write(f"static const float fv_bench_taps{n}[{n}] = {{{', '.join(float(v).hex() for v in t)}}};\n")
PY
    one() {  # NAME SOURCE [-D...]
        local name=$1 src=$2; shift 2
        nvcc -O3 -arch=sm_90 -fmad=false -I"$tmp" -DKERNEL_SOURCE="\"$src\"" -DTAPS_HEADER="\"taps.h\"" \
            -DVARIANT="\"$name\"" "$@" scripts/bench_float_vif.cu -o "$dir/fb_$name"
    }
    one old fvif_old.cu
    one new fvif_new.cu
    for v in ${VARIANTS:-}; do one "${v%%:*}" fvif_new.cu $(echo "${v#*:}" | tr , " "); done
    rm -rf "$tmp"; ls "$dir"
    ;;
run)
    for content in noise flat; do
        for round in 1 2; do for b in "$dir"/fb_*; do "$b" "$content"; done; done
    done
    ;;
*) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
