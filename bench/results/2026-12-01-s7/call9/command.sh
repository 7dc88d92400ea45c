set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t1() { grep -E "^deepseek-v3 $2 T=1:" $1 | sed -E 's/.*T=1: ([0-9.]+) us.*/\1/'; }
for v in base new; do
  if [ $v = base ]; then export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/base; else unset MEGAJIT_TEMPLATE_DIR; fi
  for f in mxfp4-a8 mxfp4-a16; do
    timeout -k 5 55 build/bin/megajit bench mega-moe --format $f --tokens 1,8,64 --max-tokens 64 --iters 10 --phases > $OUT/ph_${v}_$f.log 2>&1
    echo "== $v $f rc=$?"; grep -E "^deepseek-v3 |GEMM|between|span" $OUT/ph_${v}_$f.log | head -12
  done
done
b=$(awk -v x="$(t1 $OUT/ph_base_mxfp4-a8.log mxfp4-a8)" -v y="$(t1 $OUT/ph_base_mxfp4-a16.log mxfp4-a16)" 'BEGIN{print x+y}')
n=$(awk -v x="$(t1 $OUT/ph_new_mxfp4-a8.log mxfp4-a8)" -v y="$(t1 $OUT/ph_new_mxfp4-a16.log mxfp4-a16)" 'BEGIN{print x+y}')
echo "T=1 sums: base $b new $n"
if awk -v n="$n" -v b="$b" 'BEGIN{exit !(n > 0 && n < b)}'; then unset MEGAJIT_TEMPLATE_DIR; echo "validating: new"; else export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/base; echo "validating: base"; fi
timeout -k 5 40 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; tail -1 $OUT/quick.log
timeout -k 5 100 compute-sanitizer --tool racecheck --error-exitcode 97 build/tests/gpu/test_mega_moe --quick > $OUT/race.log 2>&1
echo "race rc=$?"; grep -E "RACECHECK SUMMARY|passed, " $OUT/race.log | tail -2
timeout -k 5 100 build/tests/gpu/test_mega_moe --no-precompile --section gpt-oss --budget 90 > $OUT/gptoss.log 2>&1
echo "gpt-oss rc=$?"; grep -E "^FAIL|passed," $OUT/gptoss.log | tail -4
