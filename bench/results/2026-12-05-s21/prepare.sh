#!/usr/bin/env bash
# The variants of command.sh, from the repository root after `make -j2 all
# test-gpu`: build/tv/base is templates/ as it stands; PF4 asks L2 for each
# task's weight stages four ahead of their bulk copy (PF4.patch);
# S4, F2, C40 and CB are the twentieth session's (bench/results/2026-12-05-s20).
# Calls 3-7 used two more, made by hand: new = the templates of c9c8656
# (base with F2, CB and C40), TV = new with TV.patch (a7fb11c's templates):
#   git archive c9c8656 templates | tar -x -C /tmp/new && cp -r /tmp/new/templates build/tv/new
#   cp -r build/tv/new build/tv/TV && patch -p2 -d build/tv/TV < bench/results/2026-12-05-s21/TV.patch
set -eu
here=bench/results/2026-12-05-s21
s20=bench/results/2026-12-05-s20
rm -rf build/tv
mkdir -p build/tv
cp -r templates build/tv/base
cp -r templates build/tv/PF4
patch -s -p2 -d build/tv/PF4 < $here/PF4.patch
for v in S4 F2 C40 CB; do
  cp -r templates build/tv/$v
  patch -s -p1 -d build/tv/$v < $s20/$v.patch
done
echo "build/tv: $(ls build/tv | tr '\n' ' ')"
