"""megajit.Runtime: the JIT runtime (device binding, cache, per-family settings)."""

import ctypes
import dataclasses

from . import _capi, _cuda, _lib, _torch
from ._args import c_int, c_str, enum_member
from ._capi import Family, Format, text
from ._handle import Owner
from .errors import check, invalid


def library_version():
    """The loaded libmegajit's version string (mj_version_string, "0.1.0")."""
    return text(_lib.load().mj_version_string())


def status_name(status):
    """The C name of an mj_status ("MJ_ERR_COMPILE")."""
    return text(_lib.load().mj_status_name(int(status)))


def family(value):
    """A megajit.Family from a Family, its int or its name ("mega_moe", as
    mj_family_name spells it)."""
    return enum_member(Family, value, "kernel family")


def family_name(value):
    """mj_family_name: "pre_dispatch", "mega_moe"."""
    return text(_lib.load().mj_family_name(int(value)))


def format_name(value):
    """mj_format_name: "bf16", "mxfp8", "mxfp4", "nvfp4"."""
    return text(_lib.load().mj_format_name(int(value)))


def parse_format(value):
    """A megajit.Format from a Format, its int or its name (mj_format_parse)."""
    if isinstance(value, str):
        out = ctypes.c_int()
        check(_lib.load().mj_format_parse(c_str(value, "format"), ctypes.byref(out)))
        return Format(out.value)
    try:
        return Format(value)
    except ValueError:
        raise invalid(f"megajit: unknown format {value!r}") from None


@dataclasses.dataclass(frozen=True)
class RuntimeStats:
    """Counters of a runtime's in-memory and on-disk cache since creation (mj_runtime_stats)."""

    memory_hits: int
    disk_hits: int
    compiles: int
    healed: int
    compile_seconds: float


@dataclasses.dataclass(frozen=True)
class Info:
    """What `megajit info --json` prints, for one runtime (mj_info)."""

    megajit_version: str
    nvrtc_version: str
    driver_version: int
    device_name: str
    device_sms: int
    arch: str
    cache_path: str
    cache_filesystem: str
    cache_journal_mode: str
    cache_ro_layers: list
    cache_disabled: bool


class FamilySettings:
    """One kernel family's settings on one runtime: `num_sms` (0 = every SM of the
    device) and `pdl` (programmatic dependent launch), read and written live.
    Setting one family never changes another. A symmetric buffer records the
    MegaMoE SM count when it is created, so set that first."""

    __slots__ = ("_rt", "family")

    def __init__(self, rt, fam):
        self._rt = rt
        self.family = fam

    @property
    def name(self):
        """The family's name ("mega_moe")."""
        return family_name(self.family)

    @property
    def num_sms(self):
        """SM count the family's kernels run on; 0 = all of the device's."""
        out = ctypes.c_int()
        check(_lib.load().mj_family_get_num_sms(self._rt._handle(), self.family, ctypes.byref(out)))
        return out.value

    @num_sms.setter
    def num_sms(self, value):
        check(_lib.load().mj_family_set_num_sms(self._rt._handle(), self.family, c_int(value, "num_sms")))

    @property
    def pdl(self):
        """Whether the family's kernels launch with programmatic dependent launch."""
        out = ctypes.c_int()
        check(_lib.load().mj_family_get_pdl(self._rt._handle(), self.family, ctypes.byref(out)))
        return bool(out.value)

    @pdl.setter
    def pdl(self, value):
        check(_lib.load().mj_family_set_pdl(self._rt._handle(), self.family, 1 if value else 0))

    def __repr__(self):
        return f"<megajit family {self.name}: num_sms={self.num_sms} pdl={self.pdl}>"


class Families:
    """rt.families: FamilySettings by name ("mega_moe") or megajit.Family."""

    __slots__ = ("_rt",)

    def __init__(self, rt):
        self._rt = rt

    def __getitem__(self, key):
        return FamilySettings(self._rt, family(key))

    def __iter__(self):
        return iter([family_name(f) for f in Family])

    def __len__(self):
        return len(Family)

    def keys(self):
        """The family names."""
        return list(self)

    def items(self):
        """(name, FamilySettings) pairs."""
        return [(name, self[name]) for name in self]


