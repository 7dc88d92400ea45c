#!/usr/bin/env bash
# Nineteenth session: device calls from the repo root with build/ made from
# this tree (make -j2 all test-gpu) and template variants in build/tv/NAME
# (MEGAJIT_TEMPLATE_DIR), carried ["build/lib","build/bin","build/tests/gpu",
# "build/bench","build/tv"]:
#   bash bench/results/2026-12-05-s19/command.sh N
# N = 1: 128-token tiles of at most NARROW_N tokens on the BF16 kind run a
#   K loop of NARROW_N columns (build/tv/v32, v16) against build/tv/base
#   (this tree's templates), DeepSeek-V3 one rank at T = 4096, interleaved;
#   then the phases of mxfp4-a8 and bf16 at T = 1, and test_mega_moe
#   --section block_m with v32.
# N = 2: the first stage at T = 1: build/tv/base (this tree, with warp 1's
#   pull stamped as the phases' "pull"), H (the weight producer holds its
#   second copy up to 20 us for its first stage instead of 2), H0 (not at
#   all); mxfp4-a8 and mxfp4-a16 at T = 1, 8, 64 with --phases; then the whole
#   GPU test (--budget 200), racecheck and memcheck of --quick. (Call 2 ran
#   the variants with warp 1's pull stamped as "pull", which the phases
#   tool refused: a task started before that stamp.)
# N = 3: the variants of N = 2 again, then issue 10's DeepSeek-V3 table
#   (every row, T = 1 .. 4096, uniform) with the PyTorch BF16 peer.
# N = 4: bench/rs_overlap again (its first run serialized the N = 128 RS
#   wgmmas; now also two warpgroups issuing), then the weights' L2 policy:
#   build/tv/EN streams them evict_normal instead of evict_first (an expert's
#   second 128-token tile then may find its weights in L2), against
#   build/tv/base, for bf16, mxfp8 and mxfp4-a16 at T = 8, 256, 1024, 4096.
# N = 5: build/tv/EL (normal priority only for the weights of an expert's
#   tiles before its last) against base and EN, interleaved (base, EL, EN,
#   base, EL), bf16, mxfp8, mxfp4-a16 and nvfp4 at T = 8, 1024, 4096.
# N = 6 (the last call, on what was committed): the whole GPU test within a
#   short budget, memcheck of --quick, bench/sass_guard.py over the kernels it
#   compiled, the phases of mxfp4-a16 at T = 1024 and 4096, then issue 10's
#   DeepSeek-V3 table with the PyTorch peer. First, bench/rs_overlap
#   (build/bench/rs_overlap): do one warpgroup's integer instructions overlap
#   another's wgmmas (RS and SS)?
# The variants (build/tv/NAME, each this tree's templates with one change):
#   v32, v16  mainloop.cuh: the BF16 kind's 128-token tiles of at most 32
#             (16) tokens run 32- (16-) column wgmmas (landed as v32)
#   H, H0     mega_moe.cuh: kFirstStageWaitNs 20000, 0 (instead of 2000)
#   EN        pipeline.cuh: every weight copy L2 evict_normal
#   EL        the expert's tiles before its last evict_normal (landed)
#   base      the tree's templates as they were before that change
set -u
. bench/results/device_run.sh
variant() { # variant NAME ROW: one row at T = 4096 with build/tv/NAME
  MEGAJIT_TEMPLATE_DIR=build/tv/$1 run ab_$1 90 build/bin/megajit bench mega-moe --format "$2" \
    --tokens 4096 --max-tokens 4096 --iters 10
  grep -E "^deepseek-v3 +$2 " "$OUT/ab_$1.log" | tail -1 | sed "s|^|$1 |"
}
hold_variants() { # build/tv/{base,H,H0}: mxfp4-a8 and mxfp4-a16 at T = 1, 8, 64 with --phases
  for v in base H H0; do for f in mxfp4-a8 mxfp4-a16; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run t1_$v 60 build/bin/megajit bench mega-moe --format $f \
      --tokens 1,8,64 --max-tokens 4096 --iters 10 --phases
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/t1_$v.log" | tail -3 | sed "s|^|$v |"
    grep -E "^phases|GEMM 1:|first stage landed .* after its first" "$OUT/t1_$v.log" | tail -9 |
      cut -c1-200 | sed "s|^|$v |"
  done; done
}
case ${1:-1} in
1)
  card
  run overlap 60 build/bench/rs_overlap
  cat "$OUT/overlap.log"
  for f in mxfp4-a16 nvfp4 mxfp8; do for v in base v32 v16; do variant $v $f; done; done
  for f in nvfp4-a16 bf16; do for v in base v32; do variant $v $f; done; done
  for f in mxfp4-a8 bf16; do
    run phases 60 build/bin/megajit bench mega-moe --format $f --tokens 1 --max-tokens 4096 \
      --iters 10 --phases
  done
  MEGAJIT_TEMPLATE_DIR=build/tv/v32 run block_m 120 $T --section block_m
  grep -E "passed, |^FAIL|INFO block_m" "$OUT/block_m.log" | tail -14 ;;
2)
  card
  hold_variants
  checks 200 ;;
3)
  card
  hold_variants
  table ;;
4)
  card
  run overlap 90 build/bench/rs_overlap
  cat "$OUT/overlap.log"
  for f in bf16 mxfp8 mxfp4-a16; do for v in base EN; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run policy_$v 90 build/bin/megajit bench mega-moe --format $f \
      --tokens 8,256,1024,4096 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/policy_$v.log" | tail -4 | sed "s|^|$v |"
  done; done ;;
5)
  card
  for f in bf16 mxfp8 mxfp4-a16 nvfp4; do for v in base EL EN base EL; do
    MEGAJIT_TEMPLATE_DIR=build/tv/$v run policy_$v 90 build/bin/megajit bench mega-moe --format $f \
      --tokens 8,1024,4096 --max-tokens 4096 --iters 10
    grep -E "^deepseek-v3 +$f +[0-9]+ " "$OUT/policy_$v.log" | tail -3 | sed "s|^|$v |"
  done; done ;;
6)
  card
  run final 180 $T --budget 150
  grep -E "passed, |^FAIL|skipped" "$OUT/final.log" | tail -6
  run memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 97 $T --quick
  grep -E "passed, |^FAIL|ERROR SUMMARY" "$OUT/memcheck.log" | tail -3
  run guard 60 python3 bench/sass_guard.py --cache "$MEGAJIT_CACHE_DIR"
  tail -3 "$OUT/guard.log"
  run phases 60 build/bin/megajit bench mega-moe --format mxfp4-a16 --tokens 1024,4096 \
    --max-tokens 4096 --iters 10 --phases
  grep -E "^phases|GEMM [12]:|between" "$OUT/phases.log" | cut -c1-220
  table ;;
esac
