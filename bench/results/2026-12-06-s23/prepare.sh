#!/usr/bin/env bash
# The twenty-third session's baseline CLIs, each built in a worktree into
# build/vcli/NAME, after `make -j2 all test-gpu`: base = 04a1bc5 (the
# twenty-second session's tree), ef = 1333922 (the fused GEMM 1 epilogue).
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
# SC: this tree's templates with the twenty-second session's read-ceiling probe.
rm -rf build/tv/SC
mkdir -p build/tv
cp -r templates build/tv/SC
patch -s -p1 -d build/tv/SC < bench/results/2026-12-06-s22/SC.patch
