# Session 8, call 1: the kernel of HEAD checked (quick), then ablations of the
# K loops through MEGAJIT_TEMPLATE_DIR (build/tv/NAME = templates with one
# change; results are wrong by design except base and sets8): where the
# BF16-decode and FP8-promotion loops spend their time.
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout -k 5 90 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; tail -1 $OUT/quick.log
run() { # variant row tokens max
  export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$1
  timeout -k 5 60 build/bin/megajit bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4.log | sed 's/ = first stage.*K loop/ K loop/' | head -8
}
for v in base nodec nomul nomma sets8; do run $v mxfp4-a16 8,64 64; done
for v in base nopromo; do run $v mxfp4-a8 1024 1024; run $v mxfp8 1024 1024; done
for v in base nolds; do run $v bf16 4096 4096; done
