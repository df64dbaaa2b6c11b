#!/usr/bin/env bash
# A run on the NVIDIA H200 device machine, in phases (each call of the device tool is bounded):
#   scripts/h200_run.sh tests    GPU lane tests (cuda), GL tests
#   scripts/h200_run.sh bench    benchmarks (daemon and engine), GL scoring script
#   scripts/h200_run.sh engine   the engine alone per feature at 1080p, each kernel's time (ncu), VIF tile shapes
#   scripts/h200_run.sh kernels  chosen features alone at 1080p (ENGINE_FEATURES), then each one's kernels (ncu)
#   scripts/h200_run.sh libvmaf  libvmaf's own µs a 1080p frame per feature (CPU 1 thread, every core, CUDA): carry .libvmaf
#   scripts/h200_run.sh host     the daemon's host path: the producer's ring, --lane-process, pinning (ROUNDS rounds)
#   scripts/h200_run.sh sanitize compute-sanitizer memcheck (ciede, float kernels) and racecheck (staged float sums)
# Expects carried: .whl (trio, pytest-trio, PyOpenGL wheels), .gl (GL loader debs), and
# optionally .h200ref (a copy of reference pairs in ../shared/reference's layout).
# Logs go to $OUT; each step is bounded so one slow step cannot eat the run.
# Knobs: LANES_K (pytest -k for tests/lanes), LANES_N (its processes), LANES_PART (1 or 2: half of tests/lanes),
# *_S (each step's bound in seconds),
# DAEMON_ONLY=1 (bench: skip the engine-only and GL scoring steps).
set -u
phase="${1:-tests}"
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD:$PWD/client
if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" / ; done; ldconfig; fi
[ -d .h200ref ] && export VMAFX_REFERENCE="$PWD/.h200ref"
export PYTHONUNBUFFERED=1 VMAFXD_KERNEL_CACHE=/tmp/kc PYOPENGL_PLATFORM=egl
if [ ! -e /usr/share/glvnd/egl_vendor.d/10_nvidia.json ] && [ -e /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ]; then
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee -a "$OUT/summary.txt"
step() {  # step NAME SECONDS CMD...
    local name=$1 secs=$2; shift 2
    echo "=== $name" | tee -a "$OUT/summary.txt"
    local t0=$SECONDS
    timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
    tail -n "${TAIL:-30}" "$OUT/$name.log" >> "$OUT/summary.txt"
}
case "$phase" in
    tests)
        # the suite takes longer than one call (1,460 tests with .h200ref; the first 31 files alone
        # 137-144 s on 14 processes): LANES_PART=1 or 2 runs one half, unset both in one call.
        # LANES_N processes (pytest-xdist, in the device's image), a test file each at a time; -v,
        # so a call cut by its bound still shows which tests finished.  test_vif_motion_kernels.py
        # goes test by test instead (--dist load): its nine compile variants of vif.cu take about 100 s
        # each on a loaded machine, 800 s in one process (gpu-runs.md, twenty-second session).
        slow=tests/lanes/test_vif_motion_kernels.py
        files=$(ls tests/lanes/test_*.py | grep -vx "$slow" | awk -v part="${LANES_PART:-0}" \
            '{n = split($0, a, "/"); f = a[n]; first = f < "test_lane_process_x"; if (part == 0 || (part == 1) == first) print}')
        step lanes ${LANES_S:-540} python3 -m pytest -p no:cacheprovider -v -rfEs $files -k "${LANES_K:-not emu}" \
            -n "${LANES_N:-14}" --dist loadfile --durations=20
        [ "${LANES_PART:-0}" != 1 ] && step lanes_vif ${LANES_VIF_S:-240} python3 -m pytest -p no:cacheprovider -v -rfEs \
            "$slow" -k "${LANES_K:-not emu}" -n "${LANES_N:-14}" --dist load --durations=10
        [ "${LANES_PART:-0}" != 1 ] && TAIL=60 step gl ${GL_S:-150} python3 -m pytest -p no:cacheprovider -s -v -rs tests/gl
        ;;
    bench)
        step bench_daemon ${DAEMON_S:-170} python3 scripts/bench_gpu.py --frames 960 --repeats 3
        step bench_light ${LIGHT_S:-90} python3 scripts/bench_gpu.py --inflight 4 --frames 300 --repeats 3
        step bench_protocol ${PROTO_S:-60} python3 scripts/bench_gpu.py --sizes 64x64 --models "" --features psnr --frames 3000 --repeats 3
        [ -z "${DAEMON_ONLY:-}" ] && step bench_engine ${ENGINE_S:-80} python3 scripts/bench_gpu.py --engine-only --frames 1024 --repeats 3
        [ -z "${DAEMON_ONLY:-}" ] && step gl_score ${GLS_S:-60} python3 scripts/gl_score.py --lane cuda --twin
        ;;
    engine)
        # the engine alone at 1080p: the model, then every feature by itself; each kernel's share (ncu);
        # the VIF statistics kernel's tile shapes and PSNR-HVS's variants (built here beforehand:
        # scripts/bench_vif_tiles.sh build; scripts/bench_psnr_hvs.sh build)
        for f in ${ENGINE_FEATURES:-vif adm motion float_vif float_adm float_motion cambi psnr_hvs ciede float_ssim float_ms_ssim psnr \
                float_psnr float_ansnr float_moment}; do
            TAIL=3 step "engine_$f" ${FEATURE_S:-60} python3 scripts/bench_gpu.py --engine-only --sizes 1920x1080 --models '' \
                --features "$f" --frames 256 --repeats 3
        done
        TAIL=3 step engine_vmaf ${FEATURE_S:-60} python3 scripts/bench_gpu.py --engine-only --sizes 1920x1080,576x324,3840x2160 \
            --frames 512 --repeats 3
        if command -v ncu > /dev/null; then
            TAIL=80 step ncu ${NCU_S:-90} ncu --clock-control none --print-summary per-kernel --launch-skip 120 --launch-count 80 \
                python3 scripts/bench_gpu.py --engine-only --sizes 1920x1080 --frames 256 --repeats 1
        fi
        [ -d .vifbench ] && TAIL=20 step vif_tiles 60 bash scripts/bench_vif_tiles.sh run
        [ -d .hvsbench ] && TAIL=20 step hvs_variants 60 bash scripts/bench_psnr_hvs.sh run
        ;;
    libvmaf)
        # the column beside `engine`'s: libvmaf f85a8536's tools (.libvmaf/{cpu,cuda}/vmaf) on the same machine
        TAIL=40 step libvmaf_features ${LIBVMAF_S:-300} python3 scripts/bench_libvmaf_features.py --repeats 3
        ;;
    host)
        # small pictures through the daemon, where its host path sets the pace: the producer's ring
        # (frames not yet released), the worker process, the daemon pinned to one core; latency at 4
        # in flight pinned, and pinned with the driver spinning (docs/performance.md, twenty-second session)
        B="python3 scripts/bench_gpu.py ${BENCH_ARGS:-}"; PIN="--daemon-cpus 2 --producer-cpus 0"
        for r in $(seq "${ROUNDS:-2}"); do
            # the configuration whose first run once ended in the producer's EPIPE (gpu-runs.md, twenty-second
            # session): a fresh daemon, batches of 32; a failure's line now quotes the daemon's last error
            TAIL=1 step "host_576x324_batch32_$r" ${HOST_S:-40} bash -c "$B --sizes 576x324 --frames 5760 --repeats 3 --batch 32"
            for what in "--sizes 576x324 --frames 5760" "--sizes 64x64 --models '' --features psnr --frames 20000"; do
                tag=$(echo "$what" | cut -d' ' -f2)
                # the last mode: the same with a message a result and a release (the producer's A/B of
                # outcome runs, docs/performance.md "Runs of outcomes")
                for mode in "" "--inflight 512 --ring 256" "--lane-process --inflight 512 --ring 256" \
                            "--lane-process --inflight 512 --ring 480" \
                            "--lane-process --inflight 512 --ring 256 --single-outcomes"; do
                    name="host_${tag}_$(echo "$mode" | tr -d ' -' | cut -c1-40)_$r"
                    TAIL=1 step "$name" ${HOST_S:-40} bash -c "$B $what --repeats 3 $mode"
                done
            done
            TAIL=1 step "latency_$r" 40 $B --sizes 1920x1080 --inflight 4 --frames 1200 --repeats 3
            TAIL=1 step "latency_pinned_$r" 40 $B --sizes 1920x1080 --inflight 4 --frames 1200 --repeats 3 $PIN
            TAIL=1 step "latency_pinned_spin_$r" 40 env VMAFXD_GPU_BLOCKING_SYNC=0 $B --sizes 1920x1080 --inflight 4 \
                --frames 1200 --repeats 3 $PIN
        done
        ;;
    sanitize)
        # out-of-bounds reads/writes on odd sizes and every chroma layout; races in the shared-memory sums
        step memcheck ${MEMCHECK_S:-420} compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest \
            -p no:cacheprovider -q tests/lanes/test_ciede_kernel.py tests/lanes/test_float_kernels.py \
            -k "cuda and (p16 or p17 or p18 or p15) and not every_frame"
        step racecheck ${RACECHECK_S:-300} compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest \
            -p no:cacheprovider -q tests/lanes/test_float_kernels.py -k "cuda and p16 and model"
        # the integer VIF (fused scale-0 statistics + decimation), motion and ADM (scales 1-3 in one launch) kernels
        step memcheck_int ${MEMCHECK_S:-300} compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest \
            -p no:cacheprovider -q tests/lanes/test_vif_motion_kernels.py tests/lanes/test_adm_kernel.py -k "cuda and not wide and not split"
        step racecheck_int ${RACECHECK_S:-300} compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest \
            -p no:cacheprovider -q tests/lanes/test_vif_motion_kernels.py -k "cuda and (default or motion)"
        ;;
    kernels)
        # a few features alone at 1080p (µs a frame), then where each one's device time goes (ncu per kernel)
        for f in ${ENGINE_FEATURES:-ciede float_motion float_vif float_adm}; do
            TAIL=3 step "engine_$f" ${FEATURE_S:-60} python3 scripts/bench_gpu.py --engine-only --sizes 1920x1080 --models '' \
                --features "$f" --frames 256 --repeats 3
            if command -v ncu > /dev/null; then
                TAIL=30 step "ncu_$f" ${NCU_S:-90} ncu --clock-control none --print-summary per-kernel --launch-skip 20 \
                    --launch-count 40 python3 scripts/bench_gpu.py --engine-only --sizes 1920x1080 --models '' \
                    --features "$f" --frames 128 --repeats 1
            fi
        done
        ;;
esac
cat "$OUT/summary.txt"
