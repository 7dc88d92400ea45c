#!/usr/bin/env python3
"""Which kernels of a manifest compile to different SASS in two megajit builds.

Both CLIs precompile the manifest (NVRTC, sm_90a, each with the templates it
embeds) into scratch caches; every kernel's SASS (`megajit cache show --sass`,
nvdisasm) is normalized (symbol names, which carry the template arguments,
and addresses dropped; the two sources of a plain FMUL or FADD sorted, since
ptxas may order a commutative product's operands either way) and hashed. A kernel of the new build whose SASS some
kernel of the base build has is "same"; any other is listed with its
instruction count beside the base kernel whose template arguments are nearest.
No pairing by template arguments is needed, so a change that adds a template
parameter can be checked to leave the existing configurations' code alone.

NVRTC is not always deterministic: the same build compiling the same
52-kernel manifest twice gave one kernel (nvfp4-a16, BLOCK_M 64) with two of
its shared-memory loads in the other order in 2 of 5 such pairs (thirteenth
session; with or without PCH, with one or two workers it came out the same in
every smaller run). Run a DIFF again before reading anything into it.

    python3 bench/sass_diff.py --base OLD/build/bin/megajit --new build/bin/megajit \\
        --manifest FILE [--json]

nvdisasm: as bench/nvdisasm_env.py says.
"""
import argparse, difflib, hashlib, json, os, re, subprocess, sys, tempfile

from nvdisasm_env import nvdisasm_env


def commuted(ins):
    """A plain two-source FMUL / FADD with its sources in sorted order."""
    m = re.match(r"(FMUL|FADD)(\.\w+)* (\S+), (\S+), (\S+)$", ins)
    if not m:
        return ins
    a, b = sorted((m.group(4), m.group(5)))
    return "%s %s, %s, %s" % (ins.split(" ")[0], m.group(3), a, b)


def sass_lines(text):
    """The instructions, without addresses, encodings and symbol names."""
    out = []
    for line in text.split("\n"):
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*?)\s*;?\s*(/\*.*\*/)?\s*$", line)
        if m:
            out.append(commuted(re.sub(r"_Z\w+", "SYM", m.group(1))))
    return out


def kernels(cli, manifest, env, tmp, tag):
    cache = os.path.join(tmp, "cache-" + tag)
    run = lambda *args: subprocess.run([cli, *args, "--cache", cache], env=env, check=True,
                                       capture_output=True, text=True).stdout
    run("precompile", "--manifest", manifest, "--json")
    out = []
    for e in json.loads(run("cache", "ls", "--json")):
        lines = sass_lines(run("cache", "show", e["key"][:12], "--sass"))
        digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        out.append({"kernel": e["kernel_name"], "instructions": len(lines), "sha": digest,
                    "lines": lines})
    return out


def args_of(name):
    m = re.match(r"[\w:]+<(.*)>", name)
    return [x.strip() for x in m.group(1).split(",")] if m else []


def nearest(k, pool):
    """The base kernel of the same template whose arguments share the most values in order."""
    sym = k["kernel"].split("<")[0]
    mine = args_of(k["kernel"])
    best, score = None, -1
    for b in pool:
        if b["kernel"].split("<")[0] != sym:
            continue
        theirs = args_of(b["kernel"])
        s = sum(1 for x in mine if x in theirs)  # crude, and enough for a hint
        if s > score:
            best, score = b, s
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the base build's megajit CLI")
    ap.add_argument("--new", required=True, help="the new build's megajit CLI")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    env = nvdisasm_env("sass_diff")
    with tempfile.TemporaryDirectory() as tmp:
        base = kernels(a.base, a.manifest, env, tmp, "base")
        new = kernels(a.new, a.manifest, env, tmp, "new")
    known = {b["sha"] for b in base}
    rows = []
    for k in new:
        same = k["sha"] in known
        near = None if same else nearest(k, base)
        diff = [] if not near else list(difflib.unified_diff(near["lines"], k["lines"],
                                                              lineterm="", n=0))[2:14]
        rows.append({"kernel": k["kernel"], "instructions": k["instructions"], "same": same,
                     "base": near and near["kernel"],
                     "base_instructions": near and near["instructions"], "diff_head": diff})
    if a.json:
        print(json.dumps({"base": len(base), "new": len(new), "kernels": rows}, indent=1))
    else:
        for r in rows:
            print("%-5s %6d  %s" % ("same" if r["same"] else "DIFF", r["instructions"], r["kernel"]))
            if not r["same"] and r["base"]:
                print("      %6d  nearest base: %s" % (r["base_instructions"], r["base"]))
                for line in r["diff_head"]:
                    print("              " + line)
        print("%d of %d kernels compile to SASS the base build has" %
              (sum(r["same"] for r in rows), len(rows)))
    sys.exit(0 if all(r["same"] for r in rows) else 1)


if __name__ == "__main__":
    main()
