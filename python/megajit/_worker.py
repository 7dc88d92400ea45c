"""A precompile worker (python -m megajit._worker), started by megajit.precompile.

stdin: one JSON line {"manifest": text | "preset": name, "archs": str | null,
"cache_dir": str}, then one kernel index per line; stdout: one JSON line per
index {"index", "result", "seconds", "error"}. Exits at the end of stdin. NVRTC
compiles one at a time inside a process, hence processes. MEGAJIT_WORKER_NVRTC
names the NVRTC the parent uses (the cache key holds its version).
"""

import ctypes
import json
import os
import sys


def main():
    nvrtc = os.environ.get("MEGAJIT_WORKER_NVRTC")
    if nvrtc:  # the parent's NVRTC: megajit's dlopen("libnvrtc.so.13") then finds it
        ctypes.CDLL(nvrtc)
    from .precompile import Manifest, build_one
    from .runtime import Runtime

    spec = json.loads(sys.stdin.readline())
    if spec.get("preset") is not None:
        manifest = Manifest.preset(spec["preset"])
    else:
        manifest = Manifest.parse(spec["manifest"])
    if spec.get("archs"):
        manifest.set_archs(spec["archs"])
    with Runtime(cache_dir=spec["cache_dir"]) as rt:
        for line in sys.stdin:
            i = int(line)
            result, seconds, error = build_one(rt, manifest, i)
            msg = {"index": i, "result": result, "seconds": seconds, "error": error}
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()
    manifest.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
