#!/usr/bin/env bash
# On the CPU machine, from the repository root of branch s10-nvfp4-pull after
# `make -j2 all test-gpu`: builds main and s10-one-loop beside it, as
# build/alt/main and build/alt/loop (each its own library and CLI).
set -eu
rm -rf build/alt && mkdir -p build/alt
for v in main:main loop:s10-one-loop; do
    name=${v%%:*} ref=${v#*:}
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$ref"
    make -C "$wt" -j2 all >/dev/null
    mkdir -p "build/alt/$name" && cp -r "$wt/build/bin" "$wt/build/lib" "build/alt/$name/"
    git worktree remove --force "$wt"
done
echo "built: build/alt/main build/alt/loop"
