#!/usr/bin/env bash
# Tenth session, device call 5: the BLOCK_M sweep now reaches each row's cap
# (128 for bf16 and, on this branch, the E2M1 rows on the BF16 kind), plain
# and under racecheck.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
timeout -k 5 120 build/tests/gpu/test_mega_moe --section block_m > $OUT/blockm.log 2>&1
echo "block_m rc=$?"; grep -E "^FAIL|FATAL|INFO|passed, |precompile" $OUT/blockm.log | tail -12
timeout -k 5 170 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/race.log 2>&1
echo "race rc=$?"; grep -E "^FAIL|RACECHECK SUMMARY|passed, " $OUT/race.log | tail -6
