#!/usr/bin/env bash
# MegaMoE development run on the GPU machine (build/ made here with
# `make test-gpu` and carried): the quick and full correctness tests, racecheck
# of the quick test, then the benchmark (BENCH_ARGS="--phases --format ROW"
# for a phase breakdown). Every step is bounded; in-kernel waits give up after 3 s.
set -u
OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=${MEGAJIT_MOE_TIMEOUT_MS:-3000}
export PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
STEPS=${STEPS:-quick full bench}
for step in $STEPS; do
    case $step in
    quick) timeout -k 5 120 build/tests/gpu/test_mega_moe --quick >"$OUT/quick.log" 2>&1
        echo "quick rc=$?"; grep -E "FAIL|device error|passed, " "$OUT/quick.log" | tail -25 ;;
    full) timeout -k 5 330 build/tests/gpu/test_mega_moe --budget 280 >"$OUT/full.log" 2>&1
        echo "full rc=$?"; grep -E "^FAIL|device error|passed, |precompile" "$OUT/full.log" | tail -40 ;;
    race) timeout -k 5 150 compute-sanitizer --tool racecheck --error-exitcode 97 \
            build/tests/gpu/test_mega_moe --quick >"$OUT/race.log" 2>&1
        echo "race rc=$?"; grep -E "FAIL|RACECHECK SUMMARY|ERROR SUMMARY|passed, " "$OUT/race.log" | tail -8 ;;
    bench) timeout -k 5 ${BENCH_S:-240} build/bin/megajit bench mega-moe --tokens ${TOKENS:-1,8,64,256} \
            --iters ${ITERS:-20} ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
        echo "bench rc=$?"; tail -20 "$OUT/bench.log" ;;
    esac
done
