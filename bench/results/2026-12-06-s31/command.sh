#!/usr/bin/env bash
# The thirty-first session's device calls, in the order they ran. From the
# repo root, after `make -j2 all test-gpu`, carrying
# ["build/lib","build/bin","build/tests/gpu","build/tv"]:
#   bash bench/results/2026-12-06-s31/command.sh N
# build/tv/head = `git archive 59e9a77 templates` (the session's start);
# build/tv/G4 = the same + 2026-12-06-s30/group_k64.patch.
# build/bin/megajit-s12, -s16 = the CLI of 59e9a77 with the heuristics'
# MAX_STAGES 12 or 16 (a git worktree, sed on heuristics/mega_moe_config.c,
# `make build/bin/megajit`, the binary copied here).
# build/tv/BP = build/tv/head + the templates of 2026-12-06-s30/block_pairs.patch.
# N = 1: test_mega_moe's BLOCK_M section on the embedded tree (its new
# 80-token case runs the 96-column loop); deeper rings (MAX_STAGES 16, 12)
# against head on gpt-oss-120b, DeepSeek-V3 and Qwen3-235B at T <= 1024;
# routed block pairs with MAX_STAGES 16 at gpt-oss-120b T = 1;
# then group_k64.patch on gpt-oss-120b's E2M1 and mxfp8 rows at T = 64, 256
# and 1024, head against G4, alternated.
# N = 2: build/bin/megajit-old = the CLI of 59e9a77 (no warm-up steps), the
# embedded one then had the first warm-up (untimed steps queued for 0.1 s of
# host time, up to 1000, then one wait); build/tv/G4N = head
# with group_k64.patch's groups for narrow tiles only (kK64Group), build/tv/G2
# = head with groups of two K16 steps in four sets there. Qwen3-235B
# mxfp4-a16 at T = 1, 64, 256 with both CLIs; gpt-oss-120b mxfp4-a16 and
# nvfp4 at T = 1, 64, 256, 1024 with head, G4N and G2, alternated; then the
# whole GPU test, racecheck and memcheck of --quick on the faster of G4N and
# G2 (the sum of its T = 64 and 256 figures).
# Calls 3-6 ran by hand on the same warm machine: `mxfp8_ab.txt` (gpt-oss
# mxfp8 at T = 1, 64, 256, head against G2), `--shape all --tokens
# 64,256,1024` with G2 (all_shapes.log), DeepSeek-V3 mxfp4-a16 at T = 256
# with megajit-old against the embedded CLI of the first warm-up (a second of
# queued steps) and an SM-clock trace (clocks.csv).
# N = 7: the synchronized 50 ms warm-up (the embedded CLI) against
# megajit-old on Qwen3-235B and DeepSeek-V3 mxfp4-a16, alternated; then
# build/tv/P3 = `git archive HEAD templates` + pass3.patch (K-64 stages in
# passes of three, six fragment sets) against build/tv/head2 = `git archive
# HEAD templates` on gpt-oss-120b's E2M1 rows at T = 1, 64, 256.
set -u
. bench/results/device_run.sh
H=build/tv/head G=build/tv/G4 M=build/bin/megajit S12=build/bin/megajit-s12 S16=build/bin/megajit-s16
case ${1:-1} in
1)
  card
  run bm 110 $T --section block_m --budget 90
  grep -E "passed, |^FAIL|skipped|not run" "$OUT/bm.log" | tail -6
  for f in mxfp4-a16 nvfp4 mxfp8; do
    rows st_gpt_$f gpt-oss-120b $f 1,64,256,1024 $M $S16 $S16 $M
  done
  rows st_gpt_s12 gpt-oss-120b mxfp4-a16 1,64,256,1024 $S12
  for f in mxfp4-a16 nvfp4; do
    ITERS=20 rows st_bp_$f gpt-oss-120b $f 1 $S16 $S16+build/tv/BP $S16+build/tv/BP $S16
  done
  rows st_dsv3 deepseek-v3 mxfp4-a16 1,64,256 $M $S16
  rows st_qwen3 qwen3-235b mxfp4-a16 1,64,256 $M $S16
  for f in mxfp4-a16 nvfp4 mxfp8; do
    rows g4_$f gpt-oss-120b $f 64,256,1024 $H $G $G $H
  done ;;
2)
  card
  rows warm qwen3-235b mxfp4-a16 1,64,256 build/bin/megajit-old $M build/bin/megajit-old $M
  for f in mxfp4-a16 nvfp4; do
    rows ab gpt-oss-120b $f 1,64,256,1024 $H build/tv/G4N build/tv/G2 build/tv/G2 build/tv/G4N $H
  done | tee "$OUT/ab.txt"
  best=$(awk '$1 ~ /G4N|G2/ && ($4 == 64 || $4 == 256) { t[$1] += $6 }
    END { b = ""; for (v in t) if (b == "" || t[v] < t[b]) b = v; print b }' "$OUT/ab.txt")
  echo "checks on $best"
  export MEGAJIT_TEMPLATE_DIR=$best
  checks 150 ;;
7)
  card
  rows warm7 qwen3-235b mxfp4-a16 1,64,256 build/bin/megajit-old $M build/bin/megajit-old $M
  rows warm7 deepseek-v3 mxfp4-a16 64,256 build/bin/megajit-old $M build/bin/megajit-old $M
  for f in mxfp4-a16 nvfp4; do
    rows p3 gpt-oss-120b $f 1,64,256 build/tv/head2 build/tv/P3 build/tv/P3 build/tv/head2
  done ;;
esac
