set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
timeout -k 5 200 build/tests/gpu/test_mega_moe --no-precompile --budget 110 --section "intermediates" > $OUT/inter.log 2>&1
echo "inter rc=$?"; grep -E "^(PASS|FAIL)|bm 16|rank 0|pair|block|best|relaunch|unit" $OUT/inter.log | head -150
