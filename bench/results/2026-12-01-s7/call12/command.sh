set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
timeout -k 5 30 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; tail -1 $OUT/quick.log
for f in mxfp4-a8 mxfp4-a16; do
timeout -k 5 40 build/bin/megajit bench mega-moe --format $f --tokens 1,8,64 --max-tokens 64 --iters 10 > $OUT/b_$f.log 2>&1
echo "== $f rc=$?"; grep -E "^deepseek-v3 .*T=" $OUT/b_$f.log | head -3; done
