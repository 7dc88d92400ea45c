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
# N = 3 (the last call, on what was committed): the whole GPU test within a
#   short budget, then bench/sass_guard.py over every MegaMoE kernel it
#   compiled.
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  checks 320
  mxfp8_ab build/base-s16/megajit build/bin/megajit ;;
2) table ;;
3)
  run final 170 $T --budget 140
  grep -E "passed, |^FAIL|skipped" "$OUT/final.log" | tail -6
  run guard 40 python3 bench/sass_guard.py --cache "$MEGAJIT_CACHE_DIR"
  tail -3 "$OUT/guard.log" ;;
esac
