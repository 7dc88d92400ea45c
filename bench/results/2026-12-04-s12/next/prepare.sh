#!/usr/bin/env bash
# Twelfth session (2026-12-04, no device lent): what the next session runs on
# the CPU machine before its device calls (from the repository root):
#   bash bench/results/2026-12-04-s12/next/prepare.sh
# Builds main (all + test-gpu); the CLI and library of 1bc72dc (the kernel this
# session started from) into build/alt/base, for A/B timings in one call; and
# the first-stage hold variants of main's templates into build/tv (make_variants.py).
# Then carry ["build/lib","build/bin","build/tests/gpu","build/bench","build/alt","build/tv"].
set -eu
cd "$(dirname "$0")/../../../.."
make -j2 all test-gpu
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" 2>/dev/null; rm -rf "$tmp"' EXIT
git worktree add -f "$tmp/base" 1bc72dc
make -C "$tmp/base" -j2 all
rm -rf build/alt/base && mkdir -p build/alt/base
cp -r "$tmp/base/build/bin" "$tmp/base/build/lib" build/alt/base/
python3 bench/results/2026-12-04-s12/next/make_variants.py
du -sh build/lib build/bin build/tests/gpu build/bench build/alt build/tv
