"""Importing megajit: without PyTorch, without a GPU, the version, where the
library comes from and the errors when it is missing."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LIBRARY, REPO, run_python

import megajit

# A meta-path finder that makes `import torch` fail, as on a machine without it.
NO_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked for this test")
        return None
sys.meta_path.insert(0, _NoTorch())
"""


def test_import_precompile_and_cache_without_torch_or_gpu(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({
        "archs": ["sm_90a"],
        "layers": [{"hidden": 256, "intermediate": 64, "experts": 4, "topk": 2, "ranks": 1,
                    "max_tokens_per_rank": 8, "weight_format": "bf16", "dispatch_format": "bf16",
                    "activation": "swiglu"}],
    }))
    code = NO_TORCH + f"""
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("the blocker let torch in")
import megajit
rt = megajit.Runtime(cache_dir={str(tmp_path / 'cache')!r})
assert not rt.has_device, "CUDA_VISIBLE_DEVICES is empty"
report = megajit.precompile({str(manifest)!r}, jobs=1, cache_dir={str(tmp_path / 'cache')!r})
assert report.ok and report.kernels == len(megajit.Manifest.load({str(manifest)!r})), report
entries = megajit.Cache({str(tmp_path / 'cache')!r}).ls()
assert len(entries) == report.kernels, entries
try:
    megajit.MegaMoE(rt, megajit.MoEConfig(512, 128, 16, 4, 64))
except megajit.NoDeviceError:
    pass
else:
    raise SystemExit("a MegaMoE without a device did not raise NoDeviceError")
assert "torch" not in sys.modules
print("ok", report.kernels)
"""
    p = run_python(code, env={"CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok ")


def test_import_does_not_import_torch():
    p = run_python("import sys, megajit; megajit.Runtime(); print('torch' in sys.modules)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_versions_agree():
    header = (REPO / "include" / "megajit.h").read_text()
    version = re.search(r'#define MJ_VERSION_STRING "([^"]+)"', header).group(1)
    pyproject = (REPO / "python" / "pyproject.toml").read_text()
    assert megajit.__version__ == version
    assert megajit.library_version() == version
    assert f'version = "{version}"' in pyproject
    with megajit.Runtime() as rt:
        assert rt.info().megajit_version == version


def test_megajit_lib_that_does_not_load_is_named(tmp_path):
    missing = tmp_path / "nothing" / "libmegajit.so.0"
    p = run_python("import megajit; megajit.presets()", env={"MEGAJIT_LIB": str(missing)})
    assert p.returncode != 0
    assert "LibraryNotFoundError" in p.stderr
    assert str(missing) in p.stderr and "MEGAJIT_LIB" in p.stderr


def test_missing_library_names_both_places(tmp_path):
    """A package copy with no bundled library and no MEGAJIT_LIB: the error names both."""
    src = Path(megajit.__file__).parent
    shutil.copytree(src, tmp_path / "megajit", ignore=shutil.ignore_patterns("*.so*", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("MEGAJIT_LIB", None)
    code = "import megajit; print(megajit.__version__); megajit.presets()"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert p.stdout.strip() == megajit.__version__  # importing works; the first call fails
    assert "MEGAJIT_LIB is not set" in p.stderr
    assert str(tmp_path / "megajit" / "libmegajit.so.0") in p.stderr
    assert "pip install ./python" in p.stderr


def test_library_loaded_is_the_expected_copy():
    path = megajit._lib.path()
    if os.environ.get("MEGAJIT_LIB"):
        assert os.path.samefile(path, os.environ["MEGAJIT_LIB"])
    else:
        assert path == str(megajit._lib.BUNDLED)


@pytest.mark.skipif(os.environ.get("MEGAJIT_TEST_INSTALLED") != "1", reason="run by make test-python")
def test_installed_package_bundles_the_library():
    """make test-python runs these tests against `pip install ./python` in a venv."""
    pkg = Path(megajit.__file__).parent
    assert REPO / "python" not in pkg.parents, pkg
    bundled = pkg / "libmegajit.so.0"
    assert bundled.exists()
    assert bundled.read_bytes() == LIBRARY.read_bytes()
    assert "MEGAJIT_LIB" not in os.environ


def test_build_without_library_fails_clearly(tmp_path):
    """setup.py refuses to build a package without libmegajit.so.0, saying what to run."""
    pytest.importorskip("setuptools")
    work = tmp_path / "src"
    shutil.copytree(REPO / "python", work, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, MEGAJIT_BUILD_LIB=str(tmp_path / "absent" / "libmegajit.so.0"))
    p = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "out")],
        cwd=work, capture_output=True, text=True, env=env,
    )
    assert p.returncode != 0
    assert "not found" in p.stderr and "Run `make`" in p.stderr
