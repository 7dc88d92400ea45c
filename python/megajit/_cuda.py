"""The few CUDA driver calls the Python layer makes itself (libcuda.so.1 through
ctypes): which device a runtime attached to, and making a device's primary
context current before creating a runtime for it without PyTorch."""

import ctypes

_cuda = None


def driver():
    """libcuda.so.1, or None when there is no driver."""
    global _cuda
    if _cuda is None:
        try:
            _cuda = ctypes.CDLL("libcuda.so.1")
        except OSError:
            _cuda = False
        else:
            _cuda.cuInit.argtypes = [ctypes.c_uint]
            _cuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            _cuda.cuCtxGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
            _cuda.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            _cuda.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
            _cuda.cuDevicePrimaryCtxRelease.argtypes = [ctypes.c_int]
            _cuda.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    return _cuda or None


def current_device():
    """The device of the context current on this thread, else 0: the device
    mj_runtime_create attaches to (megajit.h). None without a driver."""
    cu = driver()
    if cu is None or cu.cuInit(0) != 0:
        return None
    ctx = ctypes.c_void_p()
    if cu.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        return 0
    dev = ctypes.c_int()
    return dev.value if cu.cuCtxGetDevice(ctypes.byref(dev)) == 0 else 0


def retain_primary(index):
    """Makes device `index`'s primary context current on this thread and returns a
    release() to call once the runtime that uses it is destroyed."""
    cu = driver()
    if cu is None or cu.cuInit(0) != 0:
        return None
    dev = ctypes.c_int()
    ctx = ctypes.c_void_p()
    if cu.cuDeviceGet(ctypes.byref(dev), index) != 0:
        return None
    if cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value) != 0:
        return None
    cu.cuCtxSetCurrent(ctx)
    return lambda: cu.cuDevicePrimaryCtxRelease(dev.value)
