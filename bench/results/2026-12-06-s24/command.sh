#!/usr/bin/env bash
# The twenty-fourth session's device calls. From the repo root, after
# `make -j2 all test-gpu` on the tree 6a738d9 + SM.patch + bm160.patch (both
# from bench/results/2026-12-06-s23) and `bash
# bench/results/2026-12-06-s24/prepare.sh` (build/vcli/ef: the CLI of
# 1333922; build/tv/SM: this tree's templates before bm160; build/tv/SC, RC,
# MB, NS: this tree's templates with those patches), carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/vcli","build/tv"]:
#   bash bench/results/2026-12-06-s24/command.sh N
# The CLIs of an A/B: ef = 1333922's; sm = 1333922's with build/tv/SM (the
# GEMM 2 epilogue through stmatrix.trans); new = this tree (SM + 160-token
# tiles for the BF16-kind rows but mxfp8 and nvfp4).
# N = 1: the whole GPU test (its block_m case forces 160), A/B of mxfp4-a16 at
#   T = 1024, 4096 and nvfp4 at 4096.
# N = 2: racecheck and memcheck of --quick; racecheck with RC and MB (two
#   ways of making each reader of the task mailbox arrive on its empty
#   barrier); NS's run-time cost (mxfp4-a8, MXFP8 shared expert, T = 1024);
#   SC's read ceiling against the committed one.
# N = 3: A/B at T = 4096 of bf16 and nvfp4-a16, gpt-oss-120b mxfp4-a16 at
#   T = 4096, 8192; --phases of mxfp4-a16 at 4096.
# N = 4: issue 10's DeepSeek-V3 table and --phases of mxfp4-a16 at T = 1,
#   1024 (for an H200).
# Calls 1-3 ran as N = 1, then the memcheck / NS / SC and racecheck steps of N
# = 2 as inline commands (the logs in call1-3). Call 1 found bm160 computing
# wrong columns past 128 (their meta was never loaded: one thread a column)
# and an illegal address at T = 4096; fixed in the tree (share_inputs loads
# them), and SM dropped (no gain in call 1; beside 160-token tiles its
# stmatrix epilogue spilled 92 bytes). N = 5 is 6a738d9 + bm160.patch + that fix: the whole GPU test, A/B ef / new at T =
# 4096 (mxfp4-a16 twice, bf16, nvfp4-a16) and 1024 (mxfp4-a16), RC on the
# fixed templates (build/tv/RCn) against new at T = 64, 1024 for its cost,
# gpt-oss at 4096 and 8192, --phases of mxfp4-a16 at 4096.
# Calls 4-6 ran N = 5, then racecheck / memcheck with RCn and a bf16 A/B at
# T = 1024, 4096 as inline commands: BF16 weights lost 2% at 160, so the tree
# now gives 160-token tiles to mxfp4-a16 and nvfp4-a16 only, and RC is in it.
# N = 6 (that tree): the whole GPU test at a 150 s budget, racecheck and
# memcheck of --quick; CB2 (build/tv/CB2: only the math warps combine, two
# items a claim with all their slots' loads in flight; gpt-oss's mxfp4-a16
# 160-token kernel spills 4 bytes there) and CB3 (its control: only the math
# warps combine, one item a claim, four slots at a time as now) against the
# tree at T = 1024, 4096 (mxfp4-a16, nvfp4), --phases of CB2 at 4096.
# N = 7: issue 10's DeepSeek-V3 table (ran as an inline command, call 8).
# N = 8: CB2's spill-free form in the tree (only the math warps combine,
# items of 512 elements with every slot's loads in flight), carrying
# build/vcli/head (3d4c9c0's CLI): the whole GPU test, racecheck and
# memcheck, A/B head / new at T = 64, 1024, 4096 (mxfp4-a16, nvfp4) and on
# gpt-oss-120b, --phases at 4096. Then --phases at T = 1, 1024 inline (call 10).
# N = 9 (d6f847d): issue 14's shared expert (--shared 1, the row's default
# shared format) at T = 64, 1024, 4096 for four rows; every row at T = 1024
# with skewed routing.
# N = 10 (not run; the next session's): the tree with nv160.patch applied
# (`git apply bench/results/2026-12-06-s24/nv160.patch`, then `make -j2 all
# test-gpu`, and build/vcli/head = the CLI of the tree before it): 160-token
# tiles for the nvfp4 row too, its 160-token kernels pulling four NVFP4 loads
# a round (8, 7 and 5 spilled in the pull; CPU: bench/ptxas_report.py
# --bench-shapes 125 kernels, 0 spills; test_heuristics and
# test_mega_moe_api pass). The whole GPU test, A/B at T = 1024 (unchanged
# kernel) and 4096, qwen3-235b at 4096, --phases at 4096 (the pull's cost).
set -u
. bench/results/device_run.sh
abc() { # abc NAME LIMIT ROW TOKENS CLI...
  local name=$1 limit=$2 f=$3 tokens=$4 v cli dir
  shift 4
  for v in "$@"; do
    cli=build/vcli/ef/bin/megajit dir=
    [ $v = new ] && cli=build/bin/megajit
    [ $v = sm ] && dir=build/tv/SM
    [ $v = head ] && cli=build/vcli/head/bin/megajit
    MEGAJIT_TEMPLATE_DIR=$dir run ${name}_$v $limit $cli bench mega-moe --format $f \
      --tokens $tokens --max-tokens 4096 --iters 10 ${EXTRA:-}
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" |
      tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
phases() { # phases TOKENS
  run phases 90 build/bin/megajit bench mega-moe --format mxfp4-a16 --tokens $1 \
    --max-tokens 4096 --iters 5 --phases
  sed -n '/^phases/,$p' "$OUT/phases.log" | head -80
}
case ${1:-1} in
1)
  card
  run full 110 $T --budget 100
  grep -E "passed, |^FAIL|not run|skipped" "$OUT/full.log" | tail -12
  abc a 35 mxfp4-a16 1024,4096 ef sm new ef sm new
  abc b 35 nvfp4 4096 ef sm new ;;
