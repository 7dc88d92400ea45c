#!/usr/bin/env bash
# The thirtieth session's device calls, in the order they ran (each on an
# H100; the first nine start attempts got no machine). From the repo root,
# after `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s30/command.sh N
# build/tv/head = `git archive 32a9731 templates` (the session's start);
# build/tv/L64 = the same + 2026-12-06-s29/loop64.patch.
# N = 1: routed block pairs (the tree = head + block_pairs.patch, embedded by
# the build): the whole GPU test, racecheck and memcheck of --quick, then
# gpt-oss-120b at T = 1, head against the tree, alternated, and --phases of
# the tree there.
# N = 2 (on head): --phases of Qwen3-235B and gpt-oss-120b at T = 64
# (mxfp8, mxfp4-a16); Qwen3-235B at T = 64 with 10 and 40 steps a pass (the
# twenty-ninth session's all-shapes run read MegaMoE alone above pre-dispatch
# + MegaMoE there); Qwen3-235B mxfp4-a16 at T = 1024, head against L64.
# N = 3: test_mega_moe's BLOCK_M section on L64; Qwen3-235B nvfp4 at T = 1024,
# head against L64. N = 4: Kimi K2 mxfp4-a16 at T = 4096, head against L64.
# N = 5 (not run; for the next session): group_k64.patch, gpt-oss-120b's E2M1
# and mxfp8 rows (decoded in stages of K 64 there) at T = 64, 256 and 1024, build/tv/head (now the landed tree) against
# build/tv/G4 = `git archive HEAD templates` + group_k64.patch.
set -u
. bench/results/device_run.sh
shape_phases() { # shape_phases SHAPE TOKENS ROW...
  local shape=$1 tokens=$2 f
  shift 2
  for f in "$@"; do
    run ph_${shape}_$f 60 build/bin/megajit bench mega-moe --shape $shape --format $f \
      --tokens $tokens --max-tokens 4096 --iters 10 --phases
    grep -E "^$shape +$f |^phases|^  |^    " "$OUT/ph_${shape}_$f.log"
  done
}
ab() { # ab NAME SHAPE ROW TOKENS TREE...: one line per tree, in order
  local name=$1 shape=$2 f=$3 tokens=$4 v
  shift 4
  for v in "$@"; do
    MEGAJIT_TEMPLATE_DIR=$v run $name 60 build/bin/megajit bench mega-moe --shape $shape \
      --format $f --tokens $tokens --max-tokens 4096 --iters ${ITERS:-10}
    grep -E "^$shape +$f +$tokens " "$OUT/$name.log" | tail -1 | sed "s|^|$v |"
  done
}
H=build/tv/head L=build/tv/L64
case ${1:-1} in
1)
  card
  checks 200
  for f in mxfp4-a16 nvfp4 bf16; do
    ITERS=20 ab ab_pairs_$f gpt-oss-120b $f 1 $H templates templates $H
  done
  shape_phases gpt-oss-120b 1 mxfp4-a16 ;;
2)
  card
  export MEGAJIT_TEMPLATE_DIR=$H
  for s in qwen3-235b gpt-oss-120b; do
    shape_phases $s 64 mxfp8 mxfp4-a16
  done
  for n in 10 40; do
    for f in mxfp8 mxfp4-a16; do
      ITERS=$n ab rep qwen3-235b $f 64 $H
    done
  done
  ab l64 qwen3-235b mxfp4-a16 1024 $H $L $L $H ;;
3)
  MEGAJIT_TEMPLATE_DIR=$L run q64 130 $T --section block_m --budget 110
  grep -E "passed, |^FAIL|skipped|not run|INFO" "$OUT/q64.log" | tail -12
  ab l64n qwen3-235b nvfp4 1024 $H $L $L $H ;;
4)
  ab kimi kimi-k2 mxfp4-a16 4096 $H $L $L $H ;;
5)
  card
  for f in mxfp4-a16 nvfp4 mxfp8; do
    for t in 64 256 1024; do
      ab g4_$f gpt-oss-120b $f $t $H build/tv/G4 build/tv/G4 $H
    done
  done ;;
esac
