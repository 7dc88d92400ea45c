#!/usr/bin/env bash
# Tenth session, device call 6 (same build as call 5, machine still warm): the
# quick test and the gpt-oss section.
export MEGAJIT_CACHE_DIR=/tmp/mjcache MEGAJIT_MOE_TIMEOUT_MS=3000 PATH="$PATH:/usr/local/cuda/bin"; timeout -k 5 40 build/tests/gpu/test_mega_moe --quick --no-precompile > $OUT/quick.log 2>&1; echo "quick rc=$?"; grep -E "^FAIL|passed, " $OUT/quick.log; timeout -k 5 150 build/tests/gpu/test_mega_moe --section gpt-oss --no-precompile > $OUT/gptoss.log 2>&1; echo "gpt-oss rc=$?"; grep -E "^FAIL|FATAL|passed, " $OUT/gptoss.log
