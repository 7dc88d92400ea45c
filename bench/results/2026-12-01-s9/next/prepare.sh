#!/usr/bin/env bash
# On the CPU machine, from the repository root of branch s9-w4-bm128 after
# `make -j2 all test-gpu`: builds main, s9-nvfp4-half (the NVFP4 half-width
# loop alone) and s9-compact-ring (that plus the unpadded ring) beside it, as
# build/alt/main, build/alt/nvh and build/alt/ring (each its own library and
# CLI).
set -eu
rm -rf build/alt && mkdir -p build/alt
for v in main:main nvh:s9-nvfp4-half ring:s9-compact-ring; do
    name=${v%%:*} ref=${v#*:}
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$ref"
    make -C "$wt" -j2 all >/dev/null
    mkdir -p "build/alt/$name" && cp -r "$wt/build/bin" "$wt/build/lib" "build/alt/$name/"
    git worktree remove --force "$wt"
done
echo "built: build/alt/main build/alt/nvh build/alt/ring"
