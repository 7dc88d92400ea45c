# Session 9, call 3: branch s9-tiles-quads (= s8's swizzled token tiles,
# batched pull, two-round-trip combine and --phases split, without the
# E2M1 scale fold, which measured slower in call2; plus four K16 steps a
# wgmma group for narrow E2M1 BF16 decodes and the FP8 promotion skipping
# padded token columns) against main in the same run; noswz = the branch
# with main's token layout. Carry ["build/lib","build/bin","build/tests",
# "build/bench","build/tv","build/alt"].
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
run() { # variant row tokens max
  cli=build/bin/megajit; unset MEGAJIT_TEMPLATE_DIR
  case $1 in base) cli=build/alt/base/bin/megajit ;; noswz) export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$1 ;; esac
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|K loop" $OUT/$1_$2_$4.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/; s/ (stores.*//; s/ + epilogue.*//" | head -20
}
timeout -k 5 90 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; grep -E "FAIL|device error|passed, " $OUT/quick.log | tail -8
timeout -k 5 120 build/tests/gpu/test_mega_moe --no-precompile --section gpt-oss > $OUT/gptoss.log 2>&1; echo "gpt-oss rc=$?"; grep -E "FAIL|device error|passed, " $OUT/gptoss.log | tail -8
for v in base new noswz; do run $v mxfp4-a8 1,8,64 64; done
for v in base new; do run $v mxfp4-a8 256,1024 1024; done
for v in base new; do run $v mxfp8 64,1024 1024; done
for v in base new; do run $v mxfp4-a16 8,64 64; done
for v in base new; do run $v nvfp4-a16 64 64; done
for v in base new; do run $v bf16 64,1024 1024; done
