"""The DLPack export behind SymmBuffer views (View.tensor()), on host memory:
zero-copy, the right dtype and shape, the owner kept alive exactly as long as
the tensor (the GPU test checks the same on device views)."""

import ctypes
import gc
import weakref

import pytest

from conftest import torch_or_skip

from megajit import _dlpack


class Owner:
    pass


@pytest.mark.parametrize("code,bits,dtype_name", [
    (_dlpack.K_DL_BFLOAT, 16, "bfloat16"),
    (_dlpack.K_DL_UINT, 8, "uint8"),
    (_dlpack.K_DL_INT, 32, "int32"),
    (_dlpack.K_DL_FLOAT, 32, "float32"),
])
def test_host_memory_round_trip(code, bits, dtype_name):
    torch = torch_or_skip()
    rows, cols = 3, 8
    mem = (ctypes.c_uint8 * (rows * cols * bits // 8))()
    owner = Owner()
    owner.mem = mem
    ref = weakref.ref(owner)
    before = _dlpack.alive()
    t = _dlpack.to_torch(torch, ctypes.addressof(mem), (rows, cols), (cols, 1), code, bits,
                         _dlpack.K_DL_CPU, 0, owner)
    assert t.dtype == getattr(torch, dtype_name) and tuple(t.shape) == (rows, cols)
    assert t.data_ptr() == ctypes.addressof(mem)
    assert not any(mem)
    t[1, 2] = 3
    size = bits // 8
    at = (1 * cols + 2) * size
    assert any(mem[at:at + size]) and not any(mem[:at]) and not any(mem[at + size:])  # written in place
    del owner
    gc.collect()
    assert ref() is not None and _dlpack.alive() == before + 1  # the tensor keeps it
    del t
    gc.collect()
    assert ref() is None and _dlpack.alive() == before


def test_one_dimensional():
    torch = torch_or_skip()
    mem = (ctypes.c_float * 5)(*range(5))
    t = _dlpack.to_torch(torch, ctypes.addressof(mem), (5,), (1,), _dlpack.K_DL_FLOAT, 32,
                         _dlpack.K_DL_CPU, 0, mem)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
