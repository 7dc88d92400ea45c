set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
timeout -k 5 150 build/tests/gpu/test_mega_moe --no-precompile --section "intermediates" > $OUT/inter.log 2>&1
echo "inter rc=$?"; grep -v "^  rank" $OUT/inter.log | tail -40
timeout -k 5 100 build/bin/megajit bench mega-moe --hidden 2880 --intermediate 2880 --experts 8 --topk 4 --tokens 16 --format bf16 --iters 3 > $OUT/b8.log 2>&1
echo "bench e8 rc=$?"; tail -4 $OUT/b8.log
