# Session 9, call 9: branch s9-bf16-half (the half-width loop also for MXFP4
# weights on the BF16 kind, 64-token tiles) — the quick test, then
# mxfp4-a16 at T=1024 (BLOCK_M 64) against s9-half16 at 19806cd
# (build/alt/h16) in the same run, twice each. Carry ["build/lib","build/bin",
# "build/tests","build/bench","build/alt"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="quick" bash tests/gpu/mega_moe_iter.sh
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 = h16 ] && cli=build/alt/h16/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 20 --phases > $OUT/$1_$2_$4_$5.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4_$5.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
for r in 1 2; do for v in h16 bf16half; do run $v mxfp4-a16 1024 1024 $r; done; done
