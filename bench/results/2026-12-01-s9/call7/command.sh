# Session 9, call 7: branch s9-half16 (the half-width FP8 loop also for
# 16-token tiles whose stages hold eight or more K32 steps) — the quick test,
# then the FP8-kind rows at T=256 (BLOCK_M 16) against s9-half-n at 6efd21b
# (build/alt/hn) in the same run. Built on the CPU machine with `make -j2 all
# test-gpu` and a worktree build of 6efd21b copied to build/alt/hn; carry
# ["build/lib","build/bin","build/tests","build/bench","build/alt"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="quick" bash tests/gpu/mega_moe_iter.sh
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 = hn ] && cli=build/alt/hn/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 20 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
for v in hn half16 hn half16; do run $v mxfp4-a8 256 256; run $v mxfp8 256 256; done
