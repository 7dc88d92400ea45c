#!/usr/bin/env bash
# The twenty-second session's device calls. From the repo root, after
# `make -j2 all test-gpu`, `bash bench/results/2026-12-05-s21/next/prepare.sh`
# and `bash bench/results/2026-12-06-s22/prepare.sh`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv",
# "build/vcli"]:
#   bash bench/results/2026-12-06-s22/command.sh N
# N = 1d: RD (the BF16 kind's E2M1 words decoded in 9 instructions instead of
#   10) against base (mxfp4-a16 and nvfp4 at T = 1024); N = 1e: what calls 2-4 ran
#   after it (ND, NX, RD, base; PW, IL, base on mxfp4-a16 at T = 1 and 1024;
#   RD and base on nvfp4-a16).
# N = 1b: NM (the decode without the wgmmas) at T = 1 and 1024; S12
#   (build/vcli/S12: the heuristics' MAX_STAGES 12, 11 stages instead of 8 at
#   T <= 64) at T = 1; SC (the bulk-read ceiling kernel with each CTA
#   streaming one contiguous range, as the MoE tasks do): the read ceiling and
#   STREAM US at T = 1.
# N = 2: issue 10's DeepSeek-V3 table (every row, T = 1 .. 4096, PyTorch peer).
# N = 3: issue 14's shared expert at large T: mxfp4-a8, mxfp4-a16, nvfp4
#   and bf16 at T = 64, 1024, 4096, without and with --shared 1; racecheck
#   of --quick with base and MB.
# N = 4 (the next session's first call, on the committed tree, which has RD):
#   the whole GPU test, racecheck and memcheck of --quick, then issue 10's
#   DeepSeek-V3 table on the H200.
set -u
. bench/results/device_run.sh
ab() { # ab NAME LIMIT ROW TOKENS VARIANT... (extra CLI arguments in $EXTRA, CLI in $CLI)
  local name=$1 limit=$2 f=$3 tokens=$4 v
  shift 4
  for v in "$@"; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run ${name}_$v $limit ${CLI:-build/bin/megajit} bench \
      mega-moe --format $f --tokens $tokens --max-tokens 4096 --iters 10 ${EXTRA:-}
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" | tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
case ${1:-1d} in
1d)
  ab rd 40 mxfp4-a16 1024 base RD
  ab rd 40 nvfp4 1024 base RD ;;
1e) # what calls 2-4 ran on the warm machine after call 1 (1d)
  ab p 30 mxfp4-a16 1,1024 ND NX RD base
  ab q 25 mxfp4-a16 1,1024 PW IL base
  ab r 22 nvfp4-a16 1,1024 RD base ;;
1b)
  card
  ab probe 80 mxfp4-a16 1,1024 NM base
  CLI=build/vcli/S12/bin/megajit ab s12 60 mxfp4-a16 1 base
  MEGAJIT_TEMPLATE_DIR=build/tv/SC run sc 60 build/bin/megajit bench mega-moe \
    --format mxfp4-a16 --tokens 1 --max-tokens 4096 --iters 10
  grep -E "ceilings|^deepseek-v3 +mxfp4-a16 +1 " "$OUT/sc.log" | tail -2 | sed "s|^|SC |" ;;
2)
  card
  table ;;
3)
  card
  for f in mxfp4-a8 mxfp4-a16 nvfp4 bf16; do
    ab routed_$f 90 $f 64,1024,4096 base
    EXTRA="--shared 1" ab shared_$f 90 $f 64,1024,4096 base
  done
  race_variants base MB ;;
4)
  card
  checks 100
  table ;;
esac
