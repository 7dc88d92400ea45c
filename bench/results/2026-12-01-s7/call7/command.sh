set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
mkdir -p $OUT
for f in bf16 mxfp8; do
  timeout -k 5 75 build/bin/megajit bench mega-moe --format $f --tokens 1024,4096 --iters 5 > $OUT/b_$f.log 2>&1
  echo "bench $f rc=$?"; grep -E "^deepseek-v3 " $OUT/b_$f.log | head -4
done
timeout -k 5 60 build/bin/megajit bench mega-moe --format mxfp4-a8 --tokens 1,64,4096 --iters 5 > $OUT/b_a8.log 2>&1
echo "bench a8 rc=$?"; grep -E "^deepseek-v3 " $OUT/b_a8.log | head -4
timeout -k 5 100 build/tests/gpu/test_mega_moe --no-precompile --section gpt-oss --budget 90 > $OUT/gptoss.log 2>&1
echo "gpt-oss rc=$?"; grep -E "^(FAIL|PASS)|differ|passed," $OUT/gptoss.log | tail -20
timeout -k 5 60 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1
echo "quick rc=$?"; tail -1 $OUT/quick.log
timeout -k 5 120 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --quick > $OUT/race.log 2>&1
echo "race rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed, " $OUT/race.log | tail -3
