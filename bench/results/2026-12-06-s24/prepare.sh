#!/usr/bin/env bash
# The twenty-fourth session's variants, after `make -j2 all test-gpu`:
# build/vcli/ef = 1333922's CLI (the baseline), and build/tv/NAME = this
# tree's templates with a patch (SM: the tree before bm160.patch, made
# before applying it).
set -eu
rm -rf /tmp/wt-ef build/vcli/ef
git worktree add -f /tmp/wt-ef 1333922 -q
make -C /tmp/wt-ef -j2 all > /dev/null
mkdir -p build/vcli/ef
cp -r /tmp/wt-ef/build/bin /tmp/wt-ef/build/lib build/vcli/ef/
git worktree remove --force /tmp/wt-ef
variant() { # variant NAME PATCH:STRIP
  rm -rf build/tv/$1
  mkdir -p build/tv
  cp -r templates build/tv/$1
  patch -s -p${2#*:} -d build/tv/$1 < ${2%:*}
  find build/tv/$1 -name '*.orig' -delete
}
variant SC bench/results/2026-12-06-s22/SC.patch:1
variant RC bench/results/2026-12-06-s23/RC.patch:2
variant MB bench/results/2026-12-05-s20/MB.patch:1
variant NS bench/results/2026-12-06-s23/NS.patch:1
