#!/usr/bin/env bash
# The next session's variants (prepared in the twenty-first, none run), from
# the repository root after `make -j2 all test-gpu`:
#   base  templates/ as they stand (a7fb11c's and later)
#   ND    probe, wrong results: the BF16 kind's K loop without the weight
#         decode (one LOP a fragment register instead of 15 instructions a word)
#   NM    probe, wrong results: the same K loop decoding but issuing no wgmma
#   MB    the twentieth session's mailbox read by lane 0 (racecheck's 14
#         reports name that read; 4 shared-expert kernels spill with it)
set -eu
here=bench/results/2026-12-05-s21/next
rm -rf build/tv
mkdir -p build/tv
cp -r templates build/tv/base
for v in ND NM; do
  cp -r templates build/tv/$v
  patch -s -p2 -d build/tv/$v < $here/$v.patch
done
cp -r templates build/tv/MB
patch -s -p1 -d build/tv/MB < bench/results/2026-12-05-s20/MB.patch
echo "build/tv: $(ls build/tv | tr '\n' ' ')"
