#!/usr/bin/env bash
# Builds what call3 compares, on the CPU machine, from the repository root of
# branch s9-tiles-quads (after `make -j2 all test-gpu`): build/alt/base = main
# (its own library and CLI), build/tv/noswz (make_variants.py).
set -eu
wt=$(mktemp -d)
git worktree add -q --detach "$wt" main
make -C "$wt" -j2 all >/dev/null
rm -rf build/alt && mkdir -p build/alt/base
cp -r "$wt/build/bin" "$wt/build/lib" build/alt/base/
git worktree remove --force "$wt"
rm -rf build/tv
python3 bench/results/2026-12-01-s9/call3/make_variants.py
