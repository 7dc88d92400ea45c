"""ctypes mirror of include/megajit.h: structs, enums and function signatures.

Nothing here is hand-trusted: tests/test_header.py compiles a C program
against the real header that prints sizeof/alignof/offsetof of every struct
below, the value of every enum constant and the bytes of every MJ_*_INIT
initializer, and assigns each function to a pointer of the C type written in
FUNCTIONS (gcc -Werror, so a changed signature fails the build of that
program). Keep the C type strings exactly as the header spells them.
"""

import ctypes
import dataclasses
import enum
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)

# ------------------------------------------------------------------ enums
# Python names are the C constants without their prefix (ENUMS).


class Status(enum.IntEnum):
    """mj_status: what every fallible C call returns."""

    OK = 0
    ERR_INVALID_ARG = 1
    ERR_NO_DEVICE = 2
    ERR_COMPILE = 3
    ERR_CAPTURE = 4
    ERR_CUDA = 5
    ERR_CACHE = 6
    ERR_IO = 7
    ERR_NOMEM = 8
    ERR_UNSUPPORTED = 9
    ERR_NOT_FOUND = 10


class Family(enum.IntEnum):
    """mj_family: a kernel family, with its own SM count and PDL flag."""

    PRE_DISPATCH = 0
    MEGA_MOE = 1
    BENCH_CEILINGS = 2


class Format(enum.IntEnum):
    """mj_format: element format of weights or dispatched tokens.

    BF16; MXFP8 (E4M3, UE8M0 scale per 32); MXFP4 (E2M1, UE8M0 per 32);
    NVFP4 (E2M1, UE4M3 per 16, fp32 per-token scale).
    """

    BF16 = 0
    MXFP8 = 1
    MXFP4 = 2
    NVFP4 = 3


class Dtype(enum.IntEnum):
    """mj_dtype: element type of a symmetric-buffer view."""

    U8 = 0
    E4M3 = 1
    BF16 = 2
    I32 = 3
    F32 = 4


class ViewId(enum.IntEnum):
    """mj_view_id: the regions of one rank of a symmetric buffer."""

    X = 0
    X_SF = 1
    TOPK_IDX = 2
    TOPK_WEIGHTS = 3
    X_SCALES = 4


class Activation(enum.IntEnum):
    """mj_activation: the expert activation (NUMERICS.md step 4)."""

    SWIGLU = 0
    SWIGLUOAI = 1
    SITU = 2


class Projection(enum.IntEnum):
    """mj_projection: gate and up are [I][H], down is [H][I]."""

    GATE = 0
    UP = 1
    DOWN = 2


class BuildResult(enum.IntEnum):
    """mj_build_result: what building one manifest kernel did."""

    CACHED = 0
    COMPILED = 1
    FAILED = 2


class CacheSelector(enum.IntEnum):
    """mj_cache_selector: what mj_cache_remove matches on."""

    KEY = 0
    FAMILY = 1
    HEADER = 2
    COMPILER = 3
    ARCH = 4
    OLDER = 5
    ALL = 6


# Python enum -> its C type and the prefix of its constants. The enums ending in
# COUNT_ in the header (MJ_FAMILY_COUNT_, ...) are sentinels and not mirrored.
ENUMS = {
    Status: ("mj_status", "MJ_"),
    Family: ("mj_family", "MJ_FAMILY_"),
    Format: ("mj_format", "MJ_FORMAT_"),
    Dtype: ("mj_dtype", "MJ_DTYPE_"),
    ViewId: ("mj_view_id", "MJ_VIEW_"),
    Activation: ("mj_activation", "MJ_ACTIVATION_"),
    Projection: ("mj_projection", "MJ_PROJ_"),
    BuildResult: ("mj_build_result", "MJ_BUILD_"),
    CacheSelector: ("mj_cache_selector", "MJ_CACHE_SELECT_"),
}

# ---------------------------------------------------------------- structs


class _Versioned(Structure):
    """A struct that begins with struct_size: construction mirrors MJ_*_INIT
    (struct_size = sizeof, every other field zero but the _defaults_)."""

    _defaults_ = {}

    def __init__(self, **fields):
        super().__init__()
        self.struct_size = ctypes.sizeof(type(self))
        for name, value in {**self._defaults_, **fields}.items():
            setattr(self, name, value)


class RuntimeOptions(_Versioned):
    _fields_ = [
        ("struct_size", c_size_t),
        ("cache_dir", c_char_p),
        ("cache_ro", c_char_p),
        ("cache_disable", c_int),
        ("arch", c_char_p),
        ("check_device_inputs", c_int),
        ("allow_compile", c_int),
    ]
    _defaults_ = {"allow_compile": 1}


