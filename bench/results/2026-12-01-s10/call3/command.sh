#!/usr/bin/env bash
# Tenth session, device call 3: branch s9-w4-bm128 + the setmaxnreg fix (40 / 232
# for the two-loop NVFP4 kernels; 48 / 232 asked for more registers than the CTA
# holds and hung). build/ = that branch, build/alt/main = main.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != branch ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 20 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop|FAILED" $OUT/$1_$2_$4.log | sed "s/ = first stage.*K loop/ K loop/; s/ + epilogue.*//" | head -12
}
OUT=$OUT STEPS="quick" bash tests/gpu/mega_moe_iter.sh
for v in main branch; do run $v nvfp4 1024 1024; run $v nvfp4-a16 1024 1024; done
for v in main branch; do run $v mxfp4-a16 2048,4096 4096; run $v nvfp4 2048,4096 4096; done
timeout -k 5 250 build/tests/gpu/test_mega_moe --budget 200 >"$OUT/full.log" 2>&1
echo "full rc=$?"; grep -E "^FAIL|FATAL|device error|passed, |precompile" "$OUT/full.log" | tail -20
