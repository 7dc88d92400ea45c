#!/usr/bin/env bash
# Builds what call2 compares, on the CPU machine, from the repository root of
# branch s8-swizzled-token-tiles: build/alt/base = main, build/alt/tiles = its
# first commit 66a5d0b (each its own library and CLI: their weight-image
# layouts differ, so templates alone cannot be swapped), build/tv/NAME = the
# branch's templates with one change (make_variants.py: pairs, quads, noswz,
# nofence).
set -eu
for v in base:main tiles:66a5d0b; do
    name=${v%%:*} ref=${v#*:}
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$ref"
    make -C "$wt" -j2 all >/dev/null
    rm -rf "build/alt/$name" && mkdir -p "build/alt/$name"
    cp -r "$wt/build/bin" "$wt/build/lib" "build/alt/$name/"
    git worktree remove --force "$wt"
done
python3 bench/results/2026-12-01-s8/call2/make_variants.py
echo "built: build/alt/base build/alt/tiles build/tv/{pairs,quads,noswz,nofence}"
