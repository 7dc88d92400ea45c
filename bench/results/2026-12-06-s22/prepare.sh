#!/usr/bin/env bash
# The twenty-second session's variants, on 6fb8337's templates (a checkout
# of 6fb8337: RD is in the templates from 79dc96b on), after
# `make -j2 all test-gpu` and bench/results/2026-12-05-s21/next/prepare.sh
# (base, ND, NM, MB): NX (ND's and NM's patches together), IL, PW, RD, SC
# (command.sh says what each is) and the S12 CLI in build/vcli.
set -eu
here=bench/results/2026-12-06-s22
s21=bench/results/2026-12-05-s21/next
variant() { # variant NAME PATCH:STRIP...: templates/ with the patches applied
  local name=$1 p
  shift
  rm -rf build/tv/$name
  cp -r templates build/tv/$name
  for p in "$@"; do
    patch -s -p${p#*:} -d build/tv/$name < ${p%:*}
  done
}
variant NX $s21/ND.patch:2 $s21/NM.patch:2
variant IL $here/IL.patch:1 # the weight image stage-major
variant PW $here/PW.patch:1 # a GEMM 2 task whose tile is not ready asks L2 for its stages
variant RD $here/RD.patch:2 # the BF16 kind's E2M1 words decoded in 9 instructions
variant SC $here/SC.patch:1 # the bulk-read ceiling, each CTA streaming one range
# S12: the CLI with the heuristics' MAX_STAGES 12 (a worktree of HEAD).
rm -rf /tmp/wt-s12 build/vcli/S12
git worktree add -f /tmp/wt-s12 HEAD -q
sed -i 's/#define MAX_STAGES 8/#define MAX_STAGES 12/' /tmp/wt-s12/heuristics/mega_moe_config.c
make -C /tmp/wt-s12 -j2 all > /dev/null
mkdir -p build/vcli/S12
cp -r /tmp/wt-s12/build/bin /tmp/wt-s12/build/lib build/vcli/S12/
git worktree remove --force /tmp/wt-s12
