"""Deployment manifests and offline precompile (mj_manifest_*), as
`megajit precompile` does it, with a progress callback per kernel."""

import ctypes
import dataclasses
import json
import os
import selectors
import subprocess
import sys
import time

from . import _capi, _lib
from ._args import c_int, c_str
from ._capi import BuildResult
from ._handle import Owner
from .cache import Cache
from .errors import check, make_error
from .runtime import Runtime


def presets():
    """Names of the embedded presets (mj_manifest_preset_names): "deepseek-v3-ep8", ..."""
    return _capi.strings(_lib.load().mj_manifest_preset_names())


class Manifest(Owner):
    """A parsed deployment manifest (docs/manifest.md): the kernels a deployment can
    request. Manifest.parse(text or dict) or Manifest.preset(name); errors raise
    InvalidArgument with the library's message naming the field
    ("manifest: layers[1].hidden: must be a multiple of 64 ...")."""

    _kind = "manifest"

    def __init__(self, raw_ptr, source):
        self._own(raw_ptr, _lib.load().mj_manifest_destroy)
        self._source = source  # what a precompile worker re-creates it from
        self._archs = None

    @classmethod
    def parse(cls, text):
        """A manifest from JSON text (str or bytes) or a dict / list of JSON values."""
        if isinstance(text, (dict, list)):
            text = json.dumps(text)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "surrogateescape")
        if not isinstance(text, str):
            raise TypeError(f"megajit: a manifest is JSON text or a dict, not {type(text).__name__}")
        out = ctypes.c_void_p()
        check(_lib.load().mj_manifest_parse(c_str(text.encode("utf-8", "surrogateescape"), "manifest"), ctypes.byref(out)))
        return cls(out.value, {"manifest": text})

    @classmethod
    def preset(cls, name):
        """An embedded preset by name (presets() lists them); NotFound when unknown."""
        out = ctypes.c_void_p()
        check(_lib.load().mj_manifest_preset(c_str(name, "preset"), ctypes.byref(out)))
        return cls(out.value, {"preset": name})

    @classmethod
    def load(cls, manifest_or_preset):
        """A Manifest from a Manifest (returned as is), a preset name, a path to a
        manifest file, JSON text, or a dict."""
        m = manifest_or_preset
        if isinstance(m, Manifest):
            return m
        if isinstance(m, (dict, list, bytes)):
            return cls.parse(m)
        if isinstance(m, str):
            if m.lstrip().startswith(("{", "[")):
                return cls.parse(m)
            if m in presets() or not os.path.exists(m):
                return cls.preset(m)  # NotFound names the presets
        elif not isinstance(m, os.PathLike):
            raise TypeError(f"megajit: expected a manifest, preset name or path, not {type(m).__name__}")
        with open(m, encoding="utf-8") as f:
            return cls.parse(f.read())

    def set_archs(self, archs):
        """Replaces the architecture list ("sm_90a,sm_100a" or a list of names)."""
        if not isinstance(archs, str):
            archs = ",".join(archs)
        check(_lib.load().mj_manifest_set_archs(self._handle(), c_str(archs, "archs")))
        self._archs = archs

    def __len__(self):
        return _lib.load().mj_manifest_kernel_count(self._handle())

    def describe(self, i):
        """Kernel i as "pre_dispatch.main<H=7168,fmt=mxfp8,K=8> sm_90a"."""
        i = c_int(i, "kernel index", 0, len(self) - 1)
        return _capi.text(_lib.load().mj_manifest_kernel_describe(self._handle(), i))

    @property
    def kernels(self):
        """Descriptions of every kernel, in build order."""
        return [self.describe(i) for i in range(len(self))]

    @property
    def archs(self):
        """The architectures the kernels are for, in order of appearance."""
        return list(dict.fromkeys(d.rsplit(" ", 1)[-1] for d in self.kernels))

    def build(self, runtime, i):
        """Ensures kernel i is in the runtime's cache (mj_manifest_build_kernel; no GPU
        needed): returns (megajit.BuildResult, seconds); raises on failure."""
        status, result, seconds = self._build(runtime, c_int(i, "kernel index", 0))
        check(status)
        return result, seconds

    def _build(self, runtime, i):
        """mj_manifest_build_kernel of kernel i: (mj_status, BuildResult, seconds)."""
        result = ctypes.c_int()
        seconds = ctypes.c_double()
        status = _lib.load().mj_manifest_build_kernel(
            runtime._handle(), self._handle(), i, ctypes.byref(result), ctypes.byref(seconds)
        )
        return status, BuildResult(result.value), seconds.value

    def _spec(self):
        return {**self._source, "archs": self._archs}


@dataclasses.dataclass(frozen=True)
class KernelProgress:
    """One kernel's outcome, as precompile's progress callback receives it."""

    index: int  # the kernel's index in the manifest
    done: int  # kernels reported so far, this one included
    count: int  # kernels in the manifest
    kernel: str  # its description
    result: str  # "compiled", "cached" or "failed"
    seconds: float
    error: str  # why it failed; "" otherwise


@dataclasses.dataclass(frozen=True)
class PrecompileReport:
    """What precompile did, with the fields of `megajit precompile --json`."""

    kernels: int
    compiled: int
    cached: int
    failed: int
    seconds: float
    jobs: int
    cache: str
    archs: list
    failures: list  # [{"kernel": description, "error": message}]

    @property
    def ok(self):
        """True when every kernel is in the cache."""
        return self.failed == 0


