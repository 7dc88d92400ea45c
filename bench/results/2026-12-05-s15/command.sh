#!/usr/bin/env bash
# Fifteenth session (2026-12-05): no device was lent (status "paused" from the
# start), so these calls are prepared for the next session, from the repo
# root, with build/ made at this session's last commit or later
# (make -j2 all test-gpu), carried ["build/lib","build/bin","build/tests/gpu","build/bench"]:
#   bash bench/results/2026-12-05-s15/command.sh N
# N = 1: everything the fourteenth session's call 3 owed (the 48-column
#   loops built in: quick set, BLOCK_M section, racecheck, the rows they
#   change at T = 1024 and 4096) and the fused shared expert's first run: the
#   quick set now holds its invalid input and one case each of mxfp8 and
#   mxfp4-a8 (its own MXFP8 loop in tasks of two blocks); then the whole
#   shared section (bf16, mxfp8, mxfp4-a8; controls; 1000 graph replays) and
#   the Python GPU test (which has shared-expert cases too).
# N = 2: what the shared expert costs: DeepSeek-V3 mxfp8 and Kimi-K2-like
#   mxfp4-a8 with --shared 1 against without, interleaved, T = 1, 8, 64, 1024
#   (the floor of the --shared rows counts the shared expert's bytes).
# N = 3: the fourteenth session's call 4: the full test (--budget 280),
#   memcheck of the quick set, ncu warp-state samples of the wide K loops.
set -u
OUT=${OUT:-/tmp/mj-gpu-out}
mkdir -p "$OUT"
export MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
export MEGAJIT_CACHE_DIR=/tmp/mjcache
run() { # run NAME LIMIT CMD...: output appended to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >> "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $((SECONDS - t0)) s"
}
T=build/tests/gpu/test_mega_moe
case ${1:-1} in
1)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  run quick 150 $T --quick; grep -E "passed, |^FAIL|shared" "$OUT/quick.log" | tail -12
  run shared 200 $T --section shared --budget 190
  grep -E "passed, |^FAIL|calc_diff|detected" "$OUT/shared.log" | tail -40
  run block_m 120 $T --section block_m
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -14
  run race 100 compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |hazard|ERROR SUMMARY" "$OUT/race.log" | tail -4
  run python 120 env PYTHONPATH=python MEGAJIT_LIB=build/lib/libmegajit.so.0 \
    python3 python/tests/gpu/test_megajit_gpu.py
  tail -4 "$OUT/python.log" ;;
2)
  for rep in 1 2; do
    for spec in "mxfp8 0" "mxfp8 1" "mxfp4-a8 0" "mxfp4-a8 1"; do
      set -- $spec
      run "shared_cost" 100 build/bin/megajit bench mega-moe --format $1 --shared $2 \
        --tokens 1,8,64,1024 --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 $1 T" "$OUT/shared_cost.log" | tail -4 | sed "s/^/shared=$2 #$rep /"
    done
  done
  for row in mxfp4-a8 mxfp8 nvfp4-a16; do
    run bench 60 build/bin/megajit bench mega-moe --format $row --tokens 1024,4096 \
      --max-tokens 4096 --iters 10
  done
  grep -E "^deepseek-v3 [a-z0-9-]+ T=" "$OUT/bench.log" ;;
3)
  exec bash bench/results/2026-12-05-s14/command.sh 4 ;;
esac
