#!/usr/bin/env bash
# The twenty-fifth session's variant CLIs, from the repo root at 8d119f7
# (before applying nv160.patch): build/vcli/head, k16 and k16w (command.sh,
# N = 1, 2). For N = 3 and 4: `bash prepare.sh k` builds build/vcli/k, the
# CLI of 0acea34 (mxfp4-a8 on the BF16 path, the E4M3 code still there).
# For N = 6: `bash prepare.sh tv` (build/tv/N144).
set -eu
if [ "${1:-}" = tv ]; then # build/tv/N144: this tree's templates with N144.patch
  rm -rf build/tv/N144
  mkdir -p build/tv
  cp -r templates build/tv/N144
  # The patch's templates/ part (its tools/gen_wgmma.py hunk made the new
  # wgmma_ops.cuh).
  python3 -c 'import re, sys; print("".join(p for p in re.split(r"(?=^diff --git )", sys.stdin.read(), flags=re.M) if p.startswith("diff --git a/templates/")), end="")' \
    < bench/results/2026-12-06-s25/N144.patch | patch -s -p2 -d build/tv/N144
  find build/tv/N144 -name '*.orig' -delete
  exit 0
fi
if [ "${1:-}" = k ]; then
  rm -rf /tmp/wt-k build/vcli/k
  git worktree add -f /tmp/wt-k 0acea34 -q
  make -C /tmp/wt-k -j2 all > /dev/null
  mkdir -p build/vcli/k
  cp -r /tmp/wt-k/build/bin /tmp/wt-k/build/lib build/vcli/k/
  git worktree remove --force /tmp/wt-k
  exit 0
fi
rm -rf build/vcli/head build/vcli/k16 build/vcli/k16w
make -j2 all > /dev/null
mkdir -p build/vcli/head
cp -r build/bin build/lib build/vcli/head/
variant() { # variant NAME CAP: the mxfp4-a8 row on the BF16 kind, its tiles capped at CAP
  rm -rf /tmp/wt-$1
  git worktree add -f /tmp/wt-$1 HEAD -q
  python3 - /tmp/wt-$1 $2 << 'PY'
import sys
root, cap = sys.argv[1], sys.argv[2]
def edit(path, old, new):
    s = open(f"{root}/{path}").read()
    assert old in s, path
    open(f"{root}/{path}", "w").write(s.replace(old, new))
edit("templates/layout/moe_layout.h",
     """    return dispatch_fmt == MJ_FMT_MXFP8 && weight_fmt != MJ_FMT_MXFP8 ? MJ_MOE_KIND_FP8
                                                                      : MJ_MOE_KIND_BF16;""",
     "    (void)weight_fmt;\n    (void)dispatch_fmt;\n    return MJ_MOE_KIND_BF16;")
edit("heuristics/moe_formats.c", 'MJ_MOE_KIND_FP8, "mxfp4-a8"', 'MJ_MOE_KIND_BF16, "mxfp4-a8"')
if cap == "160":
    edit("heuristics/mega_moe_config.c",
         "return e2m1 && fmt->dispatch_fmt == MJ_FMT_BF16 ? MJ_MOE_MAX_BLOCK_M : 128;",
         "return e2m1 && fmt->dispatch_fmt != MJ_FMT_NVFP4 ? MJ_MOE_MAX_BLOCK_M : 128;")
PY
  make -C /tmp/wt-$1 -j2 all > /dev/null
  mkdir -p build/vcli/$1
  cp -r /tmp/wt-$1/build/bin /tmp/wt-$1/build/lib build/vcli/$1/
  git worktree remove --force /tmp/wt-$1
}
variant k16 128
variant k16w 160
