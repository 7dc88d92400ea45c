#!/usr/bin/env bash
# The twenty-seventh session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s27/command.sh N
# N = 1: racecheck of the BLOCK_M section (its tiles reach the 32- and
# 64-token loops that the twenty-sixth session grouped); then four-step
# groups in four fragment sets (build/tv/G4S4: the 64-token kernels that
# quantize GEMM 1's output, nvfp4 and mxfp4-a8, which spilled with eight sets;
# build/tv/G4S4all: every grouped narrow loop in four sets) against the tree
# (build/tv/head: `git archive 650b7ce templates`), T = 512 and 1024. Each
# variant is a copy of build/tv/head with its patch applied: `patch -p2 -d
# build/tv/G4S4 < bench/results/2026-12-06-s27/G4S4.patch` (G4S4all alike).
# N = 2: the landed rule (four sets, one group in flight, for nvfp4's
# 64-token kernel only): the whole GPU test; racecheck of the BLOCK_M
# section; nvfp4 at T = 1024, 4096 against build/tv/head (the tree also
# drops the 144-column loop for NVFP4 tokens: first compile).
# Call 3 ran `trees n2 512,1024 nvfp4 build/tv/head templates` (three
# alternations) from the shell.
set -u
. bench/results/device_run.sh
case ${1:-1} in
1)
  card
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_bm 230 compute-sanitizer --tool racecheck --error-exitcode 97 \
    $T --section block_m --budget 200
  grep -E "passed, |^FAIL|RACECHECK SUMMARY|skipped" "$OUT/race_bm.log" | tail -4
  trees s 512,1024 "nvfp4 mxfp4-a8" build/tv/head build/tv/G4S4 build/tv/G4S4all build/tv/head \
    build/tv/G4S4 build/tv/G4S4all ;;
2)
  card
  run full 210 $T --budget 200
  grep -E "passed, |^FAIL|not run|skipped \(" "$OUT/full.log" | tail -4
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race_bm 140 compute-sanitizer --tool racecheck --error-exitcode 97 \
    $T --section block_m --budget 110
  grep -E "passed, |^FAIL|RACECHECK SUMMARY|skipped" "$OUT/race_bm.log" | tail -4
  trees n 1024,4096 nvfp4 build/tv/head templates build/tv/head templates ;;
esac
