"""Shared setup of the CPU tests: the checkout, the CLI, a private cache
environment (megajit reads its environment once, at the first runtime), and a
tiny manifest whose two pre-dispatch kernels compile in about a second."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MEGAJIT_BUILD", REPO / "build"))
if not BUILD.is_absolute():
    BUILD = REPO / BUILD
LIBRARY = BUILD / "lib" / "libmegajit.so.0"
CLI = BUILD / "bin" / "megajit"

# Before anything loads megajit: nothing from the caller's environment leaks in.
_HOME = tempfile.mkdtemp(prefix="megajit-pytest-")
os.environ["MEGAJIT_CACHE_DIR"] = os.path.join(_HOME, "default-cache")
for var in ("MEGAJIT_CACHE_RO", "MEGAJIT_CACHE_DISABLE", "MEGAJIT_JIT_DISABLE", "MEGAJIT_TEMPLATE_DIR"):
    os.environ.pop(var, None)

import megajit  # noqa: E402

# Run from the source tree (PYTHONPATH=python), the package has no bundled copy.
if not megajit._lib.BUNDLED.exists() and not os.environ.get("MEGAJIT_LIB"):
    os.environ["MEGAJIT_LIB"] = str(LIBRARY)

# Two layers of pre-dispatch-only kernels (bf16 weights with mxfp8 tokens is no
# MegaMoE pair): four kernels, none of them MegaMoE's (which take longer).
TINY_MANIFEST = {
    "archs": ["sm_90a"],
    "layers": [
        {
            "name": "a",
            "hidden": 256,
            "intermediate": 64,
            "experts": 4,
            "topk": 2,
            "ranks": 1,
            "max_tokens_per_rank": 16,
            "weight_format": "bf16",
            "dispatch_format": "mxfp8",
            "activation": "swiglu",
        },
        {
            "name": "b",
            "hidden": 512,
            "intermediate": 64,
            "experts": 8,
            "topk": 4,
            "ranks": 2,
            "max_tokens_per_rank": 16,
            "weight_format": "bf16",
            "dispatch_format": "nvfp4",
            "activation": "swiglu",
        },
    ],
}


def cli(*args, check=True, env=None):
    """Runs build/bin/megajit; returns the CompletedProcess (text)."""
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"megajit {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
    return p


def cli_json(*args, **kw):
    """The JSON a CLI command printed."""
    return json.loads(cli(*args, **kw).stdout)


def run_python(code, env=None):
    """Runs `code` in a fresh interpreter with this process's megajit on the path."""
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(megajit.__file__).parents[1]), full.get("PYTHONPATH")) if p
    )
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)


@pytest.fixture(scope="session", autouse=True)
def _built():
    if not CLI.exists() or not LIBRARY.exists():
        pytest.exit(f"build {CLI} and {LIBRARY} first (make)", returncode=2)


@pytest.fixture(scope="session")
def tiny_manifest_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("manifest") / "tiny.json"
    path.write_text(json.dumps(TINY_MANIFEST))
    return path


@pytest.fixture(scope="session")
def built_cache(tmp_path_factory, tiny_manifest_path):
    """A cache holding the tiny manifest's kernels, built once by the CLI; tests copy it."""
    root = tmp_path_factory.mktemp("built")
    cache = root / "cache"
    cli("precompile", "--manifest", tiny_manifest_path, "--cache", cache, "--jobs", "2", "--json")
    return cache


@pytest.fixture(scope="session")
def process_cache(tmp_path_factory, tiny_manifest_path):
    """The tiny manifest's kernels built in this process (jobs=1): its keys are the
    ones this process's runtimes look up, whichever NVRTC the process loaded
    (PyTorch brings its own libnvrtc.so.13; the CLI uses CUDA_HOME's)."""
    cache = tmp_path_factory.mktemp("process") / "cache"
    assert megajit.precompile(tiny_manifest_path, jobs=1, cache_dir=cache).ok
    return cache


def same_nvrtc_as_cli():
    """Whether this process compiles with the CLI's NVRTC (so both make the same keys)."""
    with megajit.Runtime() as rt:
        mine = rt.info().nvrtc_version
    return mine == cli_json("info", "--json")["nvrtc_version"]


@pytest.fixture
def cache_copy(built_cache, tmp_path):
    """A private copy of built_cache (a directory with its database)."""
    dst = tmp_path / "cache"
    shutil.copytree(built_cache, dst)
    os.chmod(dst, 0o700)
    return dst


def torch_or_skip():
    """PyTorch, or skip the test (make test runs without it)."""
    return pytest.importorskip("torch")
