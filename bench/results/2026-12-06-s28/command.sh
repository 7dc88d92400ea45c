#!/usr/bin/env bash
# The twenty-eighth session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s28/command.sh N
# N = 1: the card; issue 10's DeepSeek-V3 table with the PyTorch BF16 peer
# (`table`); then --phases of mxfp4-a16 and nvfp4 at T = 256 and 1024.
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  table
  for f in mxfp4-a16 nvfp4; do
    run phases_$f 80 build/bin/megajit bench mega-moe --format $f --tokens 256,1024 \
      --max-tokens 4096 --iters 10 --phases
    grep -E "^deepseek-v3 " "$OUT/phases_$f.log" | tail -2
  done ;;
esac
