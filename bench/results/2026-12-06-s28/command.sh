#!/usr/bin/env bash
# The twenty-eighth session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s28/command.sh N
# N = 1 (not run: no machine started): the card; issue 10's DeepSeek-V3
# table with the PyTorch BF16 peer (`table`); then --phases of mxfp4-a16 and
# nvfp4 at T = 256 and 1024.
# N = 2 (no H200 started; on an H100): --phases of nvfp4, mxfp4-a16 and
# mxfp4-a8 at T = 1024 and 4096 (where do the GEMM 1 epilogues of the rows
# that quantize GEMM 2's input go).
# N = 3: the whole GPU test on the tree; then DeepSeek-V3 at T = 1024 and
# 4096, twice in alternating order, with each template tree: build/tv/head
# (`git archive 35baa0c templates`), build/tv/A (wide tiles' epilogue inputs
# copied into shared memory under the K loop: A.patch against head),
# build/tv/B (`git archive 55bafd5 templates`: A + the nvfp4 GEMM 1
# epilogue's re-quantization without codes) and the tree (B + one fence a
# round of pulled rows); A only for nvfp4, the one row where it differs
# from B. N = 4: the same for mxfp4-a16 and mxfp4-a8 (head, B, the tree),
# then --phases of nvfp4 and mxfp4-a16 on the tree.
# N = 5: the checks of ec3b021 (then the tree): the whole GPU test, racecheck of the
# BLOCK_M section (its wide tiles copy their epilogue inputs by cp.async)
# and memcheck of --quick; then mxfp4-a16 with build/tv/C (`git archive
# ba53df5 templates`) against the tree (the GEMM 1 epilogue reads no x scale
# for tokens that carry none). N = 6: nvfp4-a16, mxfp8 and bf16 at T = 1,
# 1024 and 4096 with build/tv/head against the tree. N = 7: issue 10's
# DeepSeek-V3 table on the landed tree (`table`, the PyTorch peer's step at
# 120 s; not run: no H200 started and no device time left). N = 8: the
# landed tree (the re-quantization and the x-scale
# change only: the epilogue prefetch and the pull's round fence made
# DeepSeek-V3's 8-rank kernels spill): the whole GPU test, then nvfp4,
# nvfp4-a16 and mxfp4-a16 at T = 1024 and 4096 against build/tv/head.
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  table
  phases 256,1024 mxfp4-a16 nvfp4 ;;
2)
  card
  phases 1024,4096 nvfp4 mxfp4-a16 mxfp4-a8 ;;
3)
  card
  full_test 200
  trees t 1024,4096 nvfp4 build/tv/head build/tv/A build/tv/B templates \
    templates build/tv/B build/tv/A build/tv/head ;;
4)
  card
  trees t 1024,4096 "mxfp4-a16 mxfp4-a8" build/tv/head build/tv/B templates \
    templates build/tv/B build/tv/head
  phases 1024,4096 nvfp4 mxfp4-a16 ;;
5)
  card
  full_test 200
  race_block_m 120
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  trees x 1024,4096 mxfp4-a16 build/tv/C templates templates build/tv/C ;;
6)
  card
  trees y 1,1024,4096 "nvfp4-a16 mxfp8 bf16" build/tv/head templates templates build/tv/head ;;
7)
  card
  TORCH_S=120 table ;;
8)
  card
  full_test 200
  trees f 1024,4096 "nvfp4 nvfp4-a16 mxfp4-a16" build/tv/head templates templates build/tv/head ;;
esac
