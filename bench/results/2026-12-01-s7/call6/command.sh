set -u
export MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
for v in base v1 v2 v6; do
  if [ $v = base ]; then unset MEGAJIT_TEMPLATE_DIR; else export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$v; fi
  export MEGAJIT_CACHE_DIR=/tmp/mjcache_$v
  timeout -k 5 100 build/tests/gpu/test_mega_moe --no-precompile --seed 10054202448144986654 --budget 50 --section "intermediates" > $OUT/inter_$v.log 2>&1
  echo "== $v rc=$?"; grep -E "^(PASS|FAIL)|bm 16" $OUT/inter_$v.log | head -20
done
