# Session 8, call 2 (prepared, not run: no machine was lent after call1).
# Branch s8-swizzled-token-tiles against main's kernel in the same run:
# base = main (build/alt/base), tiles = token tiles in the swizzled layout
# (whole-line writes) and the batched pull (build/alt/tiles, commit 66a5d0b),
# new = the branch (that plus E2M1 block scales folded into the E4M3 decode
# for mxfp4-a8, and the combine in two round trips an item), pairs / quads =
# new with two / four K16 steps per wgmma group (BF16 kind, build/tv/NAME);
# nofence = new without the GEMM 1 epilogue's proxy fence (a timing probe,
# wrong by design: its bench check may fail); noswz = new with main's token
# layout (a fallback if the swizzled layout fails).
# On the CPU machine first: `make -j2 all test-gpu &&
# bench/results/2026-12-01-s8/call2/prepare.sh`, then run this with carry
# ["build/lib","build/bin","build/tests","build/bench","build/tv","build/alt"],
# in two device calls (each under 10 minutes): `bash command.sh 1` (the tests,
# then large T) and `bash command.sh 2` (small T).
set -u
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
run() { # variant row tokens max
  cli=build/bin/megajit; unset MEGAJIT_TEMPLATE_DIR
  case $1 in base|tiles) cli=build/alt/$1/bin/megajit ;; pairs|quads|nofence) export MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/$1 ;; esac
  timeout -k 5 90 $cli bench mega-moe --format $2 --tokens $3 --max-tokens $4 --iters 10 --phases > $OUT/$1_$2_$4.log 2>&1
  echo "== $1 $2 rc=$?"; grep -E "^deepseek-v3 .*T=|phases|K loop|weight copy" $OUT/$1_$2_$4.log | sed "s/(one traced.*task): //; s/ = first stage.*K loop/ K loop/" | head -20
}
part=${1:-1}
if [ "$part" = 1 ]; then
  timeout -k 5 90 build/tests/gpu/test_mega_moe --quick > $OUT/quick.log 2>&1; echo "quick rc=$?"; grep -E "FAIL|device error|passed, " $OUT/quick.log | tail -8
  timeout -k 5 120 build/tests/gpu/test_mega_moe --no-precompile --section gpt-oss > $OUT/gptoss.log 2>&1; echo "gpt-oss rc=$?"; grep -E "FAIL|device error|passed, " $OUT/gptoss.log | tail -8
  # The branch with main's token layout (build/tv/noswz): says whether the swizzle is at fault if the above fail.
  MEGAJIT_TEMPLATE_DIR=$PWD/build/tv/noswz timeout -k 5 90 build/tests/gpu/test_mega_moe --quick > $OUT/quick_noswz.log 2>&1; echo "quick noswz rc=$?"; grep -E "FAIL|device error|passed, " $OUT/quick_noswz.log | tail -8
  for v in base new; do run $v bf16 4096 4096; done
  for v in base tiles new; do run $v mxfp4-a8 256,1024 1024; done
else
  for v in base tiles new nofence; do run $v mxfp4-a8 1,8,64 64; done
  for v in base new pairs quads; do run $v mxfp4-a16 8,64 64; done
fi
