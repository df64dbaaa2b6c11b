#!/usr/bin/env bash
# Sample the daemon and the producer with py-spy during a GPU-lane benchmark run.
#   scripts/profile_daemon.sh SIZE FRAMES TAG     e.g. 1920x1080 40000 hd
# Writes $OUT/spy_TAG.log (the benchmark's line) and $OUT/spy_TAG_{daemon,prod}.raw
# (py-spy's collapsed stacks, every thread).  Needs py-spy (pip install py-spy);
# FRAMES must keep the run going for the 6 s warm-up plus the 4 s sampled.
# scripts/spy_summary.py sums such a file: each thread's samples, its share waiting, its
# functions (``--process ''`` for a file recorded with -p, which has no process frames).
set -u
size=$1 frames=$2 tag=$3
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT"
spy=$(command -v py-spy || echo /tmp/site/bin/py-spy)
python3 scripts/bench_gpu.py --sizes "$size" --frames "$frames" --repeats 1 > "$OUT/spy_$tag.log" 2>&1 &
sleep 6
d=$(pgrep -f "vmafxd --socket" | head -1)
b=$(pgrep -f "bench_gpu.py --sizes $size" | head -1)
"$spy" record -p "$d" -d 4 -r 250 -f raw -o "$OUT/spy_${tag}_daemon.raw" --threads --nonblocking > /dev/null 2>&1 &
"$spy" record -p "$b" -d 4 -r 250 -f raw -o "$OUT/spy_${tag}_prod.raw" --threads --nonblocking > /dev/null 2>&1
wait
cat "$OUT/spy_$tag.log"
