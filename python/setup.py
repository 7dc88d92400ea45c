"""Bundles the megajit shared library into the package at build time.

`pip install ./python` (after `make` in the checkout) copies
../build/lib/libmegajit.so.0 next to megajit/__init__.py; MEGAJIT_BUILD_LIB
names another copy. Without one the build fails and says how to make it.
The wheel is platform-specific (it carries a native library).
"""

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARY = "libmegajit.so.0"


def library_source():
    explicit = os.environ.get("MEGAJIT_BUILD_LIB")
    path = Path(explicit) if explicit else HERE.parent / "build" / "lib" / LIBRARY
    if not path.is_file():
        how = "MEGAJIT_BUILD_LIB" if explicit else "the megajit checkout's build/lib"
        sys.exit(
            f"megajit: {path} not found ({how}). Run `make` in the megajit checkout first "
            f"(it builds build/lib/{LIBRARY}), then `pip install ./python`; or set "
            f"MEGAJIT_BUILD_LIB=/path/to/{LIBRARY}."
        )
    return path


class BuildWithLibrary(build_py):
    """build_py that also copies libmegajit.so.0 into the built package."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "megajit" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library_source(), target)


class BinaryDistribution(Distribution):
    """Marks the wheel as platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
