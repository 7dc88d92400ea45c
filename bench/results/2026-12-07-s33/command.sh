#!/usr/bin/env bash
# The thirty-third session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-07-s33/command.sh N
# build/bin/megajit-head = the CLI of ac909bf (the thirty-second session's
# start: one CTA an SM everywhere); build/bin/megajit = this tree's.
# build/tv/now = `git archive 8bbac3d templates`; build/tv/P3N = the same +
# 2026-12-06-s32/pass3_nvfp4.patch.
# N = 1: the thirty-second session's two-CTA rule as landed (two CTAs only in
# launches of at least two tasks an SM): gpt-oss-120b's mxfp4-a16 and nvfp4
# rows at T = 1, 8, 64, 256, head / landed / landed / head; pass3 for NVFP4
# one-CTA loops, now / P3N / P3N / now; then the whole GPU test and the
# gpt-oss section (its one-rank case runs the two-CTA kernels).
set -u
. bench/results/device_run.sh
H=build/bin/megajit-head N=build/bin/megajit
case ${1:-1} in
1)
  card
  for f in mxfp4-a16 nvfp4; do
    rows c5 gpt-oss-120b $f 1,8,64,256 $H $N $N $H
  done
  for f in nvfp4 nvfp4-a16; do
    rows p3n gpt-oss-120b $f 1,8,64,256 build/tv/now build/tv/P3N build/tv/P3N build/tv/now
  done
  full_test 90
  run gpt 130 $T --section gpt-oss --budget 110
  grep -E "passed, |^FAIL|skipped" "$OUT/gpt.log" | tail -4 ;;
esac
