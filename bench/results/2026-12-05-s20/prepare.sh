#!/usr/bin/env bash
# The variants of command.sh, from the repository root after `make -j2 all
# test-gpu`: build/tv/base is templates/ as it stands, build/tv/V is base
# with bench/results/2026-12-05-s20/V.patch applied (V = S4, F2, MB, C40, CB). Each
# patch was made against dbceaf6's templates.
set -eu
here=bench/results/2026-12-05-s20
rm -rf build/tv
mkdir -p build/tv
cp -r templates build/tv/base
for v in S4 F2 MB C40 CB; do
  cp -r templates build/tv/$v
  patch -s -p1 -d build/tv/$v < $here/$v.patch
done
echo "build/tv: $(ls build/tv | tr '\n' ' ')"
