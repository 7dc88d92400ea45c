#!/usr/bin/env bash
# Seventeenth session (2026-12-05; no device started, so none of this ran):
# device calls from the repo root, with build/ made from this tree with
# mxfp8_bf16_kind.patch applied (git apply
# bench/results/2026-12-05-s17/mxfp8_bf16_kind.patch; make -j2 all test-gpu),
# the patched kernels being what call 1 measures and checks, and the
# sixteenth session's CLI and GPU test beside it for the A/B
# (git archive 6fe5617 | tar -x -C /tmp/b17 && make -C /tmp/b17 -j2 all test-gpu;
# mkdir -p build/base-s16 && cp /tmp/b17/build/bin/megajit
# /tmp/b17/build/tests/gpu/test_mega_moe build/base-s16/),
# and a CLI of this tree with the mxfp8 row's stages at K 128 instead of 64
# (build/k128/megajit: heuristics/mega_moe_config.c's MAX_TILE_STAGE_BYTES
# set to 1000000 in a copy of the tree, `make cli` there),
# carried ["build/lib","build/bin","build/tests/gpu","build/bench","build/base-s16","build/k128"]:
#   bash bench/results/2026-12-05-s17/command.sh N
# N = 1: the mxfp8 row on the BF16 kind (MXFP8 weights and tokens decoded
#   into BF16, tiles up to 128 tokens): this build's CLI against the
#   sixteenth session's and the K 128 one on mxfp8 at T = 1 .. 4096, then the
#   format matrix and the BLOCK_M section against the fp64 reference.
# N = 2: the whole GPU test (--budget 320), racecheck and memcheck of --quick.
# N = 3: issue 10's table on DeepSeek-V3 (every row, T = 1 .. 4096, uniform
#   routing) with the PyTorch BF16 peer, bench/run_mega_moe.sh.
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  mxfp8_ab build/base-s16/megajit build/bin/megajit build/k128/megajit
  run matrix 110 $T --section format --budget 100
  grep -E "passed, |^FAIL|mxfp8" "$OUT/matrix.log" | tail -12
  run block_m 90 $T --section block_m --budget 80
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -14 ;;
2) checks 320 ;;
3) table ;;
esac
