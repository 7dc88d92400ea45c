"""megajit.Cache: inspection and maintenance of an on-disk kernel cache
(mj_cache_*), returning plain Python objects with the fields of the CLI's JSON."""

import ctypes
import dataclasses
import re

from . import _capi, _lib
from ._args import c_str
from ._capi import CacheSelector, text
from ._handle import Owner
from .errors import check, invalid


class _Plain:
    """Results are plain data: to_dict() gives the CLI's JSON object."""

    def to_dict(self):
        """The fields as a dict (the CLI's JSON keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CacheEntry(_Plain):
    """One cache entry, as `megajit cache ls --json` prints it."""

    key: str
    family: str
    kernel_name: str
    lowered_name: str
    arch: str
    compiler: str
    flags: str
    cubin_bytes: int
    source_bytes: int
    created_at: int  # unix seconds
    last_used_at: int  # unix seconds
    hits: int
    compile_ms: float
    layer: str  # "": the cache itself; else the MEGAJIT_CACHE_RO snapshot holding it


@dataclasses.dataclass(frozen=True)
class CacheDetail(_Plain):
    """One entry with its rendered source, NVRTC log, include closure and cubin."""

    entry: CacheEntry
    source: str
    log: str
    headers: list
    cubin: bytes


@dataclasses.dataclass(frozen=True)
class CacheStats(_Plain):
    """Totals of a cache, as `megajit cache stat --json` prints them."""

    path: str
    entries: int
    cubin_bytes: int
    file_bytes: int  # database + WAL on disk
    hits: int
    compile_ms_total: float
    compile_ms_max: float
    journal_mode: str
    filesystem: str


@dataclasses.dataclass(frozen=True)
class VerifyResult(_Plain):
    """What verify found, as `megajit cache verify --json` prints it."""

    checked: int
    bad: int
    bad_entries: list  # [{"key": hex, "reason": why}]

    @property
    def ok(self):
        """True when no entry is bad."""
        return self.bad == 0


@dataclasses.dataclass(frozen=True)
class GcResult(_Plain):
    """What gc removed and the cubin bytes left."""

    removed: int
    cubin_bytes: int


def _entry(e):
    return _capi.as_plain(CacheEntry, e, key=e.key_hex.decode())


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


def parse_bytes(value):
    """A byte count from an int or "500M" / "2G" (K, M, G, T: powers of 1024), as the
    CLI's --max-bytes reads it."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            scale = 1024 ** " KMGT".index(m.group(2).upper() or " ")
            return int(float(m.group(1)) * scale)
    raise invalid(f"megajit: expected a byte count like 500M, got {value!r}")


