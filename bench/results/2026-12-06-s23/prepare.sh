#!/usr/bin/env bash
# The twenty-third session's baseline CLIs, each built in a worktree into
# build/vcli/NAME, after `make -j2 all test-gpu`: base = 04a1bc5 (the
# twenty-second session's tree), ef = 1333922 (the fused GEMM 1 epilogue);
# then the template variants SC, RC, MB and NS in build/tv.
set -eu
cli() { # cli NAME COMMIT
  rm -rf /tmp/wt-$1 build/vcli/$1
  git worktree add -f /tmp/wt-$1 $2 -q
  make -C /tmp/wt-$1 -j2 all > /dev/null
  mkdir -p build/vcli/$1
  cp -r /tmp/wt-$1/build/bin /tmp/wt-$1/build/lib build/vcli/$1/
  git worktree remove --force /tmp/wt-$1
}
cli base 04a1bc5
cli ef 1333922
variant() { # variant NAME PATCH:STRIP: this tree's templates with the patch applied
  rm -rf build/tv/$1
  mkdir -p build/tv
  cp -r templates build/tv/$1
  patch -s -p${2#*:} -d build/tv/$1 < ${2%:*}
}
# SC: the twenty-second session's read-ceiling probe (each CTA one range).
variant SC bench/results/2026-12-06-s22/SC.patch:1
# RC: every math thread arrives on the task mailbox's empty barrier; MB (the
# twentieth session's): lane 0 reads the task and shuffles it to its warp.
variant RC bench/results/2026-12-06-s23/RC.patch:2
variant MB bench/results/2026-12-05-s20/MB.patch:1
# NS: no 40-column loop beside a shared expert's own loop on the FP8 kind
# either (Kimi-K2's slowest first compile 3.14-3.20 -> 2.81-2.90 s here).
variant NS bench/results/2026-12-06-s23/NS.patch:1
