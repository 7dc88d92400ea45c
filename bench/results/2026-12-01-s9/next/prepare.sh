#!/usr/bin/env bash
# On the CPU machine, from the repository root of branch s9-compact-ring
# after `make -j2 all test-gpu`: builds main and f51958b (the NVFP4
# half-width loop alone) beside the branch, as build/alt/main and
# build/alt/nvh (each its own library and CLI).
set -eu
rm -rf build/alt && mkdir -p build/alt
for v in main:main nvh:f51958b; do
    name=${v%%:*} ref=${v#*:}
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$ref"
    make -C "$wt" -j2 all >/dev/null
    mkdir -p "build/alt/$name" && cp -r "$wt/build/bin" "$wt/build/lib" "build/alt/$name/"
    git worktree remove --force "$wt"
done
echo "built: build/alt/main build/alt/nvh"
