#!/usr/bin/env bash
# Twelfth session's changes, for the next session's device calls (after
# prepare.sh; carry ["build/lib","build/bin","build/tests/gpu","build/bench",
# "build/alt","build/tv"]):
#   bash bench/results/2026-12-04-s12/next/command.sh 1 > $OUT/summary.txt 2>&1; cat $OUT/summary.txt
#   ... 2 ...
# Part 1: main's quick test and BLOCK_M sweep (which also runs every mxfp4-a8
#   size with unfolded scales and requires the folded kernels' bits), then A/B
#   of base (1bc72dc), main, and main with --unfold-mx-scales.
# Part 2: the full test, racecheck of the BLOCK_M sweep, the other rows' A/B,
#   and the first-stage hold variants at small T.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant (base, main, unfold, hold6, hold12) row tokens max
  local v=$1 row=$2 t=$3 max=$4 cli=build/bin/megajit flags=
  case $v in
    base) cli=build/alt/base/bin/megajit ;;
    unfold) flags=--unfold-mx-scales ;;
    hold*) export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$v ;;
  esac
  timeout -k 5 100 $cli bench mega-moe --format $row --tokens $t --max-tokens $max --iters 10 --phases $flags > $OUT/${v}_${row}_${max}.log 2>&1
  echo "== $v $row max $max rc=$?"; unset MEGAJIT_TEMPLATE_DIR
  grep -E "^deepseek-v3 .*T=|GEMM .:|first stage landed .* after entry|FAILED" $OUT/${v}_${row}_${max}.log | sed "s/(one traced.*task)//; s/(stores.*//" | head -16
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
case ${1:-1} in
1)
  timeout -k 5 150 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
  echo "quick rc=$?"; grep -E "^FAIL|FATAL|device error|passed, " $OUT/quick.log | tail -12
  timeout -k 5 150 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/blockm.log 2>&1
  echo "block_m rc=$?"; grep -E "^FAIL|FATAL|INFO|differ|passed, " $OUT/blockm.log | tail -12
  for v in base main unfold; do run $v mxfp4-a8 1,64,1024 4096; done
  for v in base main; do run $v mxfp4-a16 64,1024 4096; done ;;
2)
  timeout -k 5 240 build/tests/gpu/test_mega_moe --budget 200 > $OUT/full.log 2>&1
  echo "full rc=$?"; grep -E "^FAIL|FATAL|device error|passed, |precompile" $OUT/full.log | tail -16
  timeout -k 5 150 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/race.log 2>&1
  echo "race rc=$?"; grep -E "^FAIL|RACECHECK SUMMARY|passed, " $OUT/race.log | tail -6
  for v in base main; do run $v mxfp4-a8 256,4096 4096; run $v bf16 1,64 4096; done
  for v in main hold6 hold12; do run $v mxfp4-a8 1,8 64; done ;;
esac