4)
  card
  OUT=$OUT/table SHAPE=deepseek-v3 UNIFORM_S=300 TORCH_S=120 STEPS="uniform torch merge" \
    bash bench/run_mega_moe.sh
  head -40 "$OUT/table/table.txt"
  phases 1,1024 ;;
5)
  card
  run full 110 $T --budget 100
  grep -E "passed, |^FAIL|not run|skipped" "$OUT/full.log" | tail -12
  abc a 35 mxfp4-a16 1024,4096 ef new ef new
  abc c 30 bf16 4096 ef new
  abc d 30 nvfp4-a16 4096 ef new
  for v in templates build/tv/RCn templates build/tv/RCn; do
    MEGAJIT_TEMPLATE_DIR=$v run rc 30 build/bin/megajit bench mega-moe --format mxfp4-a16 \
      --tokens 64,1024 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +mxfp4-a16 +[0-9]+ " "$OUT/rc.log" | tail -2 | sed "s|^|$v |"
  done
  for v in ef new; do
    cli=build/bin/megajit
    [ $v = ef ] && cli=build/vcli/ef/bin/megajit
    run oss_$v 60 $cli bench mega-moe --shape gpt-oss-120b --format mxfp4-a16 \
      --tokens 4096,8192 --iters 10
    grep -E "^gpt-oss-120b +mxfp4-a16 " "$OUT/oss_$v.log" | tail -2 | sed "s|^|$v |"
  done
  phases 4096 ;;
6)
  card
  checks 150 # ran with a 100 s memcheck limit and shorter greps (calls 7, 9)
  for f in mxfp4-a16 nvfp4; do
    for v in templates build/tv/CB2 build/tv/CB3 templates build/tv/CB2 build/tv/CB3; do
      MEGAJIT_TEMPLATE_DIR=$v run cb 40 build/bin/megajit bench mega-moe --format $f \
        --tokens 1024,4096 --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/cb.log" | tail -2 | sed "s|^|$v |"
    done
  done
  MEGAJIT_TEMPLATE_DIR=build/tv/CB2 phases 4096 ;;
7)
  card
  table ;;
8)
  card
  checks 150 # ran with a 100 s memcheck limit and shorter greps (calls 7, 9)
  for f in mxfp4-a16 nvfp4; do
    for v in head new head new; do
      cli=build/bin/megajit
      [ $v = head ] && cli=build/vcli/head/bin/megajit
      run ab_$v 40 $cli bench mega-moe --format $f --tokens 64,1024,4096 --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/ab_$v.log" | tail -3 | sed "s|^|$v |"
    done
  done
  for v in head new; do
    cli=build/bin/megajit
    [ $v = head ] && cli=build/vcli/head/bin/megajit
    run oss_$v 60 $cli bench mega-moe --shape gpt-oss-120b --format mxfp4-a16 \
      --tokens 1024,4096 --max-tokens 4096 --iters 10
    grep -E "^gpt-oss-120b +mxfp4-a16 " "$OUT/oss_$v.log" | tail -2 | sed "s|^|$v |"
  done
  phases 4096 ;;
9)
  card
  for f in mxfp4-a16 nvfp4 mxfp4-a8 bf16; do
    EXTRA="--shared 1" abc sh_$f 40 $f 64,1024,4096 new
  done
  run skew 90 build/bin/megajit bench mega-moe --routing skewed --tokens 1024 --max-tokens 4096 \
    --iters 5
  grep -E "^deepseek-v3 " "$OUT/skew.log" | tail -6 ;;
10)
  card
  checks 150
  for v in head new head new; do
    cli=build/bin/megajit
    [ $v = head ] && cli=build/vcli/head/bin/megajit
    run nv_$v 40 $cli bench mega-moe --format nvfp4 --tokens 1024,4096 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +nvfp4 +[0-9]+ " "$OUT/nv_$v.log" | tail -2 | sed "s|^|$v |"
  done
  for v in head new; do
    cli=build/bin/megajit
    [ $v = head ] && cli=build/vcli/head/bin/megajit
    run qw_$v 60 $cli bench mega-moe --shape qwen3-235b --format nvfp4 --tokens 4096 --iters 10
    grep -E "^qwen3-235b +nvfp4 " "$OUT/qw_$v.log" | tail -1 | sed "s|^|$v |"
  done
  run phases 90 build/bin/megajit bench mega-moe --format nvfp4 --tokens 4096 --max-tokens 4096 \
    --iters 5 --phases
  sed -n '/^phases/,$p' "$OUT/phases.log" | head -20 ;;
esac