class Cache(Owner):
    """An on-disk kernel cache opened for inspection and maintenance.

    Cache(dir=None, read_only=False): mj_cache_open (dir None: the runtime's rules,
    MEGAJIT_CACHE_DIR or the default); creates nothing, and a cache that does not
    exist yet is empty. Cache(dir, create=True): mj_cache_create, the cache made
    now and ready to store (what precompile needs). The MEGAJIT_CACHE_RO
    snapshots are opened too: ls() lists their entries after the cache's own.
    """

    _kind = "cache"

    def __init__(self, dir=None, read_only=False, create=False):
        lib = _lib.load()
        out = ctypes.c_void_p()
        d = c_str(dir, "dir")
        if create:
            if read_only:
                raise invalid("megajit: a cache cannot be created read-only")
            check(lib.mj_cache_create(d, ctypes.byref(out)))
        else:
            check(lib.mj_cache_open(d, 1 if read_only else 0, ctypes.byref(out)))
        self._own(out.value, lib.mj_cache_close)

    @property
    def path(self):
        """The database file."""
        return text(_lib.load().mj_cache_path(self._handle()))

    def ls(self, family=None, arch=None):
        """Every entry matching the filters (None: any), the cache's first, then each
        snapshot's: a list of CacheEntry."""
        found = []

        def one(entry, _user):
            found.append(_entry(entry.contents))
            return 0

        cb = _capi.CacheEntryFn(one)
        check(_lib.load().mj_cache_list(self._handle(), c_str(family, "family"), c_str(arch, "arch"), cb, None))
        return found

    list = ls

    def show(self, key_prefix):
        """One entry by key prefix (>= 4 hex digits): a CacheDetail. NotFound when none
        matches, InvalidArgument when several do."""
        out = _capi.CacheDetail()
        check(_lib.load().mj_cache_show(self._handle(), c_str(key_prefix, "key_prefix"), ctypes.byref(out)))
        return CacheDetail(
            entry=_entry(out.entry),
            source=text(out.source),
            log=text(out.log),
            headers=_capi.strings(out.headers),
            cubin=ctypes.string_at(out.cubin, out.cubin_size) if out.cubin else b"",
        )

    def stat(self):
        """CacheStats: entries, bytes, hits, compile times, journal mode, filesystem."""
        out = _capi.CacheStats()
        check(_lib.load().mj_cache_stat(self._handle(), ctypes.byref(out)))
        return _capi.as_plain(CacheStats, out, path=self.path)

    def verify(self):
        """Checks the database and every cubin against its hash (read-only): a
        VerifyResult listing each bad entry with its reason."""
        bad_entries = []

        def bad(key, reason, _user):
            bad_entries.append({"key": text(key), "reason": text(reason)})

        cb = _capi.CacheBadFn(bad)
        checked = ctypes.c_int64()
        nbad = ctypes.c_int64()
        check(_lib.load().mj_cache_verify(self._handle(), ctypes.byref(checked), ctypes.byref(nbad), cb, None))
        return VerifyResult(checked.value, nbad.value, bad_entries)

    def rm(self, *, key=None, family=None, header=None, compiler=None, arch=None, older_than=None, all=False):
        """Removes entries by exactly one selector and returns how many: key (hex
        prefix), family, header (a template header path, "common/fp4.cuh": every
        kernel whose include closure has it), compiler (its string), arch,
        older_than (days since last use, a number >= 0), or all=True."""
        chosen = [(s, v) for s, v in (
            (CacheSelector.KEY, key),
            (CacheSelector.FAMILY, family),
            (CacheSelector.HEADER, header),
            (CacheSelector.COMPILER, compiler),
            (CacheSelector.ARCH, arch),
            (CacheSelector.OLDER, older_than),
        ) if v is not None]
        if all:
            chosen.append((CacheSelector.ALL, None))
        if len(chosen) != 1:
            raise invalid(
                "megajit: give exactly one of key, family, header, compiler, arch, older_than, all"
            )
        sel, value = chosen[0]
        if sel == CacheSelector.OLDER and not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"megajit: older_than must be a number of days, not {type(value).__name__}")
            value = repr(float(value))  # the library checks it is finite and >= 0
        return self._remove(sel, value)

    def _remove(self, sel, value):
        removed = ctypes.c_int64()
        check(_lib.load().mj_cache_remove(self._handle(), int(sel), c_str(value, "value"), ctypes.byref(removed)))
        return removed.value

    def gc(self, max_bytes):
        """Evicts least-recently-used entries until the cubins fit max_bytes (an int
        or "500M"): a GcResult."""
        n = parse_bytes(max_bytes)
        removed = ctypes.c_int64()
        after = ctypes.c_int64()
        check(_lib.load().mj_cache_gc(self._handle(), n, ctypes.byref(removed), ctypes.byref(after)))
        return GcResult(removed.value, after.value)

    def export(self, file):
        """Writes a consistent, compact snapshot to `file` (usable in MEGAJIT_CACHE_RO)."""
        check(_lib.load().mj_cache_export(self._handle(), c_str(file, "file")))

    def import_(self, file):
        """Copies a snapshot's entries in (existing keys win); returns how many.
        (`import` is a Python keyword; `getattr(cache, "import")` works too.)"""
        imported = ctypes.c_int64()
        check(_lib.load().mj_cache_import(self._handle(), c_str(file, "file"), ctypes.byref(imported)))
        return imported.value

    def __repr__(self):
        return "<megajit.Cache (closed)>" if self.closed else f"<megajit.Cache {self.path}>"


setattr(Cache, "import", Cache.import_)
