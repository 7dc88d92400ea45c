"""Zero-copy tensors over memory megajit owns, through DLPack (no NumPy needed:
PyTorch's __cuda_array_interface__ import parses type strings with NumPy).

A legacy DLManagedTensor is built with ctypes and handed over in a "dltensor"
capsule; the consumer calls its deleter when its tensor dies, which releases
the Python object kept alive for it (the view, and so the buffer object)."""

import ctypes
import threading
from ctypes import CFUNCTYPE, POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p

K_DL_CPU = 1
K_DL_CUDA = 2
# DLDataTypeCode
K_DL_INT = 0
K_DL_UINT = 1
K_DL_FLOAT = 2
K_DL_BFLOAT = 4


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


_Deleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", _Deleter)]

_lock = threading.Lock()
_alive = {}  # address of a DLManagedTensor -> what it keeps alive
_NAME = b"dltensor"

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]


@_Deleter
def _delete(managed):
    with _lock:
        _alive.pop(ctypes.addressof(managed.contents), None)


def alive():
    """How many exported tensors still hold their owners (tests)."""
    with _lock:
        return len(_alive)


def capsule(ptr, shape, strides, code, bits, device_type, device_id, owner):
    """A "dltensor" capsule over `ptr` (shape and strides in elements) that keeps
    `owner` alive until the consumer's tensor is freed."""
    n = len(shape)
    shape_arr = (c_int64 * n)(*shape)
    strides_arr = (c_int64 * n)(*strides)
    m = DLManagedTensor()
    m.dl_tensor.data = ptr
    m.dl_tensor.device = DLDevice(device_type, device_id)
    m.dl_tensor.ndim = n
    m.dl_tensor.dtype = DLDataType(code, bits, 1)
    m.dl_tensor.shape = shape_arr
    m.dl_tensor.strides = strides_arr
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _delete
    with _lock:
        _alive[ctypes.addressof(m)] = (m, shape_arr, strides_arr, owner)
    return _capsule_new(ctypes.addressof(m), _NAME, None)


def to_torch(torch, ptr, shape, strides, code, bits, device_type, device_id, owner):
    """A torch tensor over the memory (no copy)."""
    cap = capsule(ptr, shape, strides, code, bits, device_type, device_id, owner)
    try:
        return torch.utils.dlpack.from_dlpack(cap)
    except BaseException:
        with _lock:  # never consumed: nobody will call the deleter
            _alive.pop(_capsule_pointer(cap, _NAME), None)
        raise


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
