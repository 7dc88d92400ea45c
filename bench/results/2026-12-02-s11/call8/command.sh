# Eleventh session, call 8: branch s11-fold (MXFP4 block scales folded into
# the E4M3 decode where exact, FP8 kind, loops of 16+ columns) against
# build/alt/base = main at d78a1b9. Carry build/{lib,bin,tests,bench,alt}.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != new ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 40 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 5 > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|FAILED" $OUT/$1_$2_$4.log | head -8
}
timeout -k 5 50 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
echo "quick rc=$?"; grep -E "^FAIL|FATAL|device error|passed, " $OUT/quick.log | tail -8
run new mxfp4-a8 64,256,1024 4096
timeout -k 5 45 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/blockm.log 2>&1
echo "block_m rc=$?"; grep -E "^FAIL|FATAL|INFO|passed, " $OUT/blockm.log | tail -8
run base mxfp4-a8 64,256,1024 4096
