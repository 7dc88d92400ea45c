#!/usr/bin/env bash
# The twenty-fifth session's device calls. From the repo root, after
# `make -j2 all test-gpu` on 8d119f7 + bench/results/2026-12-06-s24/nv160.patch
# and `bash bench/results/2026-12-06-s25/prepare.sh` (build/vcli/head: 8d119f7's
# CLI; build/vcli/k16: 8d119f7 with the mxfp4-a8 row on the BF16 kind, its
# tiles capped at 128; build/vcli/k16w: the same with 160-token tiles, which
# spill 8 bytes in two DeepSeek-V3 / gpt-oss kernels), carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/vcli"]:
#   bash bench/results/2026-12-06-s25/command.sh N
# N = 1: the whole GPU test of the nv160 tree (also the first GPU run of
#   af66632's mends), racecheck and memcheck; A/B head / new for nvfp4 at
#   T = 1024 (unchanged kernel) and 4096 (160-token tiles).
# N = 2: mxfp4-a8 on the FP8 kind (head) against the BF16 kind (k16, k16w) at
#   T = 1 .. 4096; qwen3-235b nvfp4 at 4096 head / new; --phases of nvfp4 at
#   4096 (the pull's cost at four loads a round).
# Calls 1 and 2 ran N = 1 and 2. 1bac7f9 landed nv160, 0acea34 moved
# mxfp4-a8 to the BF16 kind (k16w, its pull at four MXFP8 loads a round in
# wide tiles), and the tree then deleted the FP8 kind (the kind concept, the
# folded scales, their tests). N = 3 is that tree, carrying build/vcli/k (the
# CLI of 0c4ef24, where the FP8-kind code was still compiled in but unused):
# the whole GPU test, racecheck and memcheck; A/B k / new of mxfp4-a8 at T =
# 1 .. 4096 and of mxfp4-a16, nvfp4, bf16 at T = 1024, 4096 (the deletion
# must change no timing); --phases of mxfp4-a8 at 4096.
# Call 3 ran N = 3 (the whole test stopped at its 120 s budget: 71 cases
# left, the fresh machine's compiles); call 4 ran the whole test again at a
# 250 s budget (`run full2 260 $T --budget 250`); call 5 the table (`table`).
# test_mega_moe_build then found spills the bench shapes do not have: Kimi
# K2's mxfp4-a8 kernels beside its shared expert (8-64 tokens: the lane id
# reloaded in the pull), gpt-oss's mxfp4-a8 kernel beside a shared expert
# (128: the tracer predicate) and with expert biases (160: 16 bytes in the
# math warps). The tree now pulls four MXFP8 loads a round in E2M1 kernels
# beside a shared expert, decides the tracer per task, and caps mxfp4-a8 with
# biases at 128. N = 4 (that tree, carrying build/vcli/k): the whole GPU test
# at 200 s, racecheck and memcheck; A/B k / new (the per-task tracer is in
# every kernel) of mxfp4-a16 and nvfp4 at T = 1024, 4096, and of mxfp4-a8
# with its MXFP8 shared expert (--shared 1) at T = 64, 1024, 4096.
# Call 6 ran N = 4. Deciding the tracer each task then spilled DeepSeek-V3's
# 8-rank mxfp4-a8 160-token kernel (test_mega_moe_build), so only kernels
# with a shared expert's block pairs decide it each task; the others decide
# it once, as before. N = 5 (that tree, the landed one): the whole GPU test at
# 250 s, racecheck and memcheck, and issue 10's table. Call 7 ran N = 5.
# N = 6 (not run; the next session's): after `bash
# bench/results/2026-12-06-s25/prepare.sh tv` (build/tv/N144: this tree's
# templates with N144.patch: 160-token tiles of 129-144 tokens run a
# 144-column loop, but not where the GEMM 1 epilogue quantizes MXFP8 groups
# (mxfp4-a8) nor beside expert biases (gpt-oss), whose kernels spilled with
# it; CPU: bench/ptxas_report.py --templates build/tv/N144 --bench-shapes and
# every preset, 0 spills. With 97-112 tokens also a 112-column loop, every
# 160-token kernel spilled 24-88 bytes: not prepared), carrying
# ["build/lib","build/bin","build/tests/gpu","build/bench","build/tv"]: the
# whole GPU test and racecheck with N144's templates; A/B tree / N144 at
# T = 4096 for mxfp4-a16, nvfp4, nvfp4-a16 and qwen3-235b nvfp4; and why the
# table's T = 1024 reads 6-8% above the A/B runs: mxfp4-a16 at T = 1024 with
# --iters 10 and with the table's auto-sized passes.
set -u
. bench/results/device_run.sh
cli_of() { # cli_of VARIANT: new = this tree, else build/vcli/VARIANT's
  if [ $1 = new ]; then echo build/bin/megajit; else echo build/vcli/$1/bin/megajit; fi
}
ab() { # ab NAME LIMIT ROW TOKENS VARIANT...
  local name=$1 limit=$2 f=$3 tokens=$4 v
  shift 4
  for v in "$@"; do
    run ${name}_$v $limit $(cli_of $v) bench mega-moe --format $f --tokens $tokens \
      --max-tokens 4096 --iters 10 ${EXTRA:-}
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" |
      tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
case ${1:-1} in
1)
  card
  checks 120
  ab nv 40 nvfp4 1024,4096 head new head new ;;
