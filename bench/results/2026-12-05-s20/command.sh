#!/usr/bin/env bash
# Twentieth session's device plan (no device was lent in that session: none
# of it has run). From the repo root, after `make -j2 all test-gpu` and
# `bash bench/results/2026-12-05-s20/prepare.sh`, carrying ["build/lib",
# "build/bin","build/tests/gpu","build/bench","build/tv"]:
#   bash bench/results/2026-12-05-s20/command.sh N
# N = 1: the whole GPU test of the tree (dbceaf6 made the counter bank, the
#   regions and the trace pointer where used: run on no GPU yet), the phases of mxfp4-a16 at T = 4096 (the tiles of at most 32
#   rows apart), then T = 1024 (64-token tiles) interleaved base, V, base, V:
#   V = S4 for mxfp4-a16, nvfp4-a16, nvfp4 and mxfp8, V = F2 for mxfp4-a8.
# N = 2: racecheck of --quick with a 60 s wait limit on base and on MB,
#   memcheck of --quick, then issue 10's DeepSeek-V3 table (every row, T = 1
#   .. 4096, uniform) with the PyTorch BF16 peer; its STREAM US column
#   (cf0086a, first run here) is the read kernel on the floor's bytes.
# N = 3: C40 against base at T = 1024, interleaved (base, C40, base, C40):
#   mxfp4-a16, nvfp4-a16, nvfp4 and mxfp4-a8 on DeepSeek-V3, mxfp4-a16 on
#   gpt-oss-120b; then test_mega_moe --section block_m with C40.
# N = 4: CB against base, interleaved, mxfp4-a16 and bf16 at T = 1024 and
#   4096 on DeepSeek-V3, the phases of mxfp4-a16 at T = 4096 with CB (its
#   "combine + end"), then test_mega_moe --section block_m with CB.
# The variants (build/tv/NAME, prepare.sh):
#   base  templates/ as they stand
#   S4    mainloop.cuh: the BF16 kind's decoded 64-token tiles keep four
#         fragment sets (three K16 steps of wgmma in flight) instead of two
#   F2    mainloop.cuh: the FP8 kind's 64-token tiles batch two K32 steps a
#         wait in their half- and three-quarter-width loops (one before)
#   MB    mega_moe.cuh: a math warp's lane 0 reads the task mailbox and
#         shuffles it to the warp (every reader then arrives on task_empty
#         itself; racecheck's 14 mailbox reports name that read)
#   CB    combine.cuh + launch.cuh: the combine's slot loads are predicated
#         instead of behind a branch on the slot's validity (where each was
#         issued after the sum of the one before, a round trip a slot); the
#         sums and their order are the same
#   C40   mainloop.cuh + wgmma_ops.cuh: the 64-token tiles' three-quarter
#         loop computes 40 token columns instead of 48 (at T = 1024 on
#         DeepSeek-V3 an expert gets 32 pairs on average: most tiles above 32
#         hold 33-40)
set -u
. bench/results/device_run.sh
phases() { # phases ROW TOKENS
  run phases_$1 90 build/bin/megajit bench mega-moe --format "$1" --tokens "$2" \
    --max-tokens 4096 --iters 5 --phases
  grep -E "^phases|GEMM [12]:|between|at most" "$OUT/phases_$1.log" | cut -c1-260
}
case ${1:-1} in
1)
  card
  run full 210 $T --budget 200
  grep -E "passed, |^FAIL|not run|skipped" "$OUT/full.log" | tail -12
  phases mxfp4-a16 4096
  for f in mxfp4-a16 nvfp4-a16 nvfp4 mxfp8 mxfp4-a8; do
    V=S4; [ $f = mxfp4-a8 ] && V=F2
    for v in base $V base $V; do
      MEGAJIT_TEMPLATE_DIR=build/tv/$v run ab_$v 60 build/bin/megajit bench mega-moe --format $f \
        --tokens 1024 --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 +$f T=" "$OUT/ab_$v.log" | tail -1 | sed "s|^|$v |"
    done
  done ;;
2)
  card
  for v in base MB; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v MEGAJIT_MOE_TIMEOUT_MS=60000 run race_$v 150 \
      compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
    grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race_$v.log" | tail -4 | sed "s|^|$v |"
  done
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  table ;;
3)
  card
  for sf in deepseek-v3:mxfp4-a16 deepseek-v3:nvfp4-a16 deepseek-v3:nvfp4 deepseek-v3:mxfp4-a8 \
    gpt-oss-120b:mxfp4-a16; do
    shape=${sf%%:*} f=${sf#*:}
    for v in base C40 base C40; do
      MEGAJIT_TEMPLATE_DIR=build/tv/$v run c40_$v 60 build/bin/megajit bench mega-moe \
        --shape $shape --format $f --tokens 1024 --max-tokens 4096 --iters 10
      grep -E "^$shape +$f T=" "$OUT/c40_$v.log" | tail -1 | sed "s|^|$v |"
    done
  done
  MEGAJIT_TEMPLATE_DIR=build/tv/C40 run block_m 150 $T --section block_m
  grep -E "passed, |^FAIL" "$OUT/block_m.log" | tail -6 ;;
4)
  card
  for f in mxfp4-a16 bf16; do for v in base CB base CB; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run cb_$v 90 build/bin/megajit bench mega-moe --format $f \
      --tokens 1024,4096 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +$f T=" "$OUT/cb_$v.log" | tail -2 | sed "s|^|$v |"
  done; done
  MEGAJIT_TEMPLATE_DIR=build/tv/CB phases mxfp4-a16 4096
  MEGAJIT_TEMPLATE_DIR=build/tv/CB run block_m 150 $T --section block_m
  grep -E "passed, |^FAIL" "$OUT/block_m.log" | tail -6 ;;
esac
