#!/usr/bin/env bash
# The twenty-sixth session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv"]:
#   bash bench/results/2026-12-06-s26/command.sh N
# Call 1 ran the twenty-fifth session's `command.sh 6` (N144 as a template
# variant: the whole GPU test, racecheck, A/B at T = 4096, and the SM clock
# beside the T = 1024 runs); N144 then landed.
# N = 2: Nsight Compute's source counters (stall samples by SASS
# instruction) on one launch of mxfp4-a16 at T = 4096 (160-token tiles) and
# 1024 (64-token tiles), exported as CSV; --phases of the same (calls 2-4:
# call 2's filter caught an 8-token launch, call 3's none; call 4 is the one
# to read, without --phases: NOPHASES=1).
# N = 3 (call 5): four-step fragment groups for the decoded loops of at most
# 40 columns in 64-token tiles: build/tv/G2 (two K16 steps a wgmma fence,
# four fragment sets) and build/tv/G4 (four steps, eight sets; prepare with
# `. bench/results/variants.sh; templates_with G4 G4.patch`) against the
# tree, mxfp4-a16, nvfp4 and mxfp4-a8 at T = 256, 1024.
# N = 4 (call 6): G4 and G4w (G4 also for the 64-column loop and for
# 32-token tiles) against the tree, four rows at T = 512, 1024.
# N = 5 (call 7): the tree with G4 extended to 32-token tiles (the landed
# rule but for the 64-token kernels that quantize GEMM 1's output, which
# spilled), against build/tv/prev (the templates of the commit before it:
# `git archive HEAD templates`): --quick, racecheck, memcheck, four rows at
# T = 64, 512, 1024.
# N = 6 (call 8): the landed rule: the whole GPU test; nvfp4, nvfp4-a16 and
# mxfp8 (whose E4M3 weights keep their loops) at T = 512, 1024 against
# build/tv/prev.
# (The A/B loops ran as written out in each case; `trees` folded them into
# one helper after call 8, the same commands in the same order; the helper
# now lives in device_run.sh.)
set -u
. bench/results/device_run.sh
prof() { # prof NAME TOKENS ROW BLOCK_M: one launch's source counters into $OUT/NAME.csv.gz
  local name=$1 tokens=$2 row=$3 bm=$4
  run prof_$name 240 ncu --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:mega_moe_kernel<.*\\(int\\)$bm, \\(int\\)128, " --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --import-source no -f -o "$OUT/$name" \
    build/bin/megajit bench mega-moe --format $row --tokens $tokens --max-tokens 4096 --iters 2
  tail -5 "$OUT/prof_$name.log"
  ncu --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass 2> "$OUT/src_$name.err" |
    gzip > "$OUT/$name.csv.gz"
  ls -la "$OUT/$name.csv.gz"; head -c 600 "$OUT/src_$name.err"
  ncu --import "$OUT/$name.ncu-rep" --page details > "$OUT/details_$name.txt" 2>&1
  grep -E "Duration|Throughput|Warp Cycles Per Issued|No Eligible|Issued Warp" "$OUT/details_$name.txt" | head -12
  rm -f "$OUT/$name.ncu-rep"
}
case ${1:-2} in
2)
  card
  prof a16_4096 4096 mxfp4-a16 160
  prof a16_1024 1024 mxfp4-a16 64
  [ -n "${NOPHASES:-}" ] && exit 0
  run phases 90 build/bin/megajit bench mega-moe --format mxfp4-a16 --tokens 1024,4096 \
    --max-tokens 4096 --iters 5 --phases
  grep -A8 "^phases" "$OUT/phases.log" | head -24 ;;
3)
  card
  trees g 256,1024 "mxfp4-a16 nvfp4 mxfp4-a8" templates build/tv/G2 build/tv/G4 templates \
    build/tv/G2 build/tv/G4 ;;
4)
  card
  trees w 512,1024 "mxfp4-a16 nvfp4 nvfp4-a16 mxfp4-a8" templates build/tv/G4 build/tv/G4w \
    templates build/tv/G4 build/tv/G4w ;;
5)
  card
  run quick 150 $T --quick
  grep -E "passed, |^FAIL" "$OUT/quick.log" | tail -3
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race 150 compute-sanitizer --tool racecheck --error-exitcode 97 \
    $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -2
  trees f 64,512,1024 "nvfp4 nvfp4-a16 mxfp4-a16 mxfp4-a8" build/tv/prev templates build/tv/prev \
    templates
  run memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -2 ;;
6)
  card
  run full 210 $T --budget 200
  grep -E "passed, |^FAIL|not run|skipped \(" "$OUT/full.log" | tail -4
  trees h 512,1024 "nvfp4 nvfp4-a16 mxfp8" build/tv/prev templates build/tv/prev templates ;;
esac