2)
  card
  ab a8 70 mxfp4-a8 1,64,256,1024,4096 head k16 k16w head k16 k16w
  for v in head new; do
    run qw_$v 60 $(cli_of $v) bench mega-moe --shape qwen3-235b --format nvfp4 --tokens 4096 \
      --iters 10
    grep -E "^qwen3-235b +nvfp4 " "$OUT/qw_$v.log" | tail -1 | sed "s|^|$v |"
  done
  run phases 90 build/bin/megajit bench mega-moe --format nvfp4 --tokens 4096 --max-tokens 4096 \
    --iters 5 --phases
  sed -n '/^phases/,$p' "$OUT/phases.log" | head -20 ;;
3)
  card
  checks 120
  ab a8 70 mxfp4-a8 1,64,256,1024,4096 k new k new
  for f in mxfp4-a16 nvfp4 bf16; do
    ab r_$f 40 $f 1024,4096 k new
  done
  run phases 90 build/bin/megajit bench mega-moe --format mxfp4-a8 --tokens 4096 \
    --max-tokens 4096 --iters 5 --phases
  sed -n '/^phases/,$p' "$OUT/phases.log" | head -20 ;;
4)
  card
  checks 200
  for f in mxfp4-a16 nvfp4; do
    ab r_$f 40 $f 1024,4096 k new k new
  done
  EXTRA="--shared 1" ab sh 60 mxfp4-a8 64,1024,4096 k new ;;
5)
  card
  checks 250
  table ;;
6)
  card
  MEGAJIT_TEMPLATE_DIR=build/tv/N144 run full 210 $T --budget 200
  grep -E "passed, |^FAIL|not run|skipped \(" "$OUT/full.log" | tail -4
  MEGAJIT_TEMPLATE_DIR=build/tv/N144 MEGAJIT_MOE_TIMEOUT_MS=60000 \
    run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -2
  for f in mxfp4-a16 nvfp4 nvfp4-a16; do
    for v in templates build/tv/N144 templates build/tv/N144; do
      MEGAJIT_TEMPLATE_DIR=$v run n_$f 40 build/bin/megajit bench mega-moe --format $f \
        --tokens 4096 --max-tokens 4096 --iters 10
      grep -E "^deepseek-v3 +$f +4096 " "$OUT/n_$f.log" | tail -1 | sed "s|^|$v |"
    done
  done
  for v in templates build/tv/N144; do
    MEGAJIT_TEMPLATE_DIR=$v run qw 60 build/bin/megajit bench mega-moe --shape qwen3-235b \
      --format nvfp4 --tokens 4096 --iters 10
    grep -E "^qwen3-235b +nvfp4 " "$OUT/qw.log" | tail -1 | sed "s|^|$v |"
  done
  # The SM clock and power every 50 ms beside each run (sustained clocks
  # under the auto-sized passes are the first suspect).
  for it in "--iters 10" "" "--iters 10" ""; do
    name=auto
    [ -n "$it" ] && name=iters10
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 50 \
      >> "$OUT/clocks_$name.csv" 2>&1 &
    smi=$!
    run iters 40 build/bin/megajit bench mega-moe --format mxfp4-a16 --tokens 1024 \
      --max-tokens 4096 $it
    kill $smi
    grep -E "^deepseek-v3 +mxfp4-a16 +1024 " "$OUT/iters.log" | tail -1 | sed "s|^|${it:-auto} |"
  done
  for f in "$OUT"/clocks_*.csv; do
    echo "$f: SM MHz min/median $(cut -d, -f2 "$f" | grep -o '[0-9]\+' | sort -n | sed -n '1p')" \
      "/ $(cut -d, -f2 "$f" | grep -o '[0-9]\+' | sort -n | awk '{a[NR]=$1} END {print a[int(NR/2)+1]}')"
  done ;;
esac
