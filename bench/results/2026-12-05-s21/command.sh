#!/usr/bin/env bash
# Twenty-first session's device calls, as they ran (one H100). From the repo
# root, after `make -j2 all test-gpu` and prepare.sh (which also says how the
# variants new and TV were made), carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv"]:
#   bash bench/results/2026-12-05-s21/command.sh N
# N = 1: the whole GPU test of 777a0f5, then PF4 (L2 prefetch of the weight
#   stages four ahead) against base on mxfp4-a16 and bf16.
# N = 2: the twentieth session's S4, F2, C40 and CB against base at T = 1024
#   (CB also 4096), the phases of mxfp4-a16 at T = 1024 and 4096.
# N = 3: the whole GPU test, racecheck and memcheck of new (F2 + CB + C40),
#   new against base on mxfp4-a8 and mxfp4-a16.
# N = 4: issue 10's DeepSeek-V3 table (all rows, T = 1 .. 4096, PyTorch
#   peer, STREAM US) with new.
# N = 5: the phases of new at T = 1 and 8, gpt-oss-120b's mxfp4-a8 new
#   against base.
# N = 6: TV (the token producer copies only the tile's rows) against new;
#   the whole GPU test and memcheck of --quick with TV.
# N = 7: racecheck of --quick and the phases of mxfp4-a16 at T = 1024, TV.
set -u
. bench/results/device_run.sh
ab() { # ab NAME LIMIT ROW TOKENS VARIANT...
  local name=$1 limit=$2 f=$3 tokens=$4 v
  shift 4
  for v in "$@"; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run ${name}_$v $limit build/bin/megajit bench mega-moe \
      --format $f --tokens $tokens --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" | tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
phases() { # phases ROW TOKENS VARIANT
  MEGAJIT_TEMPLATE_DIR=build/tv/$3 run phases_$1_$3 90 build/bin/megajit bench mega-moe \
    --format "$1" --tokens "$2" --max-tokens 4096 --iters 5 --phases
  grep -E "^phases|GEMM [12]:|between|at most" "$OUT/phases_$1_$3.log" | cut -c1-260 | sed "s|^|$3 |"
}
sanitizers() { # sanitizers VARIANT
  MEGAJIT_TEMPLATE_DIR=build/tv/$1 MEGAJIT_MOE_TIMEOUT_MS=60000 run race 120 \
    compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -4
  MEGAJIT_TEMPLATE_DIR=build/tv/$1 run memcheck 100 compute-sanitizer --tool memcheck \
    --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
}
case ${1:-1} in
1)
  card
  run full 215 $T --budget 200
  grep -E "passed, |^FAIL|not run|skipped" "$OUT/full.log" | tail -12
  ab pf 80 mxfp4-a16 1,1024,4096 base PF4 base PF4
  ab pf 80 bf16 1,1024,4096 base PF4 base PF4 ;;
2)
  card
  ab s4 60 mxfp4-a16 1024 base S4 base S4
  ab s4n 60 nvfp4 1024 base S4 base S4
  ab f2 60 mxfp4-a8 1024 base F2 base F2
  ab c40 60 mxfp4-a16 1024 base C40 base C40
  ab cb 80 mxfp4-a16 1024,4096 base CB base CB
  phases mxfp4-a16 1024 base
  phases mxfp4-a16 4096 base ;;
3)
  card
  MEGAJIT_TEMPLATE_DIR=build/tv/new run full 170 $T --budget 150
  grep -E "passed, |^FAIL|not run" "$OUT/full.log" | tail -6
  sanitizers new
  ab n8 60 mxfp4-a8 1024,4096 base new base new
  ab n16 60 mxfp4-a16 1024,4096 base new ;;
4)
  card
  MEGAJIT_TEMPLATE_DIR=build/tv/new table ;;
5)
  phases mxfp4-a16 1 new
  phases mxfp4-a16 8 new
  phases bf16 1 new
  for v in base new base new; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run go_$v 60 build/bin/megajit bench mega-moe \
      --shape gpt-oss-120b --format mxfp4-a8 --tokens 1024,4096 --max-tokens 4096 --iters 10
    grep -E "^gpt-oss-120b +mxfp4-a8 +[0-9]+ " $OUT/go_$v.log | tail -2 | sed "s|^|$v |"
  done ;;
6)
  card
  ab tv 60 mxfp4-a16 1,1024,4096 new TV new TV
  ab tv 60 nvfp4 1024,4096 new TV
  ab tv 60 bf16 1,4096 new TV
  MEGAJIT_TEMPLATE_DIR=build/tv/TV run full 120 $T --budget 100
  grep -E "passed, |^FAIL|not run" "$OUT/full.log" | tail -6
  MEGAJIT_TEMPLATE_DIR=build/tv/TV run memcheck 60 compute-sanitizer --tool memcheck \
    --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3 ;;
7)
  MEGAJIT_TEMPLATE_DIR=build/tv/TV MEGAJIT_MOE_TIMEOUT_MS=60000 run race 60 \
    compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -4
  phases mxfp4-a16 1024 TV ;;
esac
