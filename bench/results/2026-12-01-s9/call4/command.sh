# Session 9, call 4: branch s9-tiles-quads with the padded-column skip of the
# FP8 promotion for E4M3 weights only (call3: E2M1 weights lost 4-14% with
# it): the full correctness test and racecheck of the quick test, then the
# mxfp4-a8 rows against main (build/alt/base) in the same run. Carry
# ["build/lib","build/bin","build/tests","build/bench","build/alt"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
OUT=$OUT STEPS="quick full race" bash tests/gpu/mega_moe_iter.sh
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 = base ] && cli=build/alt/base/bin/megajit
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
for v in base new; do run $v mxfp4-a8 1,8,64 64; run $v mxfp4-a8 256,1024 1024; done
