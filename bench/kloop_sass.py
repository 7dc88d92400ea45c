#!/usr/bin/env python3
"""SASS instructions of the MegaMoE K loops, per stage, on a machine without a GPU.

Compiles a manifest's MegaMoE kernels into a scratch cache with `megajit
precompile` (NVRTC, sm_90a), disassembles each main kernel with nvdisasm
(`megajit cache show --sass`), finds its innermost loops that issue wgmma (the
K loops: one iteration = one pipeline stage) and counts their instructions by
opcode. A math thread handles stage_k weights a stage (two 64-row blocks x
stage_k / 128 threads), so instructions / stage_k is the loop's issue cost per
weight, which bounds the loop where it is issue-bound (the E2M1 decode's
ablations, bench/RESULTS.md, twenty-second session).

    python3 bench/kloop_sass.py [--templates DIR] [--manifest FILE] [--json]

--templates sets MEGAJIT_TEMPLATE_DIR (a variant of templates/). nvdisasm: as
bench/nvdisasm_env.py says.
"""
import argparse, collections, json, os, re, subprocess, tempfile

from nvdisasm_env import nvdisasm_env

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# DeepSeek-V3 on one rank, every format row, every BLOCK_M up to 4096 tokens.
ROWS = (("mxfp4", "mxfp8"), ("mxfp4", "bf16"), ("mxfp8", "mxfp8"), ("nvfp4", "nvfp4"),
        ("nvfp4", "bf16"), ("bf16", "bf16"))
FMT = {0: "bf16", 1: "mxfp8", 2: "mxfp4", 3: "nvfp4"}
ROW_NAMES = {("mxfp4", "mxfp8"): "mxfp4-a8", ("mxfp4", "bf16"): "mxfp4-a16",
             ("mxfp8", "mxfp8"): "mxfp8", ("nvfp4", "nvfp4"): "nvfp4",
             ("nvfp4", "bf16"): "nvfp4-a16", ("bf16", "bf16"): "bf16"}


def default_manifest():
    layer = dict(hidden=7168, intermediate=2048, experts=256, topk=8, ranks=1,
                 max_tokens_per_rank=4096, activation="swiglu", num_sms=132)
    return {"archs": ["sm_90a"],
            "layers": [dict(layer, name="%s-%s" % r, weight_format=r[0], dispatch_format=r[1])
                       for r in ROWS]}


def instructions(lines):
    for line in lines:
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*)", line)
        if m:
            words = m.group(1).split()
            yield words[1] if words[0].startswith("@") else words[0]


def k_loops(sass):
    """(first line, last line, opcode counts) of each innermost loop that issues
    wgmma and stores nothing to global memory (a task loop into which ptxas
    peeled a stage holds the epilogue's stores)."""
    lines = sass.split("\n")
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"^(\.L_x_\d+):", line.strip())
        if m:
            labels[m.group(1)] = i
    loops = []
    for i, line in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if m and labels.get(m.group(1), i) < i:
            ops = collections.Counter(op.split(".")[0] for op in instructions(lines[labels[m.group(1)]:i + 1]))
            if any("GMMA" in op for op in ops) and not ops["STG"]:
                loops.append((labels[m.group(1)], i, ops))
    return [x for x in loops
            if not any(y is not x and x[0] <= y[0] and y[1] <= x[1] for y in loops)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--templates", help="template directory (MEGAJIT_TEMPLATE_DIR)")
    ap.add_argument("--manifest", help="manifest JSON (default: DeepSeek-V3, one rank, every row)")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/bin/megajit"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = ap.parse_args()
    env = nvdisasm_env("kloop_sass")
    if a.templates:
        env["MEGAJIT_TEMPLATE_DIR"] = os.path.abspath(a.templates)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = a.manifest
        if not manifest:
            manifest = os.path.join(tmp, "manifest.json")
            json.dump(default_manifest(), open(manifest, "w"))
        cache = os.path.join(tmp, "cache")
        run = lambda *args: subprocess.run([a.cli, *args, "--cache", cache], env=env, check=True,
                                           capture_output=True, text=True).stdout
        run("precompile", "--manifest", manifest, "--json")
        rows = []
        for e in json.loads(run("cache", "ls", "--json")):
            m = re.match(r"mj::mega_moe_kernel<(.*)>", e["kernel_name"])
            if not m:
                continue
            p = [x.strip() for x in m.group(1).split(",")]
            # runtime/families/mega_moe.h's order: the activation's two constants
            # follow the clamp (index 10), the fold and biases come last
            w, d, bm, stage_k = FMT[int(p[6])], FMT[int(p[7])], int(p[13]), int(p[14])
            fold = int(p[18])
            loops = k_loops(run("cache", "show", e["key"][:12], "--sass"))
            rows.append({"row": ROW_NAMES.get((w, d), w + "/" + d), "block_m": bm, "fold": fold,
                         "stage_k": stage_k, "kernel": e["kernel_name"],
                         "loops": [{"instructions": sum(ops.values()),
                                    "per_weight": sum(ops.values()) / stage_k,
                                    "opcodes": dict(ops.most_common())} for _, _, ops in loops]})
    rows.sort(key=lambda r: (r["row"], r["fold"], r["block_m"]))
    if a.json:
        print(json.dumps({"templates": a.templates or "embedded", "kernels": rows}, indent=1))
        return
    print("%-10s %4s %4s %7s  %-22s %s" % ("ROW", "BM", "FOLD", "STAGE_K", "INSTR/STAGE (/WEIGHT)",
                                          "TOP OPCODES OF THE FIRST LOOP"))
    for r in rows:
        loops = ", ".join("%d (%.2f)" % (l["instructions"], l["per_weight"]) for l in r["loops"])
        top = " ".join("%s:%d" % kv for kv in list(r["loops"][0]["opcodes"].items())[:8]) \
            if r["loops"] else ""
        print("%-10s %4d %4d %7d  %-22s %s" % (r["row"], r["block_m"], r["fold"], r["stage_k"],
                                              loops, top))


if __name__ == "__main__":
    main()
