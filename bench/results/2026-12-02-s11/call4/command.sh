# Eleventh session, call 4 (main at 23a6809, build/ + build/tv carried): GEMM 1
# epilogue ablations through MEGAJIT_TEMPLATE_DIR (make_variants.py); only the
# times of the wrong-by-design variants count.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$1
  timeout -k 5 80 build/bin/megajit bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|GEMM 1:" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/(stores.*//" | head -8
}
for v in base noact unroll4 noquant noepi; do run $v nvfp4 1024,4096 4096; run $v mxfp4-a16 1024 4096; done

