#!/usr/bin/env python3
"""Looks for a VIMNMX that writes a predicate in the SASS of MegaMoE kernels.

ptxas (CUDA 13.0) folded a clamp and a compare of its result ("own_blocks ==
2", own_blocks = max(min(left, 2), 0)) into one VIMNMX.RELU with a predicate
output and branched on that predicate; on the GPU it came out false for
left = 4, and a warpgroup skipped its row scales (bench/RESULTS.md, eighteenth
session). The kernels now branch on comparisons that need no clamp, and this
script checks that no kernel grew such a predicate again: it prints each
VIMNMX (or IMNMX) whose second operand is a predicate register and exits 1.

Kernels come from `megajit precompile` of the presets (or --manifest files)
into a scratch cache, or from an existing cache (--cache, as the GPU test
leaves it in MEGAJIT_CACHE_DIR); `megajit cache show --sass` disassembles
them, with nvdisasm as bench/nvdisasm_env.py says.

    python3 bench/sass_guard.py [--preset NAME ...] [--manifest FILE ...]
                                [--cache DIR] [--cli build/bin/megajit]
"""
import argparse, concurrent.futures, os, re, sys, tempfile

from nvdisasm_env import nvdisasm_env
from precompiled import main_kernels, megajit, precompile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PRESETS = ("deepseek-v3-ep8", "kimi-k2-ep8", "qwen3-235b-ep4", "gpt-oss-120b-ep1",
           "gpt-oss-20b-ep1", "glm-4.5-ep8", "minimax-m2-ep8")
# A min/max with a predicate destination: "VIMNMX.RELU R102, P2, P2, R101, 0x2, PT".
PREDICATED_MINMAX = re.compile(r"\b(V?IMNMX\S*)\s+R\d+,\s*(P[0-6]),")


def findings(cli, cache, env):
    entries = main_kernels(cli, cache, env)

    def scan(e):
        return [(e["kernel_name"], line.strip())
                for line in megajit(cli, cache, env, "cache", "show", e["key"][:12],
                                    "--sass").split("\n")
                if PREDICATED_MINMAX.search(line)]

    # One nvdisasm a kernel, a GPU test's cache holds a hundred or more.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        bad = [x for found in pool.map(scan, entries) for x in found]
    return len(entries), bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", action="append", help="a preset (default: all seven)")
    ap.add_argument("--manifest", action="append", default=[], help="a manifest JSON")
    ap.add_argument("--cache", help="scan this cache as it is instead of precompiling")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/bin/megajit"))
    a = ap.parse_args()
    env = nvdisasm_env("sass_guard")
    with tempfile.TemporaryDirectory() as tmp:
        cache = a.cache or os.path.join(tmp, "cache")
        if not a.cache:
            sources = [("--preset", p) for p in (a.preset or ([] if a.manifest else PRESETS))]
            sources += [("--manifest", m) for m in a.manifest]
            precompile(a.cli, cache, env, sources)
        kernels, bad = findings(a.cli, cache, env)
    for name, line in bad:
        print("%s: %s" % (name, line))
    print("sass_guard: %d MegaMoE kernels, %d predicated min/max" % (kernels, len(bad)))
    sys.exit(1 if bad or kernels == 0 else 0)


if __name__ == "__main__":
    main()
