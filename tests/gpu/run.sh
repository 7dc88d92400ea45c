#!/usr/bin/env bash
# The one script run on the GPU machine, from the repo root, with build/ made
# here (make test-gpu) and carried. It keeps going after a failed step, bounds
# every step by a timeout and by an overall deadline (the device call's limit is
# 600 s), writes at most 7 files to $OUT and ends with a pass/fail table.
#
#   tests/gpu/run.sh            (OUT defaults to /tmp/mj-gpu-out)
set -u

OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
# Kernels compiled by the first step serve the later ones; outside $OUT so it
# never competes with the logs for the files that come back.
export MEGAJIT_CACHE_DIR=/tmp/mjcache
mkdir -p "$MEGAJIT_CACHE_DIR"
export PATH="$PATH:/usr/local/cuda/bin"

DEADLINE=$((SECONDS + ${MJ_GPU_BUDGET_S:-550}))
TEST=build/tests/gpu/test_pre_dispatch
MOE_TEST=build/tests/gpu/test_mega_moe
CLI=build/bin/megajit
ENV_LOG=$OUT/env.log
SUMMARY=$OUT/summary.txt

names=()
results=()
notes=()

# step NAME LIMIT_S LOG CMD...: runs CMD with stdout+stderr to LOG (appended)
# and to the terminal tail, under the smaller of LIMIT_S and the time left.
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    local left=$((DEADLINE - SECONDS - 15))
    ((left < limit)) && limit=$left
    if ((limit < 5)); then
        names+=("$name")
        results+=("SKIP")
        notes+=("no time left")
        return
    fi
    echo "=== $name (limit ${limit}s) -> $log"
    local start=$SECONDS rc
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    local took=$((SECONDS - start))
    tail -n "${TAIL_LINES:-8}" "$log"
    local result=PASS
    if ((rc == 124 || rc == 137)); then
        result=TIMEOUT
    elif ((rc != 0)); then
        result="FAIL(rc=$rc)"
    fi
    names+=("$name")
    results+=("$result")
    notes+=("${took}s, $(basename "$log")")
}

# The lines of LOG after its last line equal to MARKER: what the step after
# that marker appended to a log it shares with others.
after_marker() {
    awk -v m="$2" 'FNR == NR { if ($0 == m) last = FNR; next } last && FNR > last' "$1" "$1" 2>/dev/null
}

# The last "N passed, N failed" line of a test log, for the table, and its
# "N skipped (past the time budget)" line if any (a skipped case does not fail
# the exit status, so the table says so); with MARKER, of the part after it
# only, so a test that printed no summary shows none rather than the one of
# the test before it in the same log.
counts() {
    local part summary skipped
    part=$(if [[ -n ${2:-} ]]; then after_marker "$1" "$2"; else cat "$1" 2>/dev/null; fi)
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$part" | tail -n 1)
    skipped=$(grep -E '^[0-9]+ skipped' <<<"$part" | tail -n 1)
    echo "$summary${summary:+${skipped:+, $skipped}}"
}

{
    echo "=== date: $(date -u)"
    echo "=== uname: $(uname -a)"
    echo "=== nvidia-smi"
    nvidia-smi 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>&1
    echo "=== ldd $CLI"
    ldd "$CLI" 2>&1
    echo "=== ldd $TEST"
    ldd "$TEST" 2>&1
    echo "=== compute-sanitizer"
    command -v compute-sanitizer && compute-sanitizer --version 2>&1 | tail -n 2
} >"$ENV_LOG" 2>&1
sed -n '1,40p' "$ENV_LOG"
if ldd "$CLI" "$TEST" 2>/dev/null | grep -q 'not found'; then
    echo "WARNING: missing shared libraries (see $ENV_LOG):"
    ldd "$CLI" "$TEST" 2>/dev/null | grep 'not found'
fi

if [[ ! -x $TEST || ! -x $CLI || ! -x $MOE_TEST ]]; then
    echo "FATAL: $TEST, $MOE_TEST or $CLI is missing: run 'make test-gpu' before carrying build/"
    exit 2
fi

TAIL_LINES=14 step "test_pre_dispatch" 240 "$OUT/test_pre_dispatch.log" "$TEST"
test_counts=$(counts "$OUT/test_pre_dispatch.log")
# MegaMoE output is appended to the existing logs ($OUT keeps at most 7 files),
# each after a marker line that its counts are read from.
moe_mark="=== test_mega_moe"
echo "$moe_mark" >>"$OUT/test_pre_dispatch.log"
# Its budget inside the step's limit: past it the cases left are skipped, counted, and reported.
TAIL_LINES=14 step "test_mega_moe" 200 "$OUT/test_pre_dispatch.log" "$MOE_TEST" --budget 180
moe_counts=$(counts "$OUT/test_pre_dispatch.log" "$moe_mark")

