#!/usr/bin/env bash
# Eleventh session, device calls on branch s10-epi-act (built with
# `make -j2 all test-gpu && bench/results/2026-12-01-s10/next/prepare.sh`,
# carry ["build/lib","build/bin","build/tests","build/bench","build/alt"]).
# Part 1: the tip's quick test, BLOCK_M sweep and its racecheck; loop vs main.
# Part 2: the tip's full test; pull vs loop on NVFP4.
# Part 3: branch (epi-act) vs pull.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != branch ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|^phases|GEMM 1:|FAILED" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/; first stage landed.*//; s/(stores.*//" | head -16
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case ${1:-1} in
1)
  timeout -k 5 120 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
  echo "quick rc=$?"; grep -E "^FAIL|FATAL|device error|passed, " $OUT/quick.log | tail -12
  timeout -k 5 120 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/blockm.log 2>&1
  echo "block_m rc=$?"; grep -E "^FAIL|FATAL|INFO|passed, " $OUT/blockm.log | tail -12
  timeout -k 5 150 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/race.log 2>&1
  echo "race rc=$?"; grep -E "^FAIL|RACECHECK SUMMARY|passed, " $OUT/race.log | tail -6
  for v in main loop; do run $v mxfp4-a8 1,64,1024 1024; run $v mxfp4-a16 64,1024 1024; done ;;
2)
  timeout -k 5 260 build/tests/gpu/test_mega_moe --budget 200 > $OUT/full.log 2>&1
  echo "full rc=$?"; grep -E "^FAIL|FATAL|device error|passed, |precompile" $OUT/full.log | tail -20
  for v in loop pull; do run $v nvfp4 256,1024,4096 4096; done ;;
3)
  for v in pull branch; do for f in nvfp4 mxfp4-a16 mxfp4-a8; do run $v $f 1024,4096 4096; done; done ;;
esac
