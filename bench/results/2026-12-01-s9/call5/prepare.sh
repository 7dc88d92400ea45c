#!/usr/bin/env bash
# Builds what call5 compares, on the CPU machine, from the repository root of
# branch s9-half-n (after `make -j2 all test-gpu`): build/alt/s9 = branch
# s9-tiles-quads at 7f51eee (its own library and CLI).
set -eu
wt=$(mktemp -d)
git worktree add -q --detach "$wt" 7f51eee
make -C "$wt" -j2 all >/dev/null
rm -rf build/alt && mkdir -p build/alt/s9
cp -r "$wt/build/bin" "$wt/build/lib" build/alt/s9/
git worktree remove --force "$wt"
