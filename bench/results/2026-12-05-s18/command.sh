#!/usr/bin/env bash
# Eighteenth session: device calls from the repo root with build/ made from
# this tree (make -j2 all test-gpu) and the sixteenth session's CLI and GPU
# test in build/base-s16 (git archive 6fe5617 | tar -x -C /tmp/b17 &&
# make -C /tmp/b17 -j2 all test-gpu; cp /tmp/b17/build/bin/megajit
# /tmp/b17/build/tests/gpu/test_mega_moe build/base-s16/), carried
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/base-s16"]:
#   bash bench/results/2026-12-05-s18/command.sh N
# N = 1: the whole GPU test (--budget 320), racecheck and memcheck of
#   --quick, then mxfp8 on DeepSeek-V3 at T = 1 .. 4096: this build against
#   the sixteenth session's.
# N = 2: issue 10's table on DeepSeek-V3 (every row, T = 1 .. 4096, uniform
#   routing) with the PyTorch BF16 peer, bench/run_mega_moe.sh.
set -u
. bench/results/device_run.sh
export MEGAJIT_CACHE_DIR=/tmp/mjcache
T=build/tests/gpu/test_mega_moe
case ${1:-1} in
1)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  run full 330 $T --budget 320
  grep -E "passed, |^FAIL|not run" "$OUT/full.log" | tail -12
  run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -4
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  for cli in build/base-s16/megajit build/bin/megajit; do
    run ab 100 $cli bench mega-moe --format mxfp8 --tokens 1,8,64,256,1024,4096 \
      --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +mxfp8 " "$OUT/ab.log" | tail -6 | sed "s|^|$cli |"
  done ;;
2)
  OUT=$OUT/table SHAPE=deepseek-v3 UNIFORM_S=300 TORCH_S=150 STEPS="uniform torch merge" \
    bash bench/run_mega_moe.sh
  cat "$OUT/table/table.txt" 2>/dev/null | head -40 ;;
esac
# N = 3 (the last call, on what was committed): the whole GPU test within a
# short budget, then bench/sass_guard.py over every MegaMoE kernel it compiled.
if [[ ${1:-1} == 3 ]]; then
  run final 170 $T --budget 140
  grep -E "passed, |^FAIL|skipped" "$OUT/final.log" | tail -6
  run guard 40 python3 bench/sass_guard.py --cache "$MEGAJIT_CACHE_DIR"
  tail -3 "$OUT/guard.log"
fi
