"""The environment under which `megajit cache show --sass` finds nvdisasm, for the
SASS scripts of bench/ (kloop_sass.py, sass_diff.py).

nvdisasm comes from $NVDISASM, PATH or $CUDA_HOME/bin. A CUDA toolkit without
it can borrow Triton's: pip download --no-deps triton, then unzip its
triton/backends/nvidia/bin/nvdisasm.
"""
import os, shutil, sys


def nvdisasm_env(tool):
    """os.environ with nvdisasm's folder first on PATH; exits naming `tool` when none is found."""
    env = dict(os.environ)
    nvdisasm = env.get("NVDISASM") or shutil.which("nvdisasm") or os.path.join(
        env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvdisasm")
    if not os.path.exists(nvdisasm):
        sys.exit("%s: no nvdisasm (set NVDISASM; bench/nvdisasm_env.py says where to get one)" % tool)
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    return env
