#!/usr/bin/env bash
# Sixteenth session (2026-12-05): device calls from the repo root, with
# build/ made at this session's HEAD (make -j2 all test-gpu) and the
# fifteenth session's CLI and GPU test beside it for the A/B of call 2
# (git archive 5af3987 | tar -x -C /tmp/b && make -C /tmp/b -j2 all test-gpu;
# mkdir -p build/base-s15 && cp /tmp/b/build/bin/megajit
# /tmp/b/build/tests/gpu/test_mega_moe build/base-s15/),
# carried ["build/lib","build/bin","build/tests/gpu","build/bench","build/base-s15"]:
#   bash bench/results/2026-12-05-s16/command.sh N
# It replaces the fifteenth session's script, which never ran (its calls are
# all here).
# N = 1: correctness. The quick set (the shared expert's invalid input; one
#   case each of mxfp8 (its own format), mxfp4-a8 (MXFP8 block pairs on the
#   FP8 kind) and nvfp4 (MXFP8 decoded into BF16, block pairs); the
#   fourteenth session's 48-column loops), then the whole shared section
#   (every row in each fusable format: 8 pairs, BF16 beside NVFP4 in half
#   stages; controls; 1000 graph replays).
# N = 2: speed. The routed kernels changed this session (the launch's epoch
#   in shared memory, the K loops' block count): this build's CLI against the
#   fifteenth session's, interleaved, on mxfp8, mxfp4-a8 and nvfp4 at T = 1,
#   64, 1024; then what a shared expert costs (--shared 1 against 0) on
#   mxfp8, mxfp4-a8, mxfp4-a16 and nvfp4 (MXFP8, and BF16 in half stages).
# N = 3: the BLOCK_M section, racecheck of the quick set, the Python GPU test
#   (its shared-expert cases cover the 8 pairs).
# N = 4: the fourteenth session's call 4: the full test (--budget 280),
#   memcheck of the quick set, ncu warp-state samples of the wide K loops.
# N = 5: racecheck's mailbox reports (bench/RESULTS.md, sixteenth session):
#   the fifteenth session's GPU test under racecheck (--quick --section
#   shared), this build's BLOCK_M section under racecheck, memcheck --quick.
# Calls 1-3 ran on an H100 (logs in call1/ .. call3/); 4 and 5 did not.
set -u
. bench/results/device_run.sh
export MEGAJIT_CACHE_DIR=/tmp/mjcache
T=build/tests/gpu/test_mega_moe
case ${1:-1} in
1)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  run quick 150 $T --quick; grep -E "passed, |^FAIL|shared" "$OUT/quick.log" | tail -12
  run shared 300 $T --section shared --budget 290
  grep -E "passed, |^FAIL|calc_diff|detected|not run" "$OUT/shared.log" | tail -70 ;;
2)
  for rep in 1 2; do
    for row in mxfp8 mxfp4-a8 nvfp4; do
      for cli in build/base-s15/megajit build/bin/megajit; do
        run ab 60 $cli bench mega-moe --format $row --tokens 1,64,1024 --max-tokens 4096 --iters 10
        grep -E "^deepseek-v3 $row T" "$OUT/ab.log" | tail -3 | sed "s|^|$cli #$rep |"
      done
    done
  done
  for spec in "mxfp8 0" "mxfp8 1" "mxfp4-a8 1" "mxfp4-a16 0" "mxfp4-a16 1" "nvfp4 1" \
    "nvfp4 1 --shared-format bf16"; do
    set -- $spec
    run shared_cost 60 build/bin/megajit bench mega-moe --format $1 --shared "${@:2}" \
      --tokens 1,64,1024 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 $1 T" "$OUT/shared_cost.log" | tail -3 | sed "s/^/shared=${*:2} /"
  done ;;
3)
  run block_m 90 $T --section block_m
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -14
  run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |hazard|ERROR SUMMARY" "$OUT/race.log" | tail -4
  run python 200 env PYTHONPATH=python MEGAJIT_LIB=build/lib/libmegajit.so.0 \
    python3 python/tests/gpu/test_megajit_gpu.py
  tail -6 "$OUT/python.log" ;;
4)
  exec bash bench/results/2026-12-05-s14/command.sh 4 ;;
5)
  run race_base 120 compute-sanitizer --tool racecheck --error-exitcode 97 \
    build/base-s15/test_mega_moe --quick --section shared
  grep -E "passed, |RACECHECK SUMMARY" "$OUT/race_base.log" | tail -2
  run race_block_m 240 compute-sanitizer --tool racecheck --error-exitcode 97 $T --section block_m
  grep -E "passed, |RACECHECK SUMMARY" "$OUT/race_block_m.log" | tail -2
  run memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |ERROR SUMMARY" "$OUT/memcheck.log" | tail -2 ;;
esac
