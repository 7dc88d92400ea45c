#!/usr/bin/env bash
# The thirty-second session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s32/command.sh N
# build/bin/megajit-head = the CLI of ac909bf (the session's start; a git
# worktree, `make build/bin/megajit`); build/bin/megajit = this tree's.
# build/bin/megajit-old = the CLI of 59e9a77 (no warm-up steps);
# build/tv/head2 = `git archive ac909bf templates`; build/tv/P3 = the same +
# 2026-12-06-s31/pass3.patch.
# Calls in order: 1, 2, 3 (by hand), 4, the phases (by hand); 5 is prepared.
# N = 1: call 1's tree (build/bin/megajit then): two CTAs an SM for every
# row's tiles of at most 16 tokens, loops over stages of K 128 in groups of
# one step in two fragment sets (four and eight spilled at 96 registers): the GPU
# test's --quick and BLOCK_M sections (8- and 16-token tiles run two CTAs an
# SM), then DeepSeek-V3's rows at T = 1, 8, 64, 256, gpt-oss-120b's E2M1
# rows and Qwen3-235B's mxfp4-a16 at T = 1, 64, 256, head / two / two / head.
# Call 3 ran `checks 150` (the whole GPU test, racecheck and memcheck of
# --quick) by hand on call 1's tree: emulated ranks of mixed T deadlocked.
# N = 4: call 4's tree (E2M1 weights in stages of K 64, tiles of at most
# 16 tokens; one CTA where other ranks share the GPU; second CTAs stand down
# in launches of fewer tasks than CTAs): the whole GPU test, racecheck and
# memcheck of --quick, then gpt-oss-120b's E2M1 rows at T = 1, 8, 64, 256,
# head / landed / landed / head.
# After call 4, by hand on the same machine (call4-phases/): `--phases` of
# gpt-oss-120b mxfp4-a16 at T = 1 with megajit-head and this tree's CLI.
# N = 5 (NOT RUN: no device time left; the next session's first call): the
# rule as landed (two CTAs only in launches of at least two tasks an SM,
# decided by the heuristics; no in-kernel stand-down): gpt-oss-120b's
# mxfp4-a16 and nvfp4 rows at T = 1, 8, 64, 256, head / landed, then the
# whole GPU test, and the gpt-oss section (its one-rank case runs the
# two-CTA kernels) alone and under racecheck.
# N = 6 (NOT RUN; prepared after the calls): build/tv/now = `git archive
# HEAD templates`, build/tv/P3N = the same + pass3_nvfp4.patch (pass3 for
# NVFP4 weights' one-CTA kernels only: six sets spilled at two CTAs' 96
# registers; the rows whose 8- and 16-token launches take one CTA: T = 1, and
# expert biases' 16-token tiles): gpt-oss-120b's nvfp4 and nvfp4-a16 rows at
# T = 1, 8, 64, 256, now / P3N / P3N / now.
# N = 2: the synchronized warm-up (megajit-head) against megajit-old on
# Qwen3-235B and DeepSeek-V3 mxfp4-a16; pass3.patch against head2 on
# gpt-oss-120b's E2M1 rows at T = 1, 64, 256.
set -u
. bench/results/device_run.sh
H=build/bin/megajit-head N=build/bin/megajit
case ${1:-1} in
1)
  card
  run quick 120 $T --quick
  grep -E "passed, |^FAIL" "$OUT/quick.log" | tail -3
  run bm 130 $T --section block_m --budget 100
  grep -E "passed, |^FAIL|skipped|not run" "$OUT/bm.log" | tail -4
  for f in mxfp4-a16 nvfp4 mxfp8 bf16; do
    rows c2 deepseek-v3 $f 1,8,64,256 $H $N $N $H
  done
  for f in mxfp4-a16 nvfp4; do
    rows c2 gpt-oss-120b $f 1,64,256 $H $N $N $H
  done
  rows c2 qwen3-235b mxfp4-a16 1,64,256 $H $N $N $H ;;
2)
  card
  rows warm qwen3-235b mxfp4-a16 1,64,256 build/bin/megajit-old+build/tv/head2 $H \
    build/bin/megajit-old+build/tv/head2 $H
  rows warm deepseek-v3 mxfp4-a16 64,256 build/bin/megajit-old+build/tv/head2 $H \
    build/bin/megajit-old+build/tv/head2 $H
  for f in mxfp4-a16 nvfp4; do
    rows p3 gpt-oss-120b $f 1,64,256 $H+build/tv/head2 $H+build/tv/P3 $H+build/tv/P3 \
      $H+build/tv/head2
  done ;;
4)
  card
  checks 120
  for f in mxfp4-a16 nvfp4 nvfp4-a16; do
    rows c4 gpt-oss-120b $f 1,8,64,256 $H $N $N $H
  done ;;
5)
  # After call 4: the host decides (two CTAs only from two tasks an SM), no
  # in-kernel stand-down.
  card
  for f in mxfp4-a16 nvfp4; do
    rows c5 gpt-oss-120b $f 1,8,64,256 $H $N
  done
  full_test 90
  # The one-rank gpt-oss case runs the two-CTA kernels of the E2M1 rows.
  run gpt 200 $T --section gpt-oss --budget 150
  grep -E "passed, |^FAIL|skipped" "$OUT/gpt.log" | tail -4
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_gpt 300 compute-sanitizer --tool racecheck \
    --error-exitcode 97 $T --section gpt-oss --budget 240
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race_gpt.log" | tail -4 ;;
6)
  card
  for f in nvfp4 nvfp4-a16; do
    rows p3n gpt-oss-120b $f 1,8,64,256 build/tv/now build/tv/P3N build/tv/P3N build/tv/now
  done ;;
esac
