#!/usr/bin/env bash
# The twenty-ninth session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s29/command.sh N
# build/tv/head = `git archive b931841 templates` (the twenty-eighth
# session's end); templates = the tree under test.
# N = 1: the card; the whole GPU test and memcheck of --quick on the tree
# (GEMM 2's rows leave the scratch by bulk stores that complete under the
# next K loop; racecheck left out for the device budget); then DeepSeek-V3
# at T = 1,
# 1024 and 4096, head against the tree, twice in alternating order, for
# mxfp4-a16, nvfp4 and bf16; then --phases of mxfp4-a16 at 1024 and 4096.
# (Call 1 ran N = 1 with the tree of bulk_l2_stores.patch against b931841's
# templates.) N = 2: issue 10's DeepSeek-V3 table on b931841's templates (the
# patch backed out), with the PyTorch BF16 peer (`table`).
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  full_test 200
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  trees ab 1,1024,4096 "mxfp4-a16 nvfp4 bf16" build/tv/head templates templates build/tv/head
  phases 1024,4096 mxfp4-a16 ;;
2)
  card
  TORCH_S=120 table ;;
4)
  card
  for v in build/tv/head templates templates build/tv/head; do
    MEGAJIT_TEMPLATE_DIR=$v run ab_qwen 90 build/bin/megajit bench mega-moe --shape qwen3-235b \
      --format mxfp4-a16 --tokens 1024 --max-tokens 4096 --iters 10
    grep -E "^qwen3-235b +mxfp4-a16 +1024 " "$OUT/ab_qwen.log" | tail -1 | sed "s|^|$v |"
    MEGAJIT_TEMPLATE_DIR=$v run ab_kimi 90 build/bin/megajit bench mega-moe --shape kimi-k2 \
      --format mxfp4-a16 --tokens 4096 --max-tokens 4096 --iters 10
    grep -E "^kimi-k2 +mxfp4-a16 +4096 " "$OUT/ab_kimi.log" | tail -1 | sed "s|^|$v |"
  done
  run q 130 $T --section block_m --budget 110
  grep -E "passed, |^FAIL|skipped|not run" "$OUT/q.log" | tail -3 ;;
6)
  card
  MEGAJIT_TEMPLATE_DIR=build/tv/L64 run q64 130 $T --section block_m --budget 110
  grep -E "passed, |^FAIL|skipped|not run" "$OUT/q64.log" | tail -3
  for f in mxfp4-a16 nvfp4; do
    for v in templates build/tv/L64 build/tv/L64 templates; do
      MEGAJIT_TEMPLATE_DIR=$v run ab_l64_$f 90 build/bin/megajit bench mega-moe \
        --shape qwen3-235b --format $f --tokens 1024 --max-tokens 4096 --iters 10
      grep -E "^qwen3-235b +$f +1024 " "$OUT/ab_l64_$f.log" | tail -1 | sed "s|^|$v |"
    done
  done ;;
esac
