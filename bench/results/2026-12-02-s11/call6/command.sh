# Eleventh session, call 6: branch s11-stage-major (weight images stage-major:
# stage s of every task before stage s + 1) against build/alt/base = main at
# d78a1b9 (the cheaper epilogue); the quick test and its racecheck on the
# branch (they also cover main's epilogue change). Carry build/{lib,bin,tests,bench,alt}.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != new ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 60 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|GEMM .:|FAILED" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/(stores.*//; s/= first stage.*K loop/K loop/" | head -12
}
timeout -k 5 100 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
echo "quick rc=$?"; grep -E "^FAIL|FATAL|device error|passed, " $OUT/quick.log | tail -8
for v in base new; do run $v mxfp4-a8 1,8,64 4096; run $v mxfp4-a16 1,1024 4096; run $v bf16 1,64 4096; done
timeout -k 5 120 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --quick --no-precompile > $OUT/race.log 2>&1
echo "race rc=$?"; grep -E "^FAIL|RACECHECK SUMMARY|passed, " $OUT/race.log | tail -4
