set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
for v in base new; do
  if [ $v = base ]; then export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/base; else unset MEGAJIT_TEMPLATE_DIR; fi
  timeout -k 5 40 build/bin/megajit bench mega-moe --format mxfp4-a8 --tokens 1,8 --max-tokens 64 --iters 10 --phases > $OUT/ph_$v.log 2>&1
  echo "== $v rc=$?"; grep -E "^deepseek-v3 .*T=|phases|GEMM 1" $OUT/ph_$v.log | head -7
done
unset MEGAJIT_TEMPLATE_DIR
timeout -k 5 40 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; tail -1 $OUT/quick.log
