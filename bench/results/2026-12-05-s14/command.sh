#!/usr/bin/env bash
# Fourteenth session (2026-12-05): device calls, from the repo root, with
# build/ = main (make -j2 all test-gpu) and build/wg4 = branch s14-four-wg
# (make BUILD=build/wg4 -j2 all test-gpu), carried:
#   bash bench/results/2026-12-05-s14/command.sh N
# N = 1: the previous session's review mends on the GPU (the quick set, whose
#   first section is invalid input; the Python GPU test); the quick set of
#   the four-warpgroup kernel; main against it on the small-T points.
# Calls 1 and 2 ran (logs in call1/, call2/); they need the session's scratch
# builds (build/wg4 from call1/four_warpgroups.patch, build/tv/*).
# N = 2: templates only, through MEGAJIT_TEMPLATE_DIR on one build:
#   build/tv/base (main's templates) against build/tv/q48b (each CTA's first
#   task is its own index, no atomic; 64-token tiles of the FP8 kind and of
#   E2M1 weights on the BF16 kind also run a 48-column loop), twice each,
#   interleaved; then the BLOCK_M section on build/tv/q48b.
# N = 3 (not run: no device was lent after call 2; the next session's first
#   call, with build/ made at a6be861 or later): the kept change (48-column loops) built in: the quick set, the BLOCK_M
#   section, racecheck of the quick set, and the rows it changes at T = 1024
#   and 4096.
# N = 4 (prepared, not run): the full test and memcheck of the quick set on
#   the committed build, then where the wide K loops stall: ncu's warp-state
#   samples per instruction of one launch, mxfp8 at T = 4096 (64-token FP8
#   loops, promotion-bound) and mxfp4-a16 at T = 1024 (64-token BF16-kind
#   E2M1 loops, at 77% of a CTA's read share at 8 tokens).
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  export MEGAJIT_CACHE_DIR=/tmp/mjcache
  run quick 150 build/tests/gpu/test_mega_moe --quick; grep -E "passed, |^FAIL" "$OUT/quick.log" | tail -5
  run python 150 env PYTHONPATH=python MEGAJIT_LIB=build/lib/libmegajit.so.0 \
    python3 python/tests/gpu/test_megajit_gpu.py
  tail -3 "$OUT/python.log"
  MEGAJIT_CACHE_DIR=/tmp/mjcache4 run quick_wg4 150 build/wg4/tests/gpu/test_mega_moe --quick
  grep -E "passed, |^FAIL|calc_diff" "$OUT/quick_wg4.log" | tail -12
  for row in mxfp4-a8 mxfp4-a16 bf16; do
    for b in main wg4; do
      bin=build/bin/megajit cache=/tmp/mjcache
      [ $b = wg4 ] && bin=build/wg4/bin/megajit cache=/tmp/mjcache4
      MEGAJIT_CACHE_DIR=$cache run "ab_$b" 120 $bin bench mega-moe --format $row \
        --tokens 1,8,64,256,1024 --max-tokens 1024 --iters 10 --phases
      grep -E "^deepseek $row" "$OUT/ab_$b.log" | tail -5
    done
  done ;;
2)
  for rep in 1 2; do
    for v in base q48b; do
      for spec in "mxfp4-a8 1,8,64,1024,4096" "mxfp8 1,8,64,1024,4096" "mxfp4-a16 1,8,64,1024" \
        "nvfp4 1,8,64,1024" "bf16 1,8,64"; do
        set -- $spec
        MEGAJIT_CACHE_DIR=/tmp/mjc_$v MEGAJIT_TEMPLATE_DIR=build/tv/$v/templates run "tv_$v" 150 \
          build/bin/megajit bench mega-moe --format $1 --tokens $2 --max-tokens 4096 \
          --iters 10 $([ $rep = 1 ] && echo --phases)
        grep -E "^deepseek-v3 $1 T" "$OUT/tv_$v.log" | tail -5 | sed "s/^/$v #$rep /"
      done
    done
  done
  # The BLOCK_M section (now also 44 tokens on one expert: the 48-column
  # loops) on the variant's templates.
  MEGAJIT_CACHE_DIR=/tmp/mjc_q48b MEGAJIT_TEMPLATE_DIR=build/tv/q48b/templates run block_m 200 \
    build/tests/gpu/test_mega_moe --section block_m
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -16 ;;
3)
  export MEGAJIT_CACHE_DIR=/tmp/mjcache
  T=build/tests/gpu/test_mega_moe
  run quick 120 $T --quick; grep -E "passed, |^FAIL" "$OUT/quick.log" | tail -3
  run block_m 150 $T --section block_m
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -14
  run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |hazard|ERROR SUMMARY" "$OUT/race.log" | tail -4
  for row in mxfp4-a8 mxfp8 nvfp4-a16; do
    run bench 60 build/bin/megajit bench mega-moe --format $row --tokens 1024,4096 \
      --max-tokens 4096 --iters 10
  done
  grep -E "^deepseek-v3 [a-z0-9-]+ T=" "$OUT/bench.log" ;;
4)
  export MEGAJIT_CACHE_DIR=/tmp/mjcache
  T=build/tests/gpu/test_mega_moe
  run full 300 $T --budget 280; grep -E "passed, |^FAIL" "$OUT/full.log" | tail -3
  run mem 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 97 $T --quick
  grep -E "passed, |ERROR SUMMARY" "$OUT/mem.log" | tail -2
  for spec in "f8 mxfp8 4096" "a16 mxfp4-a16 1024"; do
    set -- $spec
    run "ncu_$1" 150 ncu -k regex:mega_moe_kernel --launch-skip 3 --launch-count 1 \
      --section WarpStateStats --section SchedulerStats --section SourceCounters \
      --export "/tmp/prof_$1" -f build/bin/megajit bench mega-moe --format "$2" --tokens "$3" \
      --max-tokens "$3" --iters 3
    ncu -i "/tmp/prof_$1.ncu-rep" --page source --print-source sass --csv > "$OUT/sass_$1.csv" \
      2>> "$OUT/ncu_$1.log"
    ncu -i "/tmp/prof_$1.ncu-rep" --page details >> "$OUT/ncu_$1.log" 2>&1
    grep -E "Stall|Issued|Eligible|No Eligible" "$OUT/ncu_$1.log" | head -12
  done ;;
esac
