"""megajit's exceptions: one class per mj_status a caller handles differently.

Every failing C call raises the class of its status with the library's own
sentence (mj_last_error()) as the message. Checks the Python layer makes
itself (tensor dtypes, shapes, devices) raise InvalidArgument too, which is
also a ValueError.
"""

from . import _lib
from ._capi import Status, text


class Error(Exception):
    """A megajit call failed. `.status` is the mj_status (megajit.Status), `.message`
    the library's sentence, which is also str(error)."""

    def __init__(self, message, status=Status.ERR_INVALID_ARG):
        super().__init__(message)
        self.status = Status(status)
        self.message = message

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r}, status={self.status.name})"


class InvalidArgument(Error, ValueError):
    """MJ_ERR_INVALID_ARG: a bad argument; nothing was written."""


class NoDeviceError(Error):
    """MJ_ERR_NO_DEVICE: no CUDA driver or device (cache and precompile still work)."""


class CompileError(Error):
    """MJ_ERR_COMPILE: NVRTC rejected a kernel; the message holds its log."""


class CaptureError(Error):
    """MJ_ERR_CAPTURE: a kernel would have to be compiled while a stream captures a
    CUDA graph; warm it up (MegaMoE.warmup) or precompile it before capturing."""


class CudaError(Error):
    """MJ_ERR_CUDA: a CUDA driver call failed (or a kernel reported a device error)."""


class CacheError(Error):
    """MJ_ERR_CACHE: the on-disk cache could not be used."""


class FileError(Error, OSError):
    """MJ_ERR_IO: a file could not be read or written."""


class OutOfMemory(Error, MemoryError):
    """MJ_ERR_NOMEM: host or device memory exhausted."""


class Unsupported(Error):
    """MJ_ERR_UNSUPPORTED: a valid request this build or device cannot serve."""


class NotFound(Error, LookupError):
    """MJ_ERR_NOT_FOUND: a named thing (cache key, preset, uncompiled kernel with
    compiling disabled) does not exist."""


_BY_STATUS = {
    Status.ERR_INVALID_ARG: InvalidArgument,
    Status.ERR_NO_DEVICE: NoDeviceError,
    Status.ERR_COMPILE: CompileError,
    Status.ERR_CAPTURE: CaptureError,
    Status.ERR_CUDA: CudaError,
    Status.ERR_CACHE: CacheError,
    Status.ERR_IO: FileError,
    Status.ERR_NOMEM: OutOfMemory,
    Status.ERR_UNSUPPORTED: Unsupported,
    Status.ERR_NOT_FOUND: NotFound,
}


def error_class(status):
    """The exception class megajit raises for an mj_status."""
    return _BY_STATUS.get(status, Error)


def make_error(status):
    """The exception for `status`, with the calling thread's mj_last_error()."""
    message = text(_lib.load().mj_last_error())
    try:
        status = Status(status)
    except ValueError:
        return Error(f"{message} (unknown mj_status {status})", Status.ERR_INVALID_ARG)
    return error_class(status)(message or status.name, status)


def check(status):
    """Raises the exception of a non-zero mj_status; returns None for MJ_OK."""
    if status:
        raise make_error(status)


def invalid(message):
    """An InvalidArgument for a check the Python layer made itself."""
    return InvalidArgument(message, Status.ERR_INVALID_ARG)
