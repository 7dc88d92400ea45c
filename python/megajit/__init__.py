"""megajit for Python: the MegaMoE JIT runtime (libmegajit.so.0) from a serving
process, with PyTorch tensors in and out on the current CUDA stream.

    import torch, megajit
    rt = megajit.Runtime()
    moe = megajit.MegaMoE(rt, megajit.MoEConfig.for_row("mxfp8", hidden=7168,
                          intermediate=2048, num_experts=256, num_topk=8,
                          max_tokens_per_rank=256))
    moe.load_experts(w13, w2, w13_scales, w2_scales)
    moe.warmup()
    y = moe.forward(hidden_states, topk_weights, topk_ids)

PyTorch is optional: cache inspection (Cache) and precompile work without it
and without a GPU. The library is the copy bundled at install time, or the one
MEGAJIT_LIB names. README.md (section "Python") has a complete example.
"""

from ._capi import (
    Activation,
    BuildResult,
    CacheSelector,
    Dtype,
    Family,
    Format,
    Projection,
    Status,
    ViewId,
)
from ._handle import live_handles
from ._lib import LibraryNotFoundError
from .buffer import SymmBuffer, SymmConfig, View
from .cache import Cache, CacheDetail, CacheEntry, CacheStats, GcResult, VerifyResult, parse_bytes
from .errors import (
    CacheError,
    CaptureError,
    CompileError,
    CudaError,
    Error,
    FileError,
    InvalidArgument,
    NoDeviceError,
    NotFound,
    OutOfMemory,
    Unsupported,
)
from .moe import FORMAT_ROWS, MegaMoE, MoEConfig
from .precompile import KernelProgress, Manifest, PrecompileReport, precompile, presets
from .runtime import (
    FamilySettings,
    Info,
    Runtime,
    RuntimeStats,
    format_name,
    library_version,
    parse_format,
    status_name,
)

__version__ = "0.1.0"

__all__ = [
    "Activation",
    "BuildResult",
    "Cache",
    "CacheDetail",
    "CacheEntry",
    "CacheError",
    "CacheSelector",
    "CacheStats",
    "CaptureError",
    "CompileError",
    "CudaError",
    "Dtype",
    "Error",
    "FORMAT_ROWS",
    "Family",
    "FamilySettings",
    "FileError",
    "Format",
    "GcResult",
    "Info",
    "InvalidArgument",
    "KernelProgress",
    "LibraryNotFoundError",
    "Manifest",
    "MegaMoE",
    "MoEConfig",
    "NoDeviceError",
    "NotFound",
    "OutOfMemory",
    "PrecompileReport",
    "Projection",
    "Runtime",
    "RuntimeStats",
    "Status",
    "SymmBuffer",
    "SymmConfig",
    "Unsupported",
    "VerifyResult",
    "View",
    "ViewId",
    "format_name",
    "library_version",
    "live_handles",
    "parse_bytes",
    "parse_format",
    "precompile",
    "presets",
    "status_name",
]
