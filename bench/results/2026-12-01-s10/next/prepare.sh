#!/usr/bin/env bash
# On the CPU machine, from the repository root of branch s10-epi-act after
# `make -j2 all test-gpu`: builds main, s10-one-loop and s10-nvfp4-pull beside
# it, as build/alt/main, build/alt/loop and build/alt/pull (each its own
# library and CLI).
set -eu
rm -rf build/alt && mkdir -p build/alt
for v in main:main loop:s10-one-loop pull:s10-nvfp4-pull; do
    name=${v%%:*} ref=${v#*:}
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$ref"
    make -C "$wt" -j2 all >/dev/null
    mkdir -p "build/alt/$name" && cp -r "$wt/build/bin" "$wt/build/lib" "build/alt/$name/"
    git worktree remove --force "$wt"
done
echo "built: build/alt/main build/alt/loop build/alt/pull"
