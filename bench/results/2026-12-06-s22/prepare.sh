#!/usr/bin/env bash
# The twenty-second session's variants, on 6fb8337's templates, after
# `make -j2 all test-gpu` and bench/results/2026-12-05-s21/next/prepare.sh
# (base, ND, NM, MB): NX (ND's and NM's patches together), IL, PW, RD, SC
# (command.sh says what each is) and the S12 CLI in build/vcli.
set -eu
here=bench/results/2026-12-05-s21/next
rm -rf build/tv/NX
cp -r templates build/tv/NX
patch -s -p2 -d build/tv/NX < $here/ND.patch
patch -s -p2 -d build/tv/NX < $here/NM.patch
# IL: the weight image stage-major (every task's stage s side by side).
rm -rf build/tv/IL
cp -r templates build/tv/IL
patch -s -p1 -d build/tv/IL < bench/results/2026-12-06-s22/IL.patch
# PW: a GEMM 2 task whose token tile is not ready asks L2 for its later stages.
rm -rf build/tv/PW
cp -r templates build/tv/PW
patch -s -p1 -d build/tv/PW < bench/results/2026-12-06-s22/PW.patch
# RD: the BF16 kind's E2M1 words decoded by rotations.
rm -rf build/tv/RD
cp -r templates build/tv/RD
patch -s -p2 -d build/tv/RD < bench/results/2026-12-06-s22/RD.patch
# SC: the bulk-read ceiling kernel, each CTA streaming one contiguous range.
rm -rf build/tv/SC
cp -r templates build/tv/SC
patch -s -p1 -d build/tv/SC < bench/results/2026-12-06-s22/SC.patch
# S12: the CLI with the heuristics' MAX_STAGES 12 (a worktree of HEAD).
rm -rf /tmp/wt-s12 build/vcli/S12
git worktree add -f /tmp/wt-s12 HEAD -q
sed -i 's/#define MAX_STAGES 8/#define MAX_STAGES 12/' /tmp/wt-s12/heuristics/mega_moe_config.c
make -C /tmp/wt-s12 -j2 all > /dev/null
mkdir -p build/vcli/S12
cp -r /tmp/wt-s12/build/bin /tmp/wt-s12/build/lib build/vcli/S12/
git worktree remove --force /tmp/wt-s12
