#!/usr/bin/env bash
# vmafxd side by side with libvmaf (its CPU and CUDA builds) on the same machine, in one run.
#
#   scripts/bench_vs_libvmaf.sh build    # libvmaf f85a8536, CPU and CUDA tools, into $LIBVMAF_BIN/{cpu,cuda}/vmaf
#   scripts/bench_vs_libvmaf.sh files    # synthetic y4m clips made here; libvmaf CPU, libvmaf CUDA, vmafxctl
#                                        # (private daemon, running daemon, in-process) and the read ceilings, timed
#   scripts/bench_vs_libvmaf.sh bench    # scripts/bench_gpu.py: daemon, engine alone, latency, 16 producers
#
# Each phase fits one 10-minute call of the device machine (docs/gpu-runs.md has the commands): every
# step is bounded by `timeout`, and the phase stops starting steps once BUDGET_S seconds have passed
# (the steps it skips are said, and counted as runs with no result). Results: $OUT/summary.txt (the
# machine, then RESULT / RATIO / ACCURACY lines from scripts/bench_vs_libvmaf_summary.py) and
# $OUT/logs_<phase>.tar.xz (every log, JSON and runs.tsv).
#
# Run from anywhere; paths are relative to the repository root. Knobs (environment):
#   OUT          results folder (default /tmp/vxbench-out; the device machine sets it)
#   LIBVMAF_BIN  folder holding cpu/vmaf and cuda/vmaf (default .libvmaf, git-ignored; carry it to the
#                device). A missing cuda/vmaf is skipped and said (a machine without CUDA).
#   PYTHON       the interpreter (default python3); .whl/*.whl, when present, is installed into /tmp/site
#                first (as scripts/h200_run.sh does)
#   VXLANE       vmafxd's lane (default cuda; cpu or emu to try the script on a machine without a GPU)
#   REPS         timed repetitions of each tool (default 3: medians)
#   THREADS      libvmaf CPU's --threads (default: every core, nproc)
#   SIZES        clips of the files phase, "WxH:FRAMES ..." (default 576x324:6000 1920x1080:1500 3840x2160:400)
#   CLIPS        scratch folder for the clips (default /tmp/vxclips; each size's pair is removed after it)
#   BUDGET_S     seconds after which no new step starts (default 520; no step runs past BUDGET_S + 20)
#   TOOLS        files: the timed tools (default "cat pyread cpu cuda vx vxs vxi"; the summary rates those there are)
#   VXDARGS      files: more arguments for the running daemon (e.g. "--files-keep 0 --log-level debug")
#   build: LIBVMAF_SRC (`git archive f85a8536 libvmaf model` of Netflix/vmaf, unpacked), NVCODEC
#          (nv-codec-headers, unpacked; without it only the CPU tool is built), ONLY (cpu or cuda: one of
#          the two; without nasm the CPU tool lacks SIMD, so build it where nasm is), LIBVMAF_BUILD
#          (scratch, default /tmp/vxlibvmaf-build), CUDA_HOME (default /usr/local/cuda)
#   bench: BENCH_SIZES (default 576x324,1920x1080,3840x2160), BENCH_FRAMES (default 960), PRODUCERS (default
#          16), PRODUCER_SIZE (default 1920x1080), LATENCY_SIZE (default 1920x1080)
set -u
phase="${1:-}"
case "$phase" in build|files|bench) ;; *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT="${OUT:-/tmp/vxbench-out}"
L="$OUT/logs"
S="$OUT/summary.txt"
mkdir -p "$L"
: > "$S"   # each run owns its OUT: a summary of this run only
LIBVMAF_BIN=$(mkdir -p "${LIBVMAF_BIN:-$ROOT/.libvmaf}" && cd "${LIBVMAF_BIN:-$ROOT/.libvmaf}" && pwd)
PYTHON="${PYTHON:-python3}"
VXLANE="${VXLANE:-cuda}"
REPS="${REPS:-3}"
THREADS="${THREADS:-$(nproc)}"
BUDGET_S="${BUDGET_S:-520}"
SITE=/tmp/site
START=$SECONDS