# Every MegaMoE kernel the test compiled, disassembled: no min/max whose
# predicate output a branch reads (bench/sass_guard.py says why).
if command -v nvdisasm >/dev/null; then
    step "sass_guard" 120 "$OUT/bench.log" python3 bench/sass_guard.py --cache "$MEGAJIT_CACHE_DIR" \
        --cli "$CLI"
else
    names+=("sass_guard")
    results+=("SKIP")
    notes+=("no nvdisasm")
fi

moe_quick="=== test_mega_moe --quick"
if command -v compute-sanitizer >/dev/null; then
    step "memcheck --quick" 110 "$OUT/memcheck.log" \
        compute-sanitizer --tool memcheck --leak-check full --error-exitcode 97 "$TEST" --quick
    step "racecheck --quick" 110 "$OUT/racecheck.log" \
        compute-sanitizer --tool racecheck --error-exitcode 97 "$TEST" --quick
    memcheck_counts="$(counts "$OUT/memcheck.log") $(grep -m1 -E 'ERROR SUMMARY' "$OUT/memcheck.log" 2>/dev/null)"
    racecheck_counts="$(counts "$OUT/racecheck.log") $(grep -m1 -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" 2>/dev/null)"
    echo "$moe_quick" >>"$OUT/memcheck.log"
    step "memcheck test_mega_moe --quick" 90 "$OUT/memcheck.log" \
        compute-sanitizer --tool memcheck --leak-check full --error-exitcode 97 "$MOE_TEST" --quick
    echo "$moe_quick" >>"$OUT/racecheck.log"
    step "racecheck test_mega_moe --quick" 90 "$OUT/racecheck.log" \
        compute-sanitizer --tool racecheck --error-exitcode 97 "$MOE_TEST" --quick
else
    names+=("compute-sanitizer")
    results+=("SKIP")
    notes+=("not installed")
fi

step "bench pre-dispatch --json" 60 "$OUT/bench.log" \
    bash -c "$CLI bench pre-dispatch --json > '$OUT/bench_pre_dispatch.json'"
TAIL_LINES=12 step "bench pre-dispatch" 60 "$OUT/bench.log" "$CLI" bench pre-dispatch
TAIL_LINES=14 step "launch_probe" 30 "$OUT/bench.log" build/bench/launch_probe
TAIL_LINES=12 step "bench mega-moe" 120 "$OUT/bench.log" "$CLI" bench mega-moe --tokens 1,8,64,256
step "megajit info" 20 "$ENV_LOG" "$CLI" info
if python3 -c 'import torch' 2>/dev/null; then
    py_mark="=== python/tests/gpu/test_megajit_gpu.py"
    echo "$py_mark" >>"$OUT/bench.log"
    TAIL_LINES=6 step "python GPU test" 150 "$OUT/bench.log" \
        env PYTHONPATH=python MEGAJIT_LIB=build/lib/libmegajit.so.0 \
        python3 python/tests/gpu/test_megajit_gpu.py
    python_counts=$(counts "$OUT/bench.log" "$py_mark")
fi

{
    echo
    echo "=== bench_pre_dispatch.json"
    cat "$OUT/bench_pre_dispatch.json" 2>/dev/null
    echo
    echo "=== summary (logs in \$OUT: env.log test_pre_dispatch.log memcheck.log racecheck.log bench.log bench_pre_dispatch.json summary.txt)"
    printf '%-28s %-14s %s\n' STEP RESULT NOTE
    failed=0
    for i in "${!names[@]}"; do
        printf '%-28s %-14s %s\n' "${names[$i]}" "${results[$i]}" "${notes[$i]}"
        [[ ${results[$i]} == PASS ]] || failed=$((failed + 1))
    done
    echo "test_pre_dispatch:         ${test_counts:-no summary line}"
    echo "memcheck --quick:          ${memcheck_counts:-not run}"
    echo "racecheck --quick:         ${racecheck_counts:-not run}"
    echo "test_mega_moe:             ${moe_counts:-no summary line}"
    echo "memcheck mega_moe --quick: $(counts "$OUT/memcheck.log" "$moe_quick") $(after_marker "$OUT/memcheck.log" "$moe_quick" | grep -E 'ERROR SUMMARY' | tail -n 1)"
    echo "racecheck mega_moe --quick: $(counts "$OUT/racecheck.log" "$moe_quick") $(after_marker "$OUT/racecheck.log" "$moe_quick" | grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' | tail -n 1)"
    echo "python GPU test:           ${python_counts:-not run}"
    echo "mega_moe timing:           see bench.log (megajit bench mega-moe)"
    echo "steps not passed: $failed"
} >"$SUMMARY"
cat "$SUMMARY"
[[ $(grep -c '^steps not passed: 0$' "$SUMMARY") == 1 ]]