class RuntimeStats(Structure):
    _fields_ = [
        ("memory_hits", c_uint64),
        ("disk_hits", c_uint64),
        ("compiles", c_uint64),
        ("healed", c_uint64),
        ("compile_seconds", c_double),
    ]


class SymmConfig(_Versioned):
    _fields_ = [
        ("struct_size", c_size_t),
        ("hidden", c_int),
        ("num_experts", c_int),
        ("num_topk", c_int),
        ("max_tokens_per_rank", c_int),
        ("dispatch_format", c_int),
        ("num_ranks", c_int),
        ("intermediate", c_int),
        ("shared_intermediate", c_int64),
    ]


class View(Structure):
    _fields_ = [
        ("ptr", c_void_p),
        ("dtype", c_int),
        ("ndim", c_int),
        ("shape", c_int64 * 2),
        ("row_stride_bytes", c_int64),
        ("nbytes", c_size_t),
    ]


class MoeConfig(_Versioned):
    _fields_ = [
        ("struct_size", c_size_t),
        ("hidden", c_int),
        ("intermediate", c_int),
        ("num_experts", c_int),
        ("num_topk", c_int),
        ("num_ranks", c_int),
        ("rank", c_int),
        ("max_tokens_per_rank", c_int),
        ("weight_format", c_int),
        ("dispatch_format", c_int),
        ("activation", c_int),
        ("clamp", c_float),
        ("block_m", c_int),
        ("unfold_mx_scales", c_int),
        ("swiglu_alpha", c_float),
        ("swiglu_beta", c_float),
        ("situ_gate_beta", c_float),
        ("situ_up_beta", c_float),
        ("expert_biases", c_int),
        ("shared_intermediate", c_int),
        ("shared_format", c_int),
    ]


class CacheEntry(Structure):
    _fields_ = [
        ("key_hex", c_char * 33),
        ("family", c_char_p),
        ("kernel_name", c_char_p),
        ("lowered_name", c_char_p),
        ("arch", c_char_p),
        ("compiler", c_char_p),
        ("flags", c_char_p),
        ("cubin_bytes", c_int64),
        ("source_bytes", c_int64),
        ("created_at", c_int64),
        ("last_used_at", c_int64),
        ("hits", c_int64),
        ("compile_ms", c_double),
        ("layer", c_char_p),
    ]


class CacheDetail(Structure):
    _fields_ = [
        ("entry", CacheEntry),
        ("source", c_char_p),
        ("log", c_char_p),
        ("headers", POINTER(c_char_p)),
        ("cubin", c_void_p),
        ("cubin_size", c_size_t),
    ]


class CacheStats(Structure):
    _fields_ = [
        ("entries", c_int64),
        ("cubin_bytes", c_int64),
        ("file_bytes", c_int64),
        ("hits", c_int64),
        ("compile_ms_total", c_double),
        ("compile_ms_max", c_double),
        ("journal_mode", c_char_p),
        ("filesystem", c_char_p),
    ]


class Info(Structure):
    _fields_ = [
        ("megajit_version", c_char_p),
        ("nvrtc_version", c_char_p),
        ("driver_version", c_int),
        ("device_name", c_char_p),
        ("device_sms", c_int),
        ("arch", c_char_p),
        ("cache_path", c_char_p),
        ("cache_filesystem", c_char_p),
        ("cache_journal_mode", c_char_p),
        ("cache_ro_layers", c_char_p),
        ("cache_disabled", c_int),
    ]


# ctypes struct -> its C name and, for the versioned ones, the INIT macro.
STRUCTS = {
    RuntimeOptions: ("mj_runtime_options", "MJ_RUNTIME_OPTIONS_INIT"),
    RuntimeStats: ("mj_runtime_stats", None),
    SymmConfig: ("mj_symm_config", "MJ_SYMM_CONFIG_INIT"),
    View: ("mj_view", None),
    MoeConfig: ("mj_moe_config", "MJ_MOE_CONFIG_INIT"),
    CacheEntry: ("mj_cache_entry", None),
    CacheDetail: ("mj_cache_detail", None),
    CacheStats: ("mj_cache_stats", None),
    Info: ("mj_info", None),
}

def text(raw):
    """A C string (bytes, or None for NULL) as str; NULL as ""."""
    return raw.decode("utf-8", "replace") if raw else ""


def strings(array):
    """A NULL-terminated array of C strings (POINTER(c_char_p)) as a list of str."""
    out = []
    i = 0
    while array and array[i]:
        out.append(text(array[i]))
        i += 1
    return out


