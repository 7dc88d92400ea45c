"""megajit.SymmBuffer: the symmetric buffer pre-dispatch writes into and MegaMoE
reads from, with its regions as zero-copy views."""

import ctypes
import dataclasses

from . import _capi, _dlpack, _lib, _torch
from ._args import c_int, c_struct, config_of, enum_member
from ._capi import Dtype, Format, ViewId
from ._handle import Owner
from .errors import check, invalid
from .runtime import parse_format


@dataclasses.dataclass(frozen=True)
class SymmConfig:
    """What a symmetric buffer is sized for (mj_symm_config).

    hidden: H. num_experts: global expert count. num_topk: K.
    max_tokens_per_rank: T_max, rows of each rank's input region.
    dispatch_format: the format pre-dispatch quantizes tokens into.
    num_ranks: ranks emulated in this process, or the NCCL communicator's size.
    intermediate: the MegaMoE expert size I; 0 = a buffer for pre-dispatch only.
    shared_intermediate: the layer's fused shared expert's size (MoEConfig's; 0 =
      none): the buffer then also holds its token tiles and combine slot.
    """

    hidden: int
    num_experts: int
    num_topk: int
    max_tokens_per_rank: int
    dispatch_format: Format = Format.BF16
    num_ranks: int = 1
    intermediate: int = 0
    shared_intermediate: int = 0

    def _c(self):
        return c_struct(_capi.SymmConfig, self, dispatch_format=int(parse_format(self.dispatch_format)))


# Per dtype: the array-interface type string (BF16 and E4M3 have none, so the
# interface shows them as same-sized integers), the item size, and the DLPack
# type code (E4M3 travels as bytes, reinterpreted after).
_DTYPES = {
    Dtype.U8: ("|u1", 1, _dlpack.K_DL_UINT),
    Dtype.E4M3: ("|u1", 1, _dlpack.K_DL_UINT),
    Dtype.BF16: ("<u2", 2, _dlpack.K_DL_BFLOAT),
    Dtype.I32: ("<i4", 4, _dlpack.K_DL_INT),
    Dtype.F32: ("<f4", 4, _dlpack.K_DL_FLOAT),
}


