#!/usr/bin/env bash
# Prepared in the tenth session (not run: its device time was spent). On the
# CPU machine: `git checkout s10-epi-act && make -j2 all test-gpu &&
# bench/results/2026-12-01-s10/next/prepare.sh`, then device calls `bash
# command.sh 1` and `bash command.sh 2` with carry
# ["build/lib","build/bin","build/tests","build/bench","build/alt"].
# Stacked branches, each A/B against the one before:
#   main; loop = s10-one-loop (one K loop for both GEMMs, the stage count a
#   runtime argument: half the code, the same inner loop); pull =
#   s10-nvfp4-pull (the NVFP4 token pull in 16-byte loads, pairs decoded by
#   bit placement); branch = s10-epi-act (the GEMM 1 epilogue activates in a
#   rolled loop over valid elements; NVFP4 step 6 through the pair decoder).
# Part 1: the branch's quick, full, racecheck and BLOCK_M-sweep tests; loop vs
#   main where the K loop is hot (mxfp4-a8 T=1,64,1024; mxfp4-a16 T=64,1024).
# Part 2: pull vs loop (nvfp4 T=256,1024,4096 on a 4096-token buffer, the
#   --phases "pull" figure); branch vs pull (the GEMM 1 epilogue figure:
#   nvfp4, mxfp4-a16 and mxfp4-a8 at T=1024,4096).
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != branch ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 100 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|^phases|GEMM 1:|FAILED" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/; first stage landed.*//; s/(stores.*//" | head -16
}
if [ "${1:-1}" = 1 ]; then
  OUT=$OUT STEPS="quick full race" bash tests/gpu/mega_moe_iter.sh
  timeout -k 5 100 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/blockm.log 2>&1
  echo "block_m rc=$?"; grep -E "^FAIL|INFO|passed, " $OUT/blockm.log
  for v in main loop; do run $v mxfp4-a8 1,64,1024 1024; run $v mxfp4-a16 64,1024 1024; done
else
  for v in loop pull; do run $v nvfp4 256,1024,4096 4096; done
  for v in pull branch; do for f in nvfp4 mxfp4-a16 mxfp4-a8; do run $v $f 1024,4096 4096; done; done
fi