def as_plain(cls, raw, **given):
    """The dataclass `cls` from the ctypes struct `raw`, field by field (same
    names; C strings decoded, NULL as ""), with the fields in `given` as given."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in given:
            values[f.name] = given[f.name]
            continue
        v = getattr(raw, f.name)
        values[f.name] = text(v) if v is None or isinstance(v, bytes) else v
    return cls(**values)


# -------------------------------------------------------------- callbacks

CacheEntryFn = CFUNCTYPE(c_int, POINTER(CacheEntry), c_void_p)
CacheBadFn = CFUNCTYPE(None, c_char_p, c_char_p, c_void_p)

# -------------------------------------------------------------- functions
# name -> (C return type, [C parameter types]), spelled as in megajit.h.

FUNCTIONS = {
    "mj_last_error": ("const char *", []),
    "mj_status_name": ("const char *", ["mj_status"]),
    "mj_version_string": ("const char *", []),
    # runtime
    "mj_runtime_create": ("mj_status", ["mj_runtime **", "const mj_runtime_options *"]),
    "mj_runtime_destroy": ("void", ["mj_runtime *"]),
    "mj_runtime_has_device": ("int", ["const mj_runtime *"]),
    "mj_runtime_arch": ("const char *", ["const mj_runtime *"]),
    "mj_family_name": ("const char *", ["mj_family"]),
    "mj_family_set_num_sms": ("mj_status", ["mj_runtime *", "mj_family", "int"]),
    "mj_family_get_num_sms": ("mj_status", ["const mj_runtime *", "mj_family", "int *"]),
    "mj_family_set_pdl": ("mj_status", ["mj_runtime *", "mj_family", "int"]),
    "mj_family_get_pdl": ("mj_status", ["const mj_runtime *", "mj_family", "int *"]),
    "mj_runtime_get_stats": ("mj_status", ["const mj_runtime *", "mj_runtime_stats *"]),
    # formats
    "mj_format_name": ("const char *", ["mj_format"]),
    "mj_format_parse": ("mj_status", ["const char *", "mj_format *"]),
    # symmetric buffers
    "mj_symm_buffer_create": (
        "mj_status",
        ["mj_runtime *", "const mj_symm_config *", "mj_symm_buffer **"],
    ),
    "mj_symm_buffer_create_nccl": (
        "mj_status",
        ["mj_runtime *", "const mj_symm_config *", "void *", "mj_symm_buffer **"],
    ),
    "mj_symm_buffer_destroy": ("void", ["mj_symm_buffer *"]),
    "mj_symm_buffer_view": (
        "mj_status",
        ["const mj_symm_buffer *", "int", "mj_view_id", "mj_view *"],
    ),
    "mj_symm_buffer_info": (
        "mj_status",
        ["const mj_symm_buffer *", "mj_symm_config *", "int *", "size_t *"],
    ),
    # pre-dispatch
    "mj_pre_dispatch": (
        "mj_status",
        [
            "mj_runtime *",
            "mj_symm_buffer *",
            "int",
            "const void *",
            "const int32_t *",
            "const float *",
            "const float *",
            "int",
            "mj_stream",
        ],
    ),
    # MegaMoE
    "mj_weights_create": ("mj_status", ["mj_runtime *", "const mj_moe_config *", "mj_weights **"]),
    "mj_weights_destroy": ("void", ["mj_weights *"]),
    "mj_weights_load": (
        "mj_status",
        ["mj_weights *", "int", "mj_projection", "const void *", "const void *", "int"],
    ),
    "mj_weights_load_shared": (
        "mj_status",
        ["mj_weights *", "mj_projection", "const void *", "const void *", "int"],
    ),
    "mj_weights_load_bias": (
        "mj_status",
        ["mj_weights *", "int", "mj_projection", "const float *", "int"],
    ),
    "mj_weights_set_alphas": (
        "mj_status",
        ["mj_weights *", "int", "float", "float", "float", "float"],
    ),
    "mj_mega_moe_block_m": ("mj_status", ["const mj_moe_config *", "int", "int *"]),
    "mj_mega_moe_warmup": (
        "mj_status",
        ["mj_runtime *", "mj_symm_buffer *", "const mj_weights *", "int"],
    ),
    "mj_mega_moe": (
        "mj_status",
        [
            "mj_runtime *",
            "mj_symm_buffer *",
            "const mj_weights *",
            "void *",
            "int",
            "int32_t *",
            "mj_stream",
        ],
    ),
    "mj_moe_forward": (
        "mj_status",
        [
            "mj_runtime *",
            "mj_symm_buffer *",
            "const mj_weights *",
            "const void *",
            "const int32_t *",
            "const float *",
            "const float *",
            "void *",
            "int",
            "int32_t *",
            "mj_stream",
        ],
    ),
    # manifests and precompile
    "mj_manifest_parse": ("mj_status", ["const char *", "mj_manifest **"]),
    "mj_manifest_preset": ("mj_status", ["const char *", "mj_manifest **"]),
    "mj_manifest_preset_names": ("const char *const *", []),
    "mj_manifest_set_archs": ("mj_status", ["mj_manifest *", "const char *"]),
    "mj_manifest_destroy": ("void", ["mj_manifest *"]),
    "mj_manifest_kernel_count": ("size_t", ["const mj_manifest *"]),
    "mj_manifest_kernel_describe": ("const char *", ["const mj_manifest *", "size_t"]),
    "mj_manifest_build_kernel": (
        "mj_status",
        ["mj_runtime *", "const mj_manifest *", "size_t", "mj_build_result *", "double *"],
    ),
    # cache inspection
    "mj_cache_open": ("mj_status", ["const char *", "int", "mj_cache **"]),
    "mj_cache_create": ("mj_status", ["const char *", "mj_cache **"]),
    "mj_cache_close": ("void", ["mj_cache *"]),
    "mj_cache_path": ("const char *", ["const mj_cache *"]),
    "mj_cache_list": (
        "mj_status",
        ["mj_cache *", "const char *", "const char *", "mj_cache_entry_fn", "void *"],
    ),
    "mj_cache_show": ("mj_status", ["mj_cache *", "const char *", "mj_cache_detail *"]),
    "mj_cache_stat": ("mj_status", ["mj_cache *", "mj_cache_stats *"]),
    "mj_cache_verify": (
        "mj_status",
        ["mj_cache *", "int64_t *", "int64_t *", "mj_cache_bad_fn", "void *"],
    ),
    "mj_cache_remove": ("mj_status", ["mj_cache *", "mj_cache_selector", "const char *", "int64_t *"]),
    "mj_cache_gc": ("mj_status", ["mj_cache *", "int64_t", "int64_t *", "int64_t *"]),
    "mj_cache_export": ("mj_status", ["mj_cache *", "const char *"]),
    "mj_cache_import": ("mj_status", ["mj_cache *", "const char *", "int64_t *"]),
    # information
    "mj_runtime_info": ("mj_status", ["mj_runtime *", "mj_info *"]),
}

# ------------------------------------------------- C type strings -> ctypes

_OPAQUE = {"mj_runtime", "mj_symm_buffer", "mj_weights", "mj_manifest", "mj_cache"}
_ENUMS = {c_name for c_name, _ in ENUMS.values()}
_SCALARS = {
    "void": None,
    "int": c_int,
    "size_t": c_size_t,
    "int64_t": c_int64,
    "float": c_float,
    "double": c_double,
    "mj_stream": c_void_p,
    "mj_cache_entry_fn": CacheEntryFn,
    "mj_cache_bad_fn": CacheBadFn,
    "const char *": c_char_p,
    "const char *const *": POINTER(c_char_p),
}
_BY_C_NAME = {c_name: cls for cls, (c_name, _) in STRUCTS.items()}
# Device and host data pointers travel as plain integers.
_DATA_POINTERS = {"void *", "const void *", "const int32_t *", "int32_t *", "const float *"}
_OUT_SCALARS = {"int *": c_int, "size_t *": c_size_t, "int64_t *": c_int64, "double *": c_double}


def ctype_of(c_type):
    """The ctypes type that carries a value of C type `c_type` (as spelled in FUNCTIONS)."""
    if c_type in _SCALARS:
        return _SCALARS[c_type]
    if c_type in _ENUMS:
        return c_int
    if c_type in _DATA_POINTERS:
        return c_void_p
    if c_type in _OUT_SCALARS:
        return POINTER(_OUT_SCALARS[c_type])
    base = c_type.replace("const ", "").strip()
    if base.endswith("**") and base[:-2].strip() in _OPAQUE:
        return POINTER(c_void_p)
    if base.endswith("*"):
        name = base[:-1].strip()
        if name in _OPAQUE:
            return c_void_p
        if name in _ENUMS:
            return POINTER(c_int)
        if name in _BY_C_NAME:
            return POINTER(_BY_C_NAME[name])
    raise TypeError(f"megajit._capi: no ctypes mapping for C type {c_type!r}")


def declare(lib):
    """Sets restype and argtypes of every FUNCTIONS entry on the CDLL `lib`."""
    for name, (ret, params) in FUNCTIONS.items():
        fn = getattr(lib, name)
        fn.restype = ctype_of(ret)
        fn.argtypes = [ctype_of(p) for p in params]
    return lib