def default_jobs():
    """Worker processes for the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def precompile(manifest_or_preset, archs=None, jobs=None, progress=None, cache_dir=None):
    """Compiles every kernel the manifest needs that the cache lacks, as `megajit
    precompile` does; needs no GPU. manifest_or_preset: a Manifest, a preset name,
    a manifest path, JSON text or a dict. archs: replaces the manifest's
    architectures ("sm_90a,sm_100a" or a list). jobs: parallel compiles (default:
    the CPUs available); 1 compiles in this process, more start that many worker
    processes (python -m megajit._worker, which see no GPU and compile with
    the NVRTC this process uses, so the keys match its runtimes'). progress: called
    with a KernelProgress after each kernel, in completion order, in this
    thread (an exception from it stops the run and propagates). cache_dir: the
    cache (default: MEGAJIT_CACHE_DIR or the default); a cache that can store
    nothing raises CacheError before anything compiles. Returns a
    PrecompileReport; failed kernels are in its failures, not raised. A Manifest
    passed in keeps the archs set here; one made here is closed on return."""
    manifest = Manifest.load(manifest_or_preset)
    try:
        return _precompile(manifest, archs, jobs, progress, cache_dir)
    finally:
        if manifest is not manifest_or_preset:
            manifest.close()


def _precompile(manifest, archs, jobs, progress, cache_dir):
    if archs is not None:
        manifest.set_archs(archs)
    if cache_dir is not None:
        cache_dir = os.fspath(cache_dir)
    with Cache(cache_dir, create=True) as cache:
        cache_path = cache.path
    if cache_dir is None:
        cache_dir = os.path.dirname(cache_path)
    count = len(manifest)
    descriptions = manifest.kernels
    jobs = default_jobs() if jobs is None else c_int(jobs, "jobs", 1, 256)
    jobs = max(1, min(jobs, count))
    tally = {"compiled": 0, "cached": 0, "failed": 0}
    failures = []
    t0 = time.monotonic()

    def report(index, result, seconds, error):
        tally[result] += 1
        if result == "failed":
            failures.append({"kernel": descriptions[index], "error": error})
        if progress is not None:
            progress(KernelProgress(index, sum(tally.values()), count, descriptions[index], result, seconds, error))

    if jobs == 1:
        _build_here(manifest, cache_dir, count, report)
    else:
        _build_in_workers(manifest, cache_dir, count, jobs, report)
    return PrecompileReport(
        kernels=count,
        compiled=tally["compiled"],
        cached=tally["cached"],
        failed=tally["failed"],
        seconds=time.monotonic() - t0,
        jobs=jobs,
        cache=cache_path,
        archs=manifest.archs,
        failures=failures,
    )


def build_one(runtime, manifest, i):
    """(result name, seconds, error) of building kernel i; never raises for a kernel."""
    status, result, seconds = manifest._build(runtime, i)
    if status:
        return "failed", seconds, make_error(status).message
    return result.name.lower(), seconds, ""


def _build_here(manifest, cache_dir, count, report):
    with Runtime(cache_dir=cache_dir) as rt:
        for i in range(count):
            report(i, *build_one(rt, manifest, i))


def loaded_nvrtc():
    """Path of the libnvrtc.so.13 already mapped into this process (PyTorch's CUDA 13
    wheels load their own at `import torch`), which megajit's dlopen of
    "libnvrtc.so.13" then returns; None when none is loaded yet."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(path).startswith("libnvrtc.so.13"):
                    return path
    except OSError:
        pass
    return None


def _worker_env():
    env = dict(os.environ)
    # The cache key holds the NVRTC version: workers compile with this process's.
    nvrtc = loaded_nvrtc()
    if nvrtc:
        env["MEGAJIT_WORKER_NVRTC"] = nvrtc
    else:
        env.pop("MEGAJIT_WORKER_NVRTC", None)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["MEGAJIT_LIB"] = _lib.path()  # the workers load what this process loaded
    env["CUDA_VISIBLE_DEVICES"] = ""  # compiling needs no GPU: no context per worker
    return env


def _build_in_workers(manifest, cache_dir, count, jobs, report):
    """Workers take the next kernel index when they report the last one."""
    spec = json.dumps({**manifest._spec(), "cache_dir": cache_dir}) + "\n"
    env = _worker_env()
    sel = selectors.DefaultSelector()
    workers = []
    next_index = 0
    reported = set()

    def feed(p):
        """Hands worker p the next kernel, or closes its stdin when none is left."""
        nonlocal next_index
        if next_index >= count:
            p.current = None
            p.stdin.close()
            return False
        p.current = next_index
        p.stdin.write(f"{next_index}\n")
        p.stdin.flush()
        next_index += 1
        return True

    try:
        for _ in range(jobs):
            p = subprocess.Popen(
                [sys.executable, "-m", "megajit._worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
                bufsize=1,
            )
            p.stdin.write(spec)
            workers.append(p)
        for p in workers:
            if feed(p):
                sel.register(p.stdout, selectors.EVENT_READ, p)
        while len(reported) < count and sel.get_map():
            for key, _ in sel.select():
                p = key.data
                line = p.stdout.readline()
                if not line:  # the worker died: its kernel failed
                    sel.unregister(p.stdout)
                    code = p.wait()
                    if p.current is not None and p.current not in reported:
                        reported.add(p.current)
                        report(p.current, "failed", 0.0, f"the precompile worker exited with status {code}")
                    continue
                msg = json.loads(line)
                reported.add(msg["index"])
                report(msg["index"], msg["result"], msg["seconds"], msg["error"])
                feed(p)
        for i in range(count):  # kernels no worker was left to build
            if i not in reported:
                report(i, "failed", 0.0, "no precompile worker was left to build it")
    finally:
        for p in workers:
            if p.poll() is None and not p.stdin.closed:
                try:
                    p.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + 5
        for p in workers:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()
        sel.close()
