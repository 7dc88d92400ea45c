#!/usr/bin/env bash
# The next session's device calls (prepared in the twenty-first, none run).
# From the repo root, after `make -j2 all test-gpu` and
# `bash bench/results/2026-12-05-s21/next/prepare.sh`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv"]:
#   bash bench/results/2026-12-05-s21/next/command.sh N
# N = 1: what bounds the BF16 kind's K loop: base against ND (no decode) and
#   NM (no wgmma) on mxfp4-a16 at T = 1, 1024, 4096 (ND and NM fail their
#   check by design: only their times count), then racecheck of --quick
#   with base and MB.
# N = 2: issue 14's shared expert at large T: mxfp4-a8, mxfp4-a16, nvfp4
#   and bf16 at T = 64, 1024, 4096, without and with --shared 1.
# N = 3: issue 10's DeepSeek-V3 table (every row, T = 1 .. 4096, PyTorch
#   peer, STREAM US); on an H200 if one comes (the last H200 table is the
#   thirteenth session's).
set -u
. bench/results/device_run.sh
ab() { # ab NAME LIMIT ROW TOKENS VARIANT... (extra CLI arguments in $EXTRA)
  local name=$1 limit=$2 f=$3 tokens=$4 v
  shift 4
  for v in "$@"; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run ${name}_$v $limit build/bin/megajit bench mega-moe \
      --format $f --tokens $tokens --max-tokens 4096 --iters 10 ${EXTRA:-}
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" | tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
case ${1:-1} in
1)
  card
  ab probe 80 mxfp4-a16 1,1024,4096 base ND NM base ND NM
  race_variants base MB ;;
2)
  card
  for f in mxfp4-a8 mxfp4-a16 nvfp4 bf16; do
    ab routed_$f 90 $f 64,1024,4096 base
    EXTRA="--shared 1" ab shared_$f 90 $f 64,1024,4096 base
  done ;;
3)
  card
  table ;;
esac
