# Eleventh session, call 7 (main at d78a1b9, build/ + build/tv carried): the
# FP8 kind's K loop at 1-64 tokens a tile, ablated through MEGAJIT_TEMPLATE_DIR
# (make_variants.py): onefma = the promotion without the weight-scale product
# (what folding E2M1 block scales into the E4M3 decode would leave), nopromo
# = acc += p, nomath = nopromo and no E2M1 decode (the pipeline's own bound).
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$1
  timeout -k 5 60 build/bin/megajit bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|GEMM .:" $OUT/$1_$2_$4.log | sed "s/(one traced.*task)//; s/(stores.*//; s/= first stage.*K loop/K loop/" | head -12
}
for v in base onefma nopromo nomath; do run $v mxfp4-a8 1,8,64,1024 4096; done