class View:
    """One region of one rank of a SymmBuffer (mj_view): device memory inside this
    process, valid while the buffer is open.

    ptr, dtype (megajit.Dtype), shape, row_stride_bytes, nbytes as the C struct.
    `__cuda_array_interface__` makes it usable by any CUDA array library;
    tensor() gives a zero-copy torch tensor of the view's dtype and shape.

    Layouts (the dispatch format's): X is [P, H] BF16, [P, H] E4M3 (MXFP8), or
    [P, H / 2] bytes of E2M1 pairs (MXFP4, NVFP4: element 2b in the low nibble of
    byte b, 2b + 1 in the high nibble). X_SF is [P, H / group] scale bytes, byte g
    of a row scaling elements g * group .. g * group + group - 1 (UE8M0, group 32,
    for MXFP8/MXFP4; UE4M3, group 16, for NVFP4). X_SCALES ([P] fp32, NVFP4) is
    each token's per-token scale: element = E2M1 x UE4M3 x x_scales[t].
    TOPK_IDX [P, K] int32 (-1 = masked) and TOPK_WEIGHTS [P, K] fp32.
    """

    def __init__(self, buffer, rank, view_id, raw):
        self.buffer = buffer
        self.rank = rank
        self.id = ViewId(view_id)
        self.ptr = raw.ptr or 0
        self.dtype = Dtype(raw.dtype)
        self.shape = tuple(raw.shape[i] for i in range(raw.ndim))
        self.row_stride_bytes = raw.row_stride_bytes
        self.nbytes = raw.nbytes

    @property
    def __cuda_array_interface__(self):
        typestr, size, _ = _DTYPES[self.dtype]
        shape, strides = self._layout()
        strides = tuple(s * size for s in strides) if len(shape) == 2 else None
        return {
            "shape": shape,
            "typestr": typestr,
            "data": (self.ptr, False),
            "strides": strides,
            "version": 3,
            "stream": None,
        }

    def _layout(self):
        """(shape, strides) in elements."""
        size = _DTYPES[self.dtype][1]
        if len(self.shape) == 2:
            return (self.shape[0], self.row_stride_bytes // size), (self.row_stride_bytes // size, 1)
        return self.shape, (1,)

    def _export(self):
        """The arguments of a DLPack export of the view (megajit._dlpack.capsule)."""
        _, size, code = _DTYPES[self.dtype]
        shape, strides = self._layout()
        return (self.ptr, shape, strides, code, 8 * size, *self.__dlpack_device__(), self)

    def __dlpack__(self, stream=None, **_):
        """DLPack export (a legacy "dltensor" capsule): the memory is ready, so the
        consumer's stream needs no wait. E4M3 is exported as uint8."""
        return _dlpack.capsule(*self._export())

    def __dlpack_device__(self):
        return (_dlpack.K_DL_CUDA, self.buffer.runtime.device_index or 0)

    def tensor(self):
        """A torch tensor over the view's memory (no copy, through DLPack), of its
        dtype and shape. Writing into it writes the buffer. The tensor keeps the
        view (and so the buffer object) alive, but not an explicitly closed
        buffer's memory."""
        torch = _torch.require("View.tensor()")
        t = _dlpack.to_torch(torch, *self._export())
        want = _torch.view_dtype(torch, self.dtype)
        return t if t.dtype == want else t.view(want)

    def __repr__(self):
        return (
            f"<megajit.View {self.id.name} rank {self.rank}: {self.dtype.name} {list(self.shape)} "
            f"at 0x{self.ptr:x}>"
        )


class SymmBuffer(Owner):
    """A symmetric buffer (mj_symm_buffer): every rank's input region (tokens in the
    dispatch format, top-k ids and weights) and, with intermediate > 0, the
    regions MegaMoE works in. Made with SymmBuffer.create (one process: one rank
    or emulated ranks) or SymmBuffer.create_nccl (one process per GPU)."""

    _kind = "symm_buffer"

    def __init__(self, runtime, raw_ptr, comm=None):
        self.runtime = runtime
        self._comm = comm  # the communicator must outlive the buffer
        self._own(raw_ptr, _lib.load().mj_symm_buffer_destroy, parent=runtime)
        self._read_info()

    @classmethod
    def create(cls, runtime, config=None, **fields):
        """A buffer of one allocation holding config.num_ranks rank regions, zeroed.
        `config` is a SymmConfig, or give its fields as keywords. Records the
        MegaMoE family's SM count now: set runtime.families["mega_moe"].num_sms first."""
        cfg = config_of(SymmConfig, config, fields)._c()
        out = ctypes.c_void_p()
        check(_lib.load().mj_symm_buffer_create(runtime._handle(), ctypes.byref(cfg), ctypes.byref(out)))
        return cls(runtime, out.value)

    @classmethod
    def create_nccl(cls, runtime, config=None, comm=None, **fields):
        """One process per GPU: a collective over `comm` (a megajit.distributed
        NcclCommunicator, or an ncclComm_t address as an int) whose size is
        config.num_ranks; this process is its rank. Every rank calls it with the same
        config; destroying the buffer is collective too (close() it on every rank
        before the communicator). See megajit.distributed.nccl_communicator."""
        if comm is None:
            raise invalid("megajit: create_nccl needs comm (an NCCL communicator)")
        handle = getattr(comm, "handle", comm)
        if handle is None:
            raise invalid("megajit: the NCCL communicator is closed")
        handle = c_int(handle, "comm", lo=1, hi=2**64 - 1)
        cfg = config_of(SymmConfig, config, fields)._c()
        out = ctypes.c_void_p()
        check(
            _lib.load().mj_symm_buffer_create_nccl(
                runtime._handle(), ctypes.byref(cfg), ctypes.c_void_p(handle), ctypes.byref(out)
            )
        )
        return cls(runtime, out.value, comm)

    def _read_info(self):
        cfg = _capi.SymmConfig()
        sms = ctypes.c_int()
        per_rank = ctypes.c_size_t()
        check(
            _lib.load().mj_symm_buffer_info(
                self._handle(), ctypes.byref(cfg), ctypes.byref(sms), ctypes.byref(per_rank)
            )
        )
        self.config = _capi.as_plain(SymmConfig, cfg, dispatch_format=Format(cfg.dispatch_format))
        self.num_sms = sms.value
        self.bytes_per_rank = per_rank.value

    def info(self):
        """(config, num_sms, bytes_per_rank) as mj_symm_buffer_info reports them."""
        self._read_info()
        return self.config, self.num_sms, self.bytes_per_rank

    def view(self, view_id, rank=0):
        """megajit.View of one region of `rank` (ViewId or "x", "x_sf", "topk_idx",
        "topk_weights", "x_scales"). NotFound when the format has no such region."""
        if isinstance(view_id, str):
            view_id = enum_member(ViewId, view_id, "view")
        raw = _capi.View()
        check(
            _lib.load().mj_symm_buffer_view(
                self._handle(), c_int(rank, "rank"), c_int(view_id, "view"), ctypes.byref(raw)
            )
        )
        return View(self, rank, view_id, raw)

    def tensor(self, view_id, rank=0):
        """view(view_id, rank).tensor(): a zero-copy torch tensor of the region."""
        return self.view(view_id, rank).tensor()

    def pre_dispatch(self, x, topk_ids, topk_weights, rank=0, expert_scales=None, stream=None):
        """Quantizes BF16 tokens x [T, H] with top-k ids [T, K] (int32, -1 = masked)
        and weights [T, K] (fp32) into `rank`'s input region (mj_pre_dispatch), on
        `stream` (default: PyTorch's current stream). expert_scales: fp32
        [num_experts] or None, multiplying each valid slot's weight. Every tensor
        must be a contiguous CUDA tensor on the runtime's device; T may be 0.
        After it, rows T..T_max-1 hold ids -1 and weights 0; masked slots of
        rows < T keep -1 and their weight as given; X rows >= T are left as
        they were. With check_device_inputs, an id outside [-1, num_experts)
        raises InvalidArgument (nothing is written either way)."""
        torch = _torch.require("SymmBuffer.pre_dispatch")
        c = self.config
        dev = self.runtime.device_index
        n = x.shape[0] if isinstance(x, torch.Tensor) and x.dim() == 2 else None
        if n is not None and n > c.max_tokens_per_rank:
            raise invalid(
                f"megajit: {n} tokens but the buffer holds {c.max_tokens_per_rank} per rank"
            )
        xp = _torch.check_cuda(torch, x, "x", torch.bfloat16, (n, c.hidden), dev)
        ip = _torch.check_cuda(torch, topk_ids, "topk_ids", torch.int32, (n, c.num_topk), dev)
        wp = _torch.check_cuda(torch, topk_weights, "topk_weights", torch.float32, (n, c.num_topk), dev)
        sp = 0
        if expert_scales is not None:
            sp = _torch.check_cuda(
                torch, expert_scales, "expert_scales", torch.float32, (c.num_experts,), dev
            )
        check(
            _lib.load().mj_pre_dispatch(
                self.runtime._handle(),
                self._handle(),
                c_int(rank, "rank"),
                xp or None,
                ip or None,
                wp or None,
                sp or None,
                n,
                _torch.stream_handle(stream, dev),
            )
        )

    def pre_dispatch_raw(self, x, topk_ids, topk_weights, num_tokens, rank=0, expert_scales=0, stream=0):
        """mj_pre_dispatch on raw device addresses (ints; 0 = NULL), for callers
        without PyTorch (CuPy, Numba). Unchecked beyond what the C API checks."""
        check(
            _lib.load().mj_pre_dispatch(
                self.runtime._handle(),
                self._handle(),
                c_int(rank, "rank"),
                c_int(x, "x", 0, 2**64 - 1) or None,
                c_int(topk_ids, "topk_ids", 0, 2**64 - 1) or None,
                c_int(topk_weights, "topk_weights", 0, 2**64 - 1) or None,
                c_int(expert_scales, "expert_scales", 0, 2**64 - 1) or None,
                c_int(num_tokens, "num_tokens"),
                _torch.stream_handle(stream, None),
            )
        )

    def __repr__(self):
        if self.closed:
            return "<megajit.SymmBuffer (closed)>"
        return f"<megajit.SymmBuffer {self.config} num_sms={self.num_sms}>"
