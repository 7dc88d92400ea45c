#!/usr/bin/env bash
# The twenty-third session's device calls. From the repo root, after
# `make -j2 all test-gpu` and `bash bench/results/2026-12-06-s23/prepare.sh`
# (build/vcli/base: the CLI of 04a1bc5, the twenty-second session's tree;
# build/vcli/ef: 1333922's; build/tv/SC), carrying ["build/lib","build/bin",
# "build/tests/gpu","build/bench","build/vcli","build/tv"]:
#   bash bench/results/2026-12-06-s23/command.sh N
# N = 1: the tree 04a1bc5 + G2S.patch (a GEMM 2 token stage waits for the
#   GEMM 1 units it reads, not for the whole tile): the whole GPU test,
#   racecheck and memcheck of --quick; A/B of base and G2S (mxfp4-a16 at T =
#   1, 8, 64, 1024, nvfp4 at T = 1, 8); --phases of mxfp4-a16 at T = 1, 1024.
# N = 2 (on the same tree): issue 14's shared expert at large T: four rows at
#   T = 64, 1024, 4096 without and with --shared 1.
# N = 3: 1333922 (EF: the GEMM 1 epilogue activates each quantization group's
#   words in the quantizing loop, no separate activation pass): the whole GPU
#   test, then A/B of base and EF (mxfp4-a16, nvfp4 and mxfp4-a8 at T = 64,
#   1024, 4096; bf16 at 4096), --phases of mxfp4-a16 at 1024.
# N = 4 (1333922): racecheck and memcheck of --quick, issue 10's DeepSeek-V3
#   table with the PyTorch peer.
# N = 5 (1333922): nvfp4 with a BF16 and an MXFP8 shared expert at T = 1, 64,
#   1024, 4096; --phases of mxfp4-a16 at 4096.
# N = 6 (not run: the session's device time ran out; the next session's
#   first call): the tree with SM.patch applied (`git apply
#   bench/results/2026-12-06-s23/SM.patch`, then `make -j2 all test-gpu`; SM:
#   the GEMM 2 epilogue stores its BF16 results to shared memory with
#   stmatrix.trans, 16 a thread at 128 tokens instead of 128 two-byte
#   stores) against build/vcli/ef: the whole GPU test, racecheck and
#   memcheck of --quick, A/B (mxfp4-a16 at T = 1024, 4096, nvfp4 at 4096);
#   SC (build/tv/SC: this tree's templates with
#   bench/results/2026-12-06-s22/SC.patch, the read-ceiling kernel with each
#   CTA streaming one contiguous range, as the MoE tasks do) against the
#   committed ceiling: the read ceiling and STREAM US at T = 1; racecheck of
#   --quick with build/tv/RC (RC.patch: every math thread arrives on the task
#   mailbox's empty barrier after reading the task, instead of lane 0 for its
#   warp after __syncwarp; the 14 hazards racecheck reports pair those reads
#   with the producer's next write of the slot), and with build/tv/MB (the
#   twentieth session's MB.patch: lane 0 reads the task and shuffles it);
#   NS (NS.patch: no 40-column loop beside a shared expert's own loop on the
#   FP8 kind, which brings Kimi-K2's slowest first compile under 3 s): its
#   cost on mxfp4-a8 with an MXFP8 shared expert at T = 1024.
# N = 8 (not run): the tree with bm160.patch applied (160-token tiles for
#   the BF16-kind rows but mxfp8 and nvfp4, a 128-column loop beside, their
#   epilogue inputs loaded after the K loop) against build/vcli/ef: the whole
#   GPU test (its block_m case forces 160 with 160 tokens on one expert),
#   then A/B at T = 4096 (bf16, mxfp4-a16, nvfp4-a16) and gpt-oss-120b at T =
#   4096 and 8192 (mxfp4-a16).
# N = 7 (not run): on an H200, issue 10's DeepSeek-V3 table and --phases of
#   mxfp4-a16 at T = 1, 1024 and 4096 (none since the thirteenth session).
set -u
. bench/results/device_run.sh
abc() { # abc NAME LIMIT ROW TOKENS CLI... (new: build/bin; else build/vcli/CLI)
  local name=$1 limit=$2 f=$3 tokens=$4 v cli
  shift 4
  for v in "$@"; do
    cli=build/bin/megajit
    [ "$v" != new ] && cli=build/vcli/$v/bin/megajit
    run ${name}_$v $limit $cli bench mega-moe --format $f --tokens $tokens --max-tokens 4096 \
      --iters 10 ${EXTRA:-}
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/${name}_$v.log" |
      tail -$(echo $tokens | tr ',' '\n' | wc -l) | sed "s|^|$v |"
  done
}
phases() { # phases TOKENS
  run phases 90 build/bin/megajit bench mega-moe --format mxfp4-a16 --tokens $1 \
    --max-tokens 4096 --iters 5 --phases
  sed -n '/^phases/,$p' "$OUT/phases.log" | head -80
}
case ${1:-6} in
1)
  card
  checks 100
  abc a 60 mxfp4-a16 1,8,64,1024 base new base new
  abc b 40 nvfp4 1,8 base new
  phases 1,1024 ;;
