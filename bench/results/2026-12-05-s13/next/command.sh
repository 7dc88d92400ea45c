#!/usr/bin/env bash
# Thirteenth session (2026-12-05, no device lent): the device calls of the
# next session, after bench/results/2026-12-04-s12/next/prepare.sh (which
# builds main, the base 1bc72dc into build/alt/base and the hold variants),
# each with carry ["build/lib","build/bin","build/tests/gpu","build/bench",
# "build/alt","build/tv"]:
#   bash bench/results/2026-12-05-s13/next/command.sh N > $OUT/summary.txt 2>&1; cat $OUT/summary.txt
# N = 1, 2: the twelfth session's parts (its command.sh): the quick test and
#   the BLOCK_M sweep, then A/B timings of base / main / unfolded (1); the full
#   test, racecheck and the remaining A/B (2). The quick and full tests now
#   also run this session's activation parameters and expert biases (matrix,
#   quick set, the wrong-swiglu-alpha and down-bias-without-routing-weight
#   controls, the bias argument checks).
# N = 3: tests/gpu/run.sh: memcheck and racecheck of the quick sets, the
#   Python GPU test (MegaMoE.load_bias, parameters through MoEConfig) and the
#   benches.
# N = 4: what expert biases cost: gpt-oss-120b mxfp4-a16 swigluoai + clamp 7
#   with and without them (the activation parameters are compile-time
#   constants: at their standard values the SASS is unchanged,
#   bench/sass_diff.py).
# N = 5: should the full test of N = 2 run out of its budget before the new
#   cases (they come last in the matrix, and the controls section comes
#   after it): the matrix and the negative controls on their own.
set -u
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-1} in
1 | 2) bash "$here/../../2026-12-04-s12/next/command.sh" "$1" ;;
3) MJ_GPU_BUDGET_S=560 bash tests/gpu/run.sh; cat "${OUT:-/tmp/mj-gpu-out}/summary.txt" ;;
4)
  export MEGAJIT_CACHE_DIR=/tmp/mjcache
  for b in "" --biases; do
    timeout -k 5 200 build/bin/megajit bench mega-moe --shape gpt-oss-120b --format mxfp4-a16 \
      --tokens 1,64,1024 --activation swigluoai --clamp 7 $b > "$OUT/oss${b}.log" 2>&1
    echo "== gpt-oss mxfp4-a16 swigluoai clamp 7 ${b:-(no biases)} rc=$?"
    grep -E "^gpt-oss|layer:|FAILED" "$OUT/oss${b}.log" | head -8
  done ;;
5)
  export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000
  timeout -k 5 280 build/tests/gpu/test_mega_moe --section "negative controls" > "$OUT/controls.log" 2>&1
  echo "controls rc=$?"; grep -E "control|^FAIL|FATAL|passed, " "$OUT/controls.log" | tail -40
  timeout -k 5 280 build/tests/gpu/test_mega_moe --section "format x activation" --no-precompile \
    > "$OUT/matrix.log" 2>&1
  echo "matrix rc=$?"; grep -E "^FAIL|FATAL|skipped|passed, " "$OUT/matrix.log" | tail -20 ;;
esac
