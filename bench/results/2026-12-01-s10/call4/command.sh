#!/usr/bin/env bash
# Tenth session, device call 4: main vs the fixed branch (8736b1c) at the
# headline's small sizes on one 4096-token buffer (rows the branch should not
# change) and mxfp4-a8 at T=1024 (the unpadded ring's stage count).
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
run() { # variant row tokens max
  cli=build/bin/megajit; [ $1 != branch ] && cli=build/alt/$1/bin/megajit
  timeout -k 5 80 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 max $4 rc=$?"; grep -E "^deepseek-v3 .*T=|FAILED" $OUT/$1_$2_$4.log | head -8
}
for v in main branch; do run $v mxfp4-a16 1,64,256 4096; run $v nvfp4 1,64,256 4096; run $v mxfp4-a8 1024 4096; done
