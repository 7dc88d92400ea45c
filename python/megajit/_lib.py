"""Finds and loads libmegajit.so.0 (once, at the first call that needs it).

Order: MEGAJIT_LIB when set (an explicit choice never falls back to another
copy), else the copy bundled next to this package at install time.
"""

import ctypes
import os
import threading
from pathlib import Path

from . import _capi

LIBRARY_NAME = "libmegajit.so.0"
BUNDLED = Path(__file__).resolve().with_name(LIBRARY_NAME)

_lock = threading.Lock()
_lib = None
_path = None


class LibraryNotFoundError(ImportError):
    """libmegajit.so.0 could not be loaded: neither MEGAJIT_LIB nor the bundled copy."""


def _open(path, how):
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise LibraryNotFoundError(
            f"megajit: cannot load {path} ({how}): {e}. Build it with `make` in the megajit "
            f"checkout and `pip install ./python`, or set MEGAJIT_LIB to build/lib/{LIBRARY_NAME}"
        ) from None


def load():
    """The loaded library, its functions declared (megajit._capi.FUNCTIONS)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        explicit = os.environ.get("MEGAJIT_LIB")
        if explicit:
            lib, path = _open(explicit, "MEGAJIT_LIB"), explicit
        elif BUNDLED.exists():
            lib, path = _open(BUNDLED, "bundled with the megajit package"), str(BUNDLED)
        else:
            raise LibraryNotFoundError(
                f"megajit: {LIBRARY_NAME} not found: MEGAJIT_LIB is not set and the package has "
                f"no bundled copy at {BUNDLED}. Build it with `make` in the megajit checkout and "
                f"install the package with `pip install ./python` (which bundles "
                f"build/lib/{LIBRARY_NAME}), or set MEGAJIT_LIB=/path/to/build/lib/{LIBRARY_NAME}"
            )
        _capi.declare(lib)
        _path = os.path.abspath(path)
        _lib = lib
        return lib


def path():
    """Absolute path of the loaded library (loading it if needed)."""
    load()
    return _path
