#!/usr/bin/env python3
"""ptxas's resource report for every MegaMoE main kernel of a manifest, on a machine
without a GPU: spills, stack frames and serialized wgmma (C75xx).

The kernels are those `megajit precompile` builds for the manifest (their names and
NVRTC flags read back from a scratch cache); each is compiled again with NVRTC from
the template directory and `--ptxas-options=-v`. tests/test_mega_moe_build.c holds
the presets and a few layers to this in CI; this covers what it does not, such as the
layers `megajit bench mega-moe` runs (--bench-shapes).

    python3 bench/ptxas_report.py [--bench-shapes | --preset NAME | --manifest FILE]
                                  [--templates DIR] [--cli CLI] [--jobs N] [--json]

Exit status 1 when a main kernel spills, has a stack frame or a serialized wgmma.
"""
import argparse, ctypes, json, multiprocessing, os, re, sys, tempfile

from precompiled import main_kernels, precompile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
# megajit bench mega-moe --shape all: four shapes, six rows, one rank, 4096 tokens.
SHAPES = {"deepseek-v3": (7168, 2048, 256, 8), "kimi-k2": (7168, 2048, 384, 8),
          "qwen3-235b": (4096, 1536, 128, 8), "gpt-oss-120b": (2880, 2880, 128, 4)}
ROWS = (("bf16", "bf16"), ("mxfp8", "mxfp8"), ("mxfp4", "mxfp8"), ("mxfp4", "bf16"),
        ("nvfp4", "nvfp4"), ("nvfp4", "bf16"))


def bench_manifest():
    layers = []
    for shape, (h, i, e, k) in SHAPES.items():
        for w, d in ROWS:
            layers.append(dict(name="%s-%s-%s" % (shape, w, d), hidden=h, intermediate=i,
                               experts=e, topk=k, ranks=1, max_tokens_per_rank=4096,
                               weight_format=w, dispatch_format=d, activation="swiglu"))
    return {"archs": ["sm_90a"], "layers": layers}


def kernels(args, scratch):
    """(name expression, NVRTC flags) of each MegaMoE main kernel of the manifest."""
    cache = os.path.join(scratch, "cache")
    source = ("--preset", args.preset) if args.preset else ("--manifest", args.manifest)
    if not args.preset and not args.manifest:
        source = ("--manifest", os.path.join(scratch, "manifest.json"))
        with open(source[1], "w") as f:
            json.dump(bench_manifest(), f)
    env = dict(os.environ, MEGAJIT_TEMPLATE_DIR=args.templates)
    precompile(args.cli, cache, env, [source])
    return sorted((e["kernel_name"], e["flags"].split())
                  for e in main_kernels(args.cli, cache, env))


def report(job):
    """ptxas's -v lines of one kernel compiled from `templates`."""
    templates, name, flags = job
    nvrtc = ctypes.CDLL(os.path.join(CUDA, "lib64", "libnvrtc.so"))
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), b'#include "mega_moe.cuh"\n', b"report.cu",
                                0, None, None):
        return name, "nvrtcCreateProgram failed"
    nvrtc.nvrtcAddNameExpression(prog, name.encode())
    opts = [f.encode() for f in flags] + [b"--ptxas-options=-v", ("-I" + templates).encode(),
                                          ("-I" + os.path.join(CUDA, "include")).encode()]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    text = log.value.decode(errors="replace")
    return name, text if rc == 0 else "compile failed (%d): %s" % (rc, text[-2000:])


def problems(log):
    """What is wrong with one kernel's report (empty: clean)."""
    if log.startswith("compile failed") or log.startswith("nvrtc"):
        return [log]
    found = re.findall(r"\(C75\d\d\)[^\n]*", log)
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                  log)
    if not m:
        return found + ["no resource report in the log"]
    frame, stores, loads = map(int, m.groups())
    if frame or stores or loads:
        found.append("%d bytes stack frame, %d bytes spill stores, %d bytes spill loads" %
                     (frame, stores, loads))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--bench-shapes", action="store_true",
                     help="the layers of `megajit bench mega-moe --shape all` (the default)")
    src.add_argument("--preset")
    src.add_argument("--manifest")
    ap.add_argument("--templates", default=os.path.join(ROOT, "templates"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "megajit"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.templates = os.path.abspath(args.templates)
    with tempfile.TemporaryDirectory() as scratch:
        found = kernels(args, scratch)
    with multiprocessing.Pool(args.jobs) as pool:
        logs = pool.map(report, [(args.templates, n, f) for n, f in found])
    results = [{"kernel": n, "problems": problems(log)} for n, log in logs]
    bad = [r for r in results if r["problems"]]
    if args.json:
        print(json.dumps({"kernels": len(results), "with_problems": len(bad),
                          "results": results}, indent=1))
    else:
        for r in bad:
            print("%s: %s" % (r["kernel"], "; ".join(r["problems"])))
        print("ptxas_report: %d MegaMoE main kernels, %d with a spill, stack frame or serialized "
              "wgmma" % (len(results), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
