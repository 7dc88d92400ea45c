# Prepared for the next session (not run: no device time was left in the
# ninth). On the CPU machine: `git checkout s9-w4-bm128 && make -j2 all
# test-gpu && bench/results/2026-12-01-s9/next/prepare.sh`, then two device
# calls, `bash command.sh 1` and `bash command.sh 2`, with carry
# ["build/lib","build/bin","build/tests","build/bench","build/alt"].
#   main = main; nvh = s9-nvfp4-half (the half-width loop for NVFP4 weights on the
#   BF16 kind, setmaxnreg 48 / 232 for those kernels); ring = s9-compact-ring (nvh +
#   the ring without per-stage padding: mxfp4-a8 8-token kernels and mxfp8
#   16-token ones at one rank get back a stage); branch = s9-w4-bm128 (ring +
#   128-token tiles for E2M1 weights on the BF16 kind).
# Part 1: the branch's quick, full and racecheck tests; the stage back
#   (mxfp4-a8 T=1,8,64 and mxfp8 T=256, main vs ring).
# Part 2: nvfp4 and nvfp4-a16 at T=1024 (main, nvh), twice each; the E2M1
#   BF16-kind rows at T=2048,4096 (ring vs branch: 64- vs 128-token tiles);
#   the max_tokens_per_rank effect seen in the ninth session (mxfp4-a16
#   T=1024: 3104 us on a buffer of 1024 tokens, 3480 on one of 4096), with
#   --phases.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max tag
  cli=build/bin/megajit; [ $1 != branch ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 120 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 20 --phases > $OUT/$1_$2_$4_$5.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop|pull" $OUT/$1_$2_$4_$5.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
if [ "${1:-1}" = 1 ]; then
  OUT=$OUT STEPS="quick full race" bash tests/gpu/mega_moe_iter.sh
  for v in main ring; do run $v mxfp4-a8 1,8,64 64 1; run $v mxfp8 256 256 1; done
else
  for r in 1 2; do for v in main nvh; do run $v nvfp4 1024 1024 $r; run $v nvfp4-a16 1024 1024 $r; done; done
  for v in ring branch; do run $v mxfp4-a16 2048,4096 4096 1; run $v nvfp4 2048,4096 4096 1; done
  for f in mxfp4-a16 mxfp4-a8; do for m in 1024 4096; do run ring $f 1024 $m 1; done; done
fi
