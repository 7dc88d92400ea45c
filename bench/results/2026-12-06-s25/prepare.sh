#!/usr/bin/env bash
# The twenty-fifth session's variant CLIs, from the repo root at 8d119f7
# (before applying nv160.patch): build/vcli/head, k16 and k16w (command.sh,
# N = 1, 2). For N = 3 and 4: `bash prepare.sh k` builds build/vcli/k, the
# CLI of 0acea34 (mxfp4-a8 on the BF16 path, the E4M3 code still there).
# For N = 6: `bash prepare.sh tv` (build/tv/N144: the templates with
# N144.patch; its tools/gen_wgmma.py hunk made the new wgmma_ops.cuh).
set -eu
. bench/results/variants.sh
case ${1:-} in
tv) templates_with N144 bench/results/2026-12-06-s25/N144.patch; exit 0 ;;
k) cli_at k 0acea34; exit 0 ;;
esac
a8_on_bf16() { # a8_on_bf16 DIR [CAP]: the mxfp4-a8 row on the BF16 kind, its tiles capped at CAP
  python3 - "$1" "${2:-128}" << 'PY'
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
}
a8_wide() { a8_on_bf16 "$1" 160; }
cli_at head HEAD
cli_at k16 HEAD a8_on_bf16
cli_at k16w HEAD a8_wide