2)
  card
  for f in mxfp4-a16 nvfp4 mxfp4-a8 bf16; do
    for sh in 0 1; do
      EXTRA="--shared $sh" abc sh_${f}_$sh 80 $f 64,1024,4096 new
    done
  done ;;
3)
  card
  run full 120 $T --budget 100
  grep -E "passed, |^FAIL|not run" "$OUT/full.log" | tail -6
  abc a 60 mxfp4-a16 64,1024,4096 base new base new
  abc b 60 nvfp4 64,1024,4096 base new
  abc c 60 mxfp4-a8 64,1024,4096 base new
  abc d 60 bf16 4096 base new
  phases 1024 ;;
4)
  card
  MEGAJIT_MOE_TIMEOUT_MS=60000 run race 120 compute-sanitizer --tool racecheck --error-exitcode 97 \
    $T --quick
  grep -E "passed, |^FAIL|RACECHECK SUMMARY" "$OUT/race.log" | tail -3
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  OUT=$OUT/table SHAPE=deepseek-v3 UNIFORM_S=250 TORCH_S=100 STEPS="uniform torch merge" \
    bash bench/run_mega_moe.sh
  head -40 "$OUT/table/table.txt" ;;
5)
  for sf in bf16 mxfp8; do
    EXTRA="--shared 1 --shared-format $sf" abc nv_$sf 80 nvfp4 1,64,1024,4096 new
  done
  phases 4096 ;;
6)
  card
  checks 60
  abc a 40 mxfp4-a16 1024,4096 ef new ef new
  abc b 40 nvfp4 4096 ef new
  for v in base SC; do # SC: the read ceiling with each CTA streaming one range
    [ $v = base ] && dir=templates || dir=build/tv/SC
    MEGAJIT_TEMPLATE_DIR=$dir run sc_$v 60 build/bin/megajit bench mega-moe \
      --format mxfp4-a16 --tokens 1 --max-tokens 4096 --iters 10
    grep -E "ceilings|^deepseek-v3 +mxfp4-a16 +1 " "$OUT/sc_$v.log" | tail -2 | sed "s|^|$v |"
  done
  race_variants RC MB
  for v in templates build/tv/NS; do
    MEGAJIT_TEMPLATE_DIR=$v run ns 60 build/bin/megajit bench mega-moe --format mxfp4-a8 \
      --tokens 1024 --max-tokens 4096 --iters 10 --shared 1
    grep -E "^deepseek-v3 +mxfp4-a8 +1024 " "$OUT/ns.log" | tail -1 | sed "s|^|$v |"
  done ;;
8)
  card
  checks 100
  abc a 60 mxfp4-a16 4096 ef new ef new
  abc b 60 bf16 4096 ef new
  abc c 60 nvfp4-a16 4096 ef new
  for v in ef new; do
    cli=build/bin/megajit
    [ $v = ef ] && cli=build/vcli/ef/bin/megajit
    run oss_$v 90 $cli bench mega-moe --shape gpt-oss-120b --format mxfp4-a16 \
      --tokens 4096,8192 --iters 10
    grep -E "^gpt-oss-120b +mxfp4-a16 " "$OUT/oss_$v.log" | tail -2 | sed "s|^|$v |"
  done ;;
7)
  card
  OUT=$OUT/table SHAPE=deepseek-v3 UNIFORM_S=300 TORCH_S=120 STEPS="uniform torch merge" \
    bash bench/run_mega_moe.sh
  head -40 "$OUT/table/table.txt"
  phases 1,1024,4096 ;;
esac
