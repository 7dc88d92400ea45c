"""PyTorch interop, used only when PyTorch is there: megajit never imports it
on its own at import time, and works without it (cache, precompile)."""

import sys

from ._capi import Dtype
from .errors import invalid


def loaded():
    """The torch module when the process has imported it, else None."""
    return sys.modules.get("torch")


def require(what):
    """torch, importing it if needed, or an ImportError naming what needed it."""
    torch = loaded()
    if torch is None:
        try:
            import torch
        except ImportError:
            raise ImportError(f"megajit: {what} needs PyTorch (pip install torch)") from None
    return torch


def view_dtype(torch, dtype):
    """The torch dtype of a view's megajit.Dtype."""
    return {
        Dtype.U8: torch.uint8,
        Dtype.E4M3: torch.float8_e4m3fn,
        Dtype.BF16: torch.bfloat16,
        Dtype.I32: torch.int32,
        Dtype.F32: torch.float32,
    }[Dtype(dtype)]


def raw_stream_fn(torch):
    """device index -> the current CUDA stream's handle, as fast as this PyTorch allows."""
    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def stream_handle(stream, device_index):
    """A CUstream handle (int) for `stream`: None = PyTorch's current stream on the
    device (the legacy default stream, 0, without PyTorch); an int handle; or any
    object with a `cuda_stream` attribute (torch.cuda.Stream, cupy streams)."""
    if stream is None:
        torch = loaded()
        if torch is None or device_index is None:
            return 0
        return raw_stream_fn(torch)(device_index)
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if isinstance(handle, int):
        return handle
    raise TypeError(
        f"megajit: stream must be None, an int CUstream handle or a torch.cuda.Stream, "
        f"not {type(stream).__name__}"
    )


def describe(t):
    """A short description of a tensor for error messages."""
    return f"{t.dtype} tensor of shape {tuple(t.shape)} on {t.device}"


def check_cuda(torch, t, name, dtype, shape, device_index):
    """data_ptr() of `t` after checking it is a contiguous CUDA tensor of `dtype` and
    `shape` (a tuple; None entries match any size) on the runtime's device."""
    # The common case in as few attribute reads as possible (pre_dispatch, run;
    # forward checks its own common case inline and comes here from its fallback).
    if (type(t) is torch.Tensor and t.dtype is dtype and t.get_device() == device_index
            and t.shape == shape and t.is_contiguous()):
        return t.data_ptr()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"megajit: {name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype != dtype:
        raise invalid(f"megajit: {name} must be {dtype}, got a {describe(t)}")
    if not t.is_cuda:
        raise invalid(f"megajit: {name} must be on a CUDA device, got a {describe(t)}")
    if device_index is not None and t.get_device() != device_index:
        raise invalid(
            f"megajit: {name} is on {t.device} but the runtime uses cuda:{device_index}"
        )
    got = tuple(t.shape)
    if len(got) != len(shape) or any(w is not None and g != w for g, w in zip(got, shape)):
        want = ", ".join("*" if w is None else str(w) for w in shape)
        raise invalid(f"megajit: {name} must have shape [{want}], got a {describe(t)}")
    if not t.is_contiguous():
        raise invalid(
            f"megajit: {name} must be contiguous (row-major), got strides {t.stride()}; "
            f"pass {name}.contiguous()"
        )
    return t.data_ptr()
