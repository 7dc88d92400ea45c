#!/usr/bin/env bash
# The twenty-sixth session's device calls. From the repo root, after
# `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv"]:
#   bash bench/results/2026-12-06-s26/command.sh N
# Call 1 ran the twenty-fifth session's `command.sh 6` (N144 as a template
# variant: the whole GPU test, racecheck, A/B at T = 4096, and the SM clock
# beside the T = 1024 runs); N144 then landed.
# N = 2: Nsight Compute's source counters (stall samples by SASS
# instruction) on one launch of mxfp4-a16 at T = 4096 and 1024, exported as
# CSV (where the epilogues' and the pull's time goes); --phases of the same.
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
esac