class Runtime(Owner):
    """A megajit runtime (mj_runtime_create).

    cache_dir: writable cache directory (None: MEGAJIT_CACHE_DIR, else the default).
    cache_ro: colon-separated read-only snapshots (None: MEGAJIT_CACHE_RO).
    cache_disable: keep compiled kernels in memory only.
    arch: target architecture of compiles ("sm_90a"; None: the device's).
    check_device_inputs: synchronize after launches that read device-side indices
      and turn a device-detected error into an exception (tests, debugging; see
      MegaMoE.forward).
    allow_compile: False = a launch or warm-up whose kernel is neither loaded nor
      cached raises megajit.NotFound naming the precompile command.
    device: CUDA device index (or torch.device) to attach to. None: PyTorch's
      current device when PyTorch is imported and has CUDA, else the context
      current on this thread, else device 0.

    Without a GPU the runtime still opens (cache and precompile work); launches
    then raise NoDeviceError. Every call on the runtime, its buffers and weights
    makes the runtime's CUDA context current on the calling thread (megajit.h).
    Close it with close() or a `with` block; objects made from it close with it.
    """

    _kind = "runtime"

    def __init__(
        self,
        cache_dir=None,
        cache_ro=None,
        arch=None,
        check_device_inputs=False,
        allow_compile=True,
        cache_disable=False,
        device=None,
    ):
        lib = _lib.load()
        opts = _capi.RuntimeOptions(
            cache_dir=c_str(cache_dir, "cache_dir"),
            cache_ro=c_str(cache_ro, "cache_ro"),
            cache_disable=1 if cache_disable else 0,
            arch=c_str(arch, "arch"),
            check_device_inputs=1 if check_device_inputs else 0,
            allow_compile=1 if allow_compile else 0,
        )
        if device is not None and not isinstance(device, int):
            if getattr(device, "type", "cuda") != "cuda":
                raise invalid(f"megajit: device must be a CUDA device, got {device}")
            device = getattr(device, "index", None)  # torch.device("cuda"): the current one
        release = self._bind_device(device)
        out = ctypes.c_void_p()
        try:
            check(lib.mj_runtime_create(ctypes.byref(out), ctypes.byref(opts)))
        except BaseException:
            if release:
                release()
            raise

        def destroy(ptr, release=release):
            lib.mj_runtime_destroy(ptr)
            if release:
                release()

        self._own(out.value, destroy)
        self._has_device = bool(lib.mj_runtime_has_device(out.value))
        self.device_index = (device if device is not None else _cuda.current_device()) if self._has_device else None
        self.families = Families(self)

    @staticmethod
    def _bind_device(device):
        """Makes the chosen device's primary context current (what PyTorch uses too)."""
        torch = _torch.loaded()
        if torch is not None and torch.cuda.is_available():
            index = torch.cuda.current_device() if device is None else device
            if not 0 <= index < torch.cuda.device_count():
                raise invalid(f"megajit: no CUDA device {index} (PyTorch sees {torch.cuda.device_count()})")
            torch.cuda.set_device(index)
            torch.cuda.synchronize(index)  # binds the primary context to this thread
            return None
        if device is None:
            return None
        release = _cuda.retain_primary(device)
        if release is None:
            raise invalid(f"megajit: cannot attach to CUDA device {device} (no driver or no such device)")
        return release

    @property
    def has_device(self):
        """Whether this runtime can launch kernels (driver and device present)."""
        return self._has_device

    @property
    def device(self):
        """The runtime's device as a torch.device (needs PyTorch); None without a device."""
        if self.device_index is None:
            return None
        return _torch.require("Runtime.device").device("cuda", self.device_index)

    @property
    def arch(self):
        """The architecture this runtime compiles for ("sm_90a")."""
        return text(_lib.load().mj_runtime_arch(self._handle()))

    def stats(self):
        """megajit.RuntimeStats: hits, compiles and compile time since creation."""
        out = _capi.RuntimeStats()
        check(_lib.load().mj_runtime_get_stats(self._handle(), ctypes.byref(out)))
        return _capi.as_plain(RuntimeStats, out)

    def info(self):
        """megajit.Info: versions, device, arch and cache (as `megajit info --json`)."""
        out = _capi.Info()
        check(_lib.load().mj_runtime_info(self._handle(), ctypes.byref(out)))
        layers = text(out.cache_ro_layers)
        return _capi.as_plain(
            Info, out, cache_ro_layers=[p for p in layers.split(":") if p], cache_disabled=bool(out.cache_disabled)
        )

    def __repr__(self):
        if self.closed:
            return "<megajit.Runtime (closed)>"
        where = f"cuda:{self.device_index}" if self._has_device else "no device"
        return f"<megajit.Runtime {self.arch} {where}>"
