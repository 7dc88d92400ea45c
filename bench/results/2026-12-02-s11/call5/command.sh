# Eleventh session, call 5: the cheaper GEMM 1 epilogue (hardware sigmoid
# approximations, BF16 pair rounding in one instruction) on main + working
# tree; build/alt/base = main at 23a6809. Carry build/{lib,bin,tests,bench,alt}.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != new ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 80 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|GEMM 1:|FAILED" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/(stores.*//" | head -12
}
timeout -k 5 120 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
echo "quick rc=$?"; grep -E "^FAIL|FATAL|device error|passed, " $OUT/quick.log | tail -12
timeout -k 5 100 build/tests/gpu/test_mega_moe --section block_m --no-precompile > $OUT/blockm.log 2>&1
echo "block_m rc=$?"; grep -E "^FAIL|FATAL|INFO|passed, " $OUT/blockm.log | tail -10
for v in base new; do run $v nvfp4 1024,4096 4096; run $v mxfp4-a16 1024,4096 4096; run $v mxfp4-a8 1,64,1024 4096; done
timeout -k 5 200 build/tests/gpu/test_mega_moe --budget 150 > $OUT/full.log 2>&1
echo "full rc=$?"; grep -E "^FAIL|FATAL|device error|passed, |precompile" $OUT/full.log | tail -20