say() { echo "$*" | tee -a "$S"; }
over_budget() { [ $((SECONDS - START)) -ge "$BUDGET_S" ]; }
# bound SECONDS: the step's own bound, cut so that no step runs past BUDGET_S + 20 s (the call's limit
# must leave time for the summary and the tarball)
bound() { local left=$((BUDGET_S + 20 - (SECONDS - START))); [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
# step NAME SECONDS CMD... : a bounded, untimed step; its output into $L/NAME.log
step() {
    local name=$1 secs; secs=$(bound "$2"); shift 2
    if over_budget; then say "$name: SKIPPED (the phase's budget of ${BUDGET_S}s is spent)"; return 125; fi
    local t0=$SECONDS rc
    timeout "$secs" "$@" > "$L/$name.log" 2>&1
    rc=$?
    say "$name: rc=$rc $((SECONDS - t0))s"
    [ $rc -eq 0 ] || tail -n 5 "$L/$name.log" | sed "s/^/  [$name] /" | tee -a "$S"
    return $rc
}

if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        > "$L/pip.log" 2>&1 || { say "pip install of .whl failed:"; tail -n 5 "$L/pip.log" | tee -a "$S"; }
    export PYTHONPATH="$SITE:$ROOT:$ROOT/client"
else
    export PYTHONPATH="$ROOT:$ROOT/client${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 VMAFXD_KERNEL_CACHE="${VMAFXD_KERNEL_CACHE:-/tmp/kc}"
# Bytecode once, as an install has it, for every module the commands import (numpy's and the CUDA
# bindings' included), under a prefix of our own: where site-packages cannot be written (or the
# environment says PYTHONDONTWRITEBYTECODE, as on the device machine), every timed run would
# otherwise compile numpy from its sources (0.3-0.4 s a process on the H200), which an installed
# vmafxctl never does.
DONT_WRITE="${PYTHONDONTWRITEBYTECODE:-}"
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYCACHE:-/tmp/vxpycache}"
"$PYTHON" -m compileall -q -j 0 "$ROOT/client" "$ROOT/vmafxd" "$SITE" \
    $("$PYTHON" -c 'import os, numpy; print(os.path.dirname(numpy.__file__))' 2>/dev/null) \
    $("$PYTHON" -c 'import os, cuda.bindings as b; print(os.path.dirname(b.__file__))' 2>/dev/null) > /dev/null 2>&1 || true
VX=("$PYTHON" -c 'import sys; from vmafx.cli import main; sys.exit(main())')  # vmafxctl, not installed
CPU_VMAF="$LIBVMAF_BIN/cpu/vmaf"
CUDA_VMAF="$LIBVMAF_BIN/cuda/vmaf"
gpu() { command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used,temperature.gpu --format=csv,noheader 2>&1 | head -n 1 || echo "none (no nvidia-smi)"; }

say "=== $(date -u +%FT%TZ) bench_vs_libvmaf $phase; project $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$ROOT/.commit" 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
say "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p') x $(nproc); $("$PYTHON" --version 2>&1); numpy $("$PYTHON" -c 'import numpy; print(numpy.__version__)' 2>&1)"
say "gpu: $(gpu)"
say "python bytecode: under $PYTHONPYCACHEPREFIX (the environment's PYTHONDONTWRITEBYTECODE: ${DONT_WRITE:-unset})"

case "$phase" in
build)
    : "${LIBVMAF_SRC:?build needs LIBVMAF_SRC: a folder holding libvmaf/ and model/ of Netflix/vmaf at f85a8536}"
    LIBVMAF_BUILD="${LIBVMAF_BUILD:-/tmp/vxlibvmaf-build}"
    args=()
    if [ -n "${NVCODEC:-}" ]; then
        args=(--cuda --nvcodec "$NVCODEC" --cuda-home "${CUDA_HOME:-/usr/local/cuda}")
    else
        say "NVCODEC is not set: building the CPU tool only"
    fi
    case "${ONLY:-}" in
        "") ;;
        cuda) [ -n "${NVCODEC:-}" ] || { say "ONLY=cuda needs NVCODEC"; exit 2; }; args+=(--no-cpu) ;;
        cpu) args=() ;;
        *) say "ONLY must be cpu or cuda, not '$ONLY'"; exit 2 ;;
    esac
    [ "${ONLY:-}" = cuda ] || command -v nasm > /dev/null || say "WARNING: no nasm here: libvmaf's CPU tool is built without its SIMD (slower than a user's build); build where nasm is"
    command -v xxd > /dev/null || say "WARNING: no xxd here: libvmaf is built without its built-in models and --model version=... will fail"
    # the build is the project's own script; this phase only puts its tools where the others look
    step build_libvmaf 590 bash scripts/build_libvmaf.sh "${args[@]}" "$LIBVMAF_SRC" "$LIBVMAF_BUILD" || exit 1
    for kind in cpu cuda; do
        if [ -x "$LIBVMAF_BUILD/$kind/vmaf" ]; then
            mkdir -p "$LIBVMAF_BIN/$kind"
            cp "$LIBVMAF_BUILD/$kind/vmaf" "$LIBVMAF_BIN/$kind/vmaf"
            cp "$LIBVMAF_BUILD/$kind/vmaf" "$OUT/vmaf_$kind"   # so a build on the device machine comes back
            say "$kind: $LIBVMAF_BIN/$kind/vmaf ($("$LIBVMAF_BIN/$kind/vmaf" --version 2>&1), $(stat -c %s "$LIBVMAF_BIN/$kind/vmaf") bytes)"
        fi
    done
    ;;
