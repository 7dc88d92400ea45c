# Session 9, call 5: branch s9-half-n (FP8-kind tiles of 32+ tokens at most
# half full run half-width wgmmas) — the quick and full correctness tests,
# then the FP8-kind rows against s9-tiles-quads at 7f51eee (build/alt/s9) in
# the same run. Carry ["build/lib","build/bin","build/tests","build/bench",
# "build/alt"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="quick full" bash tests/gpu/mega_moe_iter.sh
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 = s9 ] && cli=build/alt/s9/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
for v in s9 half; do run $v mxfp4-a8 256,1024 1024; run $v mxfp8 256,1024 1024; done
