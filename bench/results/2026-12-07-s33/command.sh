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
# N = 2 (by hand, right after call 1 on the same machine): the gpt-oss
# section under racecheck (`race_gpt` below).
# N = 3 (dropped before it ran: no machine started): routed block pairs in every
# launch of the E2M1 rows' 8-token kernels, pairs_only_ab.patch.
# N = 4: routed block pairs in the two-CTA 8-token kernels (every routed task
# two 64-row blocks, one a math warpgroup; the one-block loop in passes of
# three), and the heuristics counting them (gpt-oss-120b at T = 1: 272 tasks,
# two CTAs). build/bin/megajit-base = 6ad761b's CLI, build/bin/megajit-land
# = the CLI of 6ad761b + pairs_two_cta.patch (the GPU test too).
# gpt-oss-120b's mxfp4-a16, nvfp4 and nvfp4-a16 rows at T = 1, 8, 64, base /
# land / land / base; --phases of mxfp4-a16 at T = 1; the GPU test's gpt-oss
# section (its new 8-token case with expert biases runs the pair kernels; it
# was left at the budget).
# Call 5, by hand on call 4's machine (call5/): megajit-base on each shape,
#   megajit bench mega-moe --shape S --tokens 1,8,64,256,1024,4096 \
#     --max-tokens 4096 --iters 10
# then --phases of gpt-oss-120b mxfp4-a16 at T = 8, Qwen3-235B mxfp4-a16 at
# T = 1024 (ph2.log) and DeepSeek-V3 mxfp4-a16 at T = 1 and 1024 (ph3.log).
# N = 6 (prepared for the next session; not run): the landed tree's GPU
# checks: the gpt-oss section (its new 8-token case with expert biases runs
# the two-CTA kernels with biases) alone and under racecheck (about 450 s).
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
2)
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_gpt 280 compute-sanitizer --tool racecheck \
    --error-exitcode 97 $T --section gpt-oss --budget 230
  grep -E "passed, |^FAIL|RACECHECK SUMMARY|skipped" "$OUT/race_gpt.log" | tail -4 ;;
4)
  card
  B=build/bin/megajit-base L=build/bin/megajit-land
  for f in mxfp4-a16 nvfp4 nvfp4-a16; do
    rows pairs gpt-oss-120b $f 1,8,64 $B $L $L $B
  done
  run phases 40 $L bench mega-moe --shape gpt-oss-120b --format mxfp4-a16 --tokens 1 \
    --max-tokens 4096 --iters 10 --phases
  grep -E "^phases|GEMM|between" "$OUT/phases.log"
  run gpt 130 $T --section gpt-oss --budget 110
  grep -E "passed, |^FAIL|skipped" "$OUT/gpt.log" | tail -4 ;;
6)
  card
  run gpt 200 $T --section gpt-oss --budget 180
  grep -E "passed, |^FAIL|skipped" "$OUT/gpt.log" | tail -4
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_gpt 330 compute-sanitizer --tool racecheck \
    --error-exitcode 97 $T --section gpt-oss --budget 300
  grep -E "passed, |^FAIL|RACECHECK SUMMARY|skipped" "$OUT/race_gpt.log" | tail -4 ;;
esac
