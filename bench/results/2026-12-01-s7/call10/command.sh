set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
timeout -k 5 45 build/bin/megajit bench mega-moe --format mxfp4-a8 --tokens 1,8 --max-tokens 64 --iters 10 --phases > $OUT/ph.log 2>&1
echo "bench rc=$?"; grep -E "^deepseek-v3 |phases|GEMM" $OUT/ph.log | head -8
PYTHONPATH=python MEGAJIT_LIB=build/lib/libmegajit.so.0 timeout -k 5 150 python3 python/tests/gpu/test_megajit_gpu.py > $OUT/py.log 2>&1
echo "python rc=$?"; grep -E "FAIL|passed|overhead|us" $OUT/py.log | tail -8
