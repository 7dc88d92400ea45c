"""Real ranks from Python: megajit's NCCL communicator from a torch.distributed
process group, for SymmBuffer.create_nccl (one process per GPU).

    import torch.distributed as dist
    dist.init_process_group("nccl")          # or "gloo": the group only carries the id
    torch.cuda.set_device(local_rank)
    rt = megajit.Runtime()
    comm = megajit.distributed.nccl_communicator()      # collective
    buf = megajit.SymmBuffer.create_nccl(rt, cfg.symm_config(), comm)   # collective
    ...
    buf.close(); comm.close()                 # both collective, in this order

Rank 0 of the group draws an ncclUniqueId, the group broadcasts it, and every
rank calls ncclCommInitRank on its device. libnccl.so.2 is found as megajit
finds it (MEGAJIT_NCCL_LIB, else the one already loaded, which is PyTorch's:
PyTorch, when installed, is imported first; else CUDA_HOME and
/usr/local/cuda), so both use the same library.
"""

import contextlib
import ctypes
import os

from . import _torch
from .errors import Error, Status, invalid

NCCL_UNIQUE_ID_BYTES = 128


class NcclUniqueId(ctypes.Structure):
    """ncclUniqueId: 128 opaque bytes, passed by value to ncclCommInitRank."""

    _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]


class NcclError(Error):
    """An NCCL call failed (status MJ_ERR_CUDA) or NCCL is missing (MJ_ERR_UNSUPPORTED)."""


_nccl = None


def _candidates():
    explicit = os.environ.get("MEGAJIT_NCCL_LIB")
    if explicit:
        return [explicit]  # as megajit: an explicit choice never falls back
    out = ["libnccl.so.2"]
    torch = _torch.loaded()
    if torch is not None:  # PyTorch wheels keep it in site-packages/nvidia/nccl/lib
        site = os.path.dirname(os.path.dirname(torch.__file__))
        out.append(os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so.2"))
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            out.append(os.path.join(home, "lib64", "libnccl.so.2"))
    return out


def nccl_library():
    """libnccl.so.2 through ctypes (loaded once); NcclError when it cannot be found."""
    global _nccl
    if _nccl is not None:
        return _nccl
    # PyTorch links its own libnccl.so.2: loading another copy first would leave
    # PyTorch bound to it (undefined symbols at `import torch`), so PyTorch, when
    # installed, is imported first and its copy is the one found by name.
    try:
        _torch.require("NCCL")
    except ImportError:
        pass
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
        lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, NcclUniqueId, ctypes.c_int]
        lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        lib.ncclGetErrorString.argtypes = [ctypes.c_int]
        lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        if path != "libnccl.so.2" and not os.environ.get("MEGAJIT_NCCL_LIB"):
            os.environ["MEGAJIT_NCCL_LIB"] = path  # so megajit's own loader takes this one too
        _nccl = lib
        return lib
    raise NcclError(
        "NCCL not found: " + "; ".join(errors) + " (install NCCL >= 2.18 or set MEGAJIT_NCCL_LIB)",
        Status.ERR_UNSUPPORTED,
    )


def _nccl_check(lib, result, what):
    if result != 0:
        msg = lib.ncclGetErrorString(result)
        raise NcclError(f"{what}: NCCL error {result} ({msg.decode() if msg else '?'})", Status.ERR_CUDA)


def nccl_version():
    """NCCL's version code (22703 = 2.27.3)."""
    lib = nccl_library()
    v = ctypes.c_int()
    _nccl_check(lib, lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value


def unique_id():
    """A fresh ncclUniqueId as 128 bytes (rank 0's part of building a communicator)."""
    lib = nccl_library()
    uid = NcclUniqueId()
    _nccl_check(lib, lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    return ctypes.string_at(ctypes.addressof(uid), NCCL_UNIQUE_ID_BYTES)


class NcclCommunicator:
    """An ncclComm_t this process owns: `.handle` (its address, what
    mj_symm_buffer_create_nccl takes), `.rank`, `.size`, `.device`. close() (or a
    `with` block) destroys it; close every buffer made over it first."""

    def __init__(self, handle, rank, size, device):
        self.handle = handle
        self.rank = rank
        self.size = size
        self.device = device

    @classmethod
    def init_rank(cls, uid, size, rank, device=None):
        """ncclCommInitRank on `device` (default: PyTorch's current device) with the
        128-byte id every rank shares. Collective over the `size` ranks."""
        if not isinstance(uid, (bytes, bytearray)) or len(uid) != NCCL_UNIQUE_ID_BYTES:
            raise invalid(f"megajit: an ncclUniqueId is {NCCL_UNIQUE_ID_BYTES} bytes")
        if not 0 <= rank < size:
            raise invalid(f"megajit: rank {rank} outside 0..{size - 1}")
        lib = nccl_library()
        nid = NcclUniqueId()
        ctypes.memmove(ctypes.addressof(nid), bytes(uid), NCCL_UNIQUE_ID_BYTES)
        comm = ctypes.c_void_p()
        torch = _torch.loaded()
        on_device = contextlib.nullcontext()
        if torch is not None and torch.cuda.is_available():
            device = torch.cuda.current_device() if device is None else device
            on_device = torch.cuda.device(device)
        with on_device:
            _nccl_check(lib, lib.ncclCommInitRank(ctypes.byref(comm), size, nid, rank), "ncclCommInitRank")
        return cls(comm.value, rank, size, device)

    def close(self):
        """ncclCommDestroy (once)."""
        if self.handle:
            lib = nccl_library()
            h, self.handle = self.handle, None
            lib.ncclCommDestroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<megajit NCCL communicator rank {self.rank}/{self.size} device {self.device}>"


def nccl_communicator(group=None, device=None):
    """An NcclCommunicator spanning the torch.distributed process group `group`
    (default: the world), this process being its rank there: group rank 0 draws
    the unique id, the group broadcasts it (any backend: gloo or nccl), and every
    rank initializes the communicator on `device` (default: PyTorch's current
    device). Collective: every rank of the group calls it."""
    torch = _torch.require("megajit.distributed.nccl_communicator")
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        raise invalid("megajit: torch.distributed is not initialized (call dist.init_process_group first)")
    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    src = 0 if group is None else dist.get_global_rank(group, 0)
    box = [unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=src, group=group)
    return NcclCommunicator.init_rank(box[0], size, rank, device)
