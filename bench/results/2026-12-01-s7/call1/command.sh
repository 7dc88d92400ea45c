set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -k 5 200 build/tests/gpu/test_mega_moe --no-precompile --budget 180 --section "DIAG" > $OUT/diag.log 2>&1
echo "diag rc=$?"
grep -E "^(PASS|FAIL)|variant|calc_diff|relaunch|token|first diff|passed," $OUT/diag.log | grep -v "^  rank .*calc_diff=[0-9.e-]* (bar" | head -150
for f in bf16 mxfp8; do timeout -k 5 150 build/bin/megajit bench mega-moe --format $f --tokens 1024,4096 --iters 5 --phases > $OUT/ph_$f.log 2>&1; echo "bench $f rc=$?"; done
tail -45 $OUT/ph_bf16.log; tail -45 $OUT/ph_mxfp8.log