files)
    CLIPS="${CLIPS:-/tmp/vxclips}"
    SIZES="${SIZES:-576x324:6000 1920x1080:1500 3840x2160:400}"
    mkdir -p "$CLIPS"
    [ -x "$CPU_VMAF" ] || { say "no libvmaf CPU tool at $CPU_VMAF (run the build phase or set LIBVMAF_BIN)"; exit 1; }
    if [ -x "$CUDA_VMAF" ]; then HAVE_CUDA=1; else HAVE_CUDA=0; say "libvmaf CUDA: SKIPPED, no tool at $CUDA_VMAF"; fi
    say "libvmaf: cpu $("$CPU_VMAF" --version 2>&1) --threads $THREADS$([ $HAVE_CUDA = 1 ] && echo "; cuda $("$CUDA_VMAF" --version 2>&1)")"
    say "vmafxd lane: $VXLANE; repetitions: $REPS; sizes: $SIZES; scratch: $(df -h "$CLIPS" | tail -n 1 | awk '{print $1, $4 " free"}')"
    TOOLS="${TOOLS:-cat pyread cpu cuda vx vxs vxi}"
    say "tools: $TOOLS$([ -n "${VXDARGS:-}" ] && echo "; running daemon's extra arguments: $VXDARGS")"
    TSV="$L/runs.tsv"
    printf 'size\tframes\ttool\trep\trc\twall_s\tuser_s\tsys_s\tdaemon_cpu_s\tlog\tjson\n' > "$TSV"
    TCK=$(getconf CLK_TCK)
    ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }  # utime + stime of a process
    # timed SIZE FRAMES TOOL REP SECONDS CMD... : wall/user/sys of CMD (and what it waited for) into runs.tsv
    timed() {
        local size=$1 frames=$2 tool=$3 rep=$4 secs; secs=$(bound "$5"); shift 5
        local name="${tool}_${size}_r$rep" json="-" rc wall=- user=- sys=- dcpu=- d0=0
        case " $TOOLS " in *" $tool "*) ;; *) return 0 ;; esac
        case "$tool" in cpu|cuda|vx|vxs|vxi) json="$name.json" ;; esac
        if over_budget; then
            say "$name: SKIPPED (budget)"; rc=125
        else
            [ "$tool" = vxs ] && d0=$(ticks "$VXD")
            { TIMEFORMAT='%R %U %S'; time timeout "$secs" "$@" > "$L/$name.log" 2>&1 ; echo $? > "$L/$name.rc"; } 2> "$L/$name.time"
            rc=$(cat "$L/$name.rc")
            read -r wall user sys < <(tail -n 1 "$L/$name.time")
            [ "$tool" = vxs ] && dcpu=$(awk -v a="$d0" -v b="$(ticks "$VXD")" -v t="$TCK" 'BEGIN {printf "%.2f", (b - a) / t}')
            echo "  $name: rc=$rc wall ${wall}s user ${user}s sys ${sys}s$([ "$dcpu" = - ] || echo ", running daemon ${dcpu}s CPU")" >> "$S"
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$frames" "$tool" "$rep" "$rc" "$wall" "$user" "$sys" \
            "$dcpu" "$name.log" "$json" >> "$TSV"
    }
    # A daemon that keeps running between the vxs runs: file to score without a daemon's start.
    SOCK="$CLIPS/vxd.sock"
    # shellcheck disable=SC2086  # VXDARGS: words
    "$PYTHON" -m vmafxd --socket "$SOCK" --lane "$VXLANE" --log-level warning ${VXDARGS:-} > "$L/vxd.log" 2>&1 &
    VXD=$!
    for _ in $(seq 120); do "${VX[@]}" status --socket "$SOCK" > "$L/vxd_status.log" 2>&1 && break; sleep 0.5; done
    say "running daemon (pid $VXD): $(head -n 2 "$L/vxd_status.log" | tr '\n' ' ')"
    for spec in $SIZES; do
        sz=${spec%%:*}; n=${spec##*:}
        ref="$CLIPS/ref_$sz.y4m"; dist="$CLIPS/dist_$sz.y4m"
        say "--- $sz: $n frames"
        step "make_$sz" 240 "$PYTHON" scripts/make_clips.py "$CLIPS" "$spec" || continue
        say "  $(cat "$L/make_$sz.log")"
        # Untimed first runs: the lane compiles (or loads) its kernels, the running daemon opens its first session.
        step "vxwarm_$sz" 240 "${VX[@]}" score --private --lane "$VXLANE" -r "$ref" -d "$dist" --frames 48 --json -o "$L/vxwarm_$sz.json" -q
        step "vxswarm_$sz" 240 "${VX[@]}" score --socket "$SOCK" --lane "$VXLANE" -r "$ref" -d "$dist" --frames 48 --json -o "$L/vxswarm_$sz.json" -q
        for r in $(seq "$REPS"); do  # the tools alternate, so a slow stretch of the machine hits each alike
            timed "$sz" "$n" cat "$r" 120 sh -c 'exec cat "$0" "$1" > /dev/null' "$ref" "$dist"
            timed "$sz" "$n" pyread "$r" 120 "$PYTHON" scripts/y4m_read_rate.py "$ref" "$dist"
            timed "$sz" "$n" cpu "$r" 200 "$CPU_VMAF" -r "$ref" -d "$dist" --threads "$THREADS" --json -o "$L/cpu_${sz}_r$r.json" -q
            [ $HAVE_CUDA = 1 ] && timed "$sz" "$n" cuda "$r" 200 "$CUDA_VMAF" -r "$ref" -d "$dist" --gpumask 0 --json -o "$L/cuda_${sz}_r$r.json" -q
            timed "$sz" "$n" vx "$r" 240 "${VX[@]}" score --private --lane "$VXLANE" -r "$ref" -d "$dist" --json -o "$L/vx_${sz}_r$r.json" -q
            timed "$sz" "$n" vxs "$r" 240 "${VX[@]}" score --socket "$SOCK" --lane "$VXLANE" -r "$ref" -d "$dist" --json -o "$L/vxs_${sz}_r$r.json" -q
            timed "$sz" "$n" vxi "$r" 240 "${VX[@]}" score --in-process --lane "$VXLANE" -r "$ref" -d "$dist" --json -o "$L/vxi_${sz}_r$r.json" -q
        done
        # libvmaf CUDA falls back to the CPU when it cannot start CUDA: say so where it did
        grep -l -i "using cpu\|cuda.*fail\|no cuda" "$L"/cuda_"${sz}"_r*.log 2>/dev/null | sed 's/^/  WARNING: libvmaf CUDA complained: /' | tee -a "$S"
        rm -f "$ref" "$dist"
        "$PYTHON" scripts/bench_vs_libvmaf_summary.py files "$L" > "$OUT/results.txt" 2>&1
        grep "^RESULT $sz\|^RATIO $sz" "$OUT/results.txt" | sed 's/^/  /'
        say "  gpu: $(gpu)"
    done
    kill "$VXD" 2>/dev/null; wait "$VXD" 2>/dev/null
    say "running daemon's log (last lines): $(tail -n 3 "$L/vxd.log" | tr '\n' ' ')"
    # A repetition's JSON log whose frames equal the first's becomes {"same_as": first} (smaller logs; the
    # summary script follows the reference, so it can be run again on the unpacked logs).
    "$PYTHON" - "$L" <<'PY'
import json, pathlib, sys
L = pathlib.Path(sys.argv[1])
for p in sorted(L.glob("*_r1.json")):
    try:
        first = json.loads(p.read_text())
    except ValueError:
        continue
    for q in sorted(L.glob(p.name.replace("_r1.json", "_r*.json"))):
        try:
            d = json.loads(q.read_text())
        except ValueError:
            continue
        if q != p and d.get("frames") == first.get("frames") and d.get("pooled_metrics") == first.get("pooled_metrics"):
            q.write_text(json.dumps({"same_as": p.name}))
PY
    ;;
bench)
    BENCH_SIZES="${BENCH_SIZES:-576x324,1920x1080,3840x2160}"
    BENCH_FRAMES="${BENCH_FRAMES:-960}"
    PRODUCERS="${PRODUCERS:-16}"
    LATENCY_SIZE="${LATENCY_SIZE:-1920x1080}"
    PRODUCER_SIZE="${PRODUCER_SIZE:-1920x1080}"
    BG=("$PYTHON" scripts/bench_gpu.py --lane "$VXLANE")
    case "$VXLANE" in cuda|hip) ;; *) BG+=(--memfd) ;; esac   # lanes without device imports get host buffers
    step bench_daemon 240 "${BG[@]}" --sizes "$BENCH_SIZES" --frames "$BENCH_FRAMES" --repeats 3
    if [ "$VXLANE" = cuda ]; then
        step bench_engine 120 "${BG[@]}" --engine-only --sizes "$BENCH_SIZES" --frames 1024 --repeats 3
    else
        say "bench_engine: SKIPPED (--engine-only times the CUDA engine; lane $VXLANE)"
    fi
    step bench_latency 90 "${BG[@]}" --sizes "$LATENCY_SIZE" --inflight 4 --frames $((BENCH_FRAMES / 3)) --repeats 3
    # N producers of 16 frames in flight each (16 x 16 = 256: the default per-uid frame limit, raised anyway)
    step bench_producers 180 "${BG[@]}" --sizes "$PRODUCER_SIZE" --producers "$PRODUCERS" --inflight 16 \
        --frames "$BENCH_FRAMES" --repeats 2
    "$PYTHON" scripts/bench_vs_libvmaf_summary.py bench "$L" > "$OUT/results.txt" 2>&1
    say "gpu after: $(gpu)"
    ;;
esac
if [ -f "$OUT/results.txt" ]; then
    say "--- results ($phase)"
    tee -a "$S" < "$OUT/results.txt"
fi
(cd "$OUT" && XZ_OPT=-T0 tar -cJf "logs_$phase.tar.xz" logs && rm -rf logs)
say "=== done in $((SECONDS - START))s; $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
