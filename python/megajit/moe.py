"""megajit.MegaMoE: one MoE layer's experts (one rank's), pre-dispatch + the
MegaMoE kernel behind one forward() call with PyTorch tensors."""

import ctypes
import dataclasses
import sys
from typing import Optional

from . import _capi, _lib, _torch
from ._args import c_float, c_int, c_struct, config_of, enum_member
from ._capi import Activation, Format, Projection
from ._handle import Owner
from .buffer import SymmBuffer, SymmConfig
from .errors import check, invalid, make_error
from .runtime import format_name, parse_format

# Supported (weight, dispatch) pairs -> the format GEMM 2's input is quantized
# into (megajit.h, heuristics/moe_formats.c), by the row names of docs/mega-moe.md.
FORMAT_ROWS = {
    "bf16": (Format.BF16, Format.BF16, Format.BF16),
    "mxfp8": (Format.MXFP8, Format.MXFP8, Format.MXFP8),
    "mxfp4-a8": (Format.MXFP4, Format.MXFP8, Format.MXFP8),
    "mxfp4-a16": (Format.MXFP4, Format.BF16, Format.BF16),
    "nvfp4": (Format.NVFP4, Format.NVFP4, Format.NVFP4),
    "nvfp4-a16": (Format.NVFP4, Format.BF16, Format.BF16),
}

# The activation's parameters (mj_moe_config), 0 = standard.
_ACT_PARAMS = ("swiglu_alpha", "swiglu_beta", "situ_gate_beta", "situ_up_beta")

_GROUP = {Format.BF16: 0, Format.MXFP8: 32, Format.MXFP4: 32, Format.NVFP4: 16}
_BITS = {Format.BF16: 16, Format.MXFP8: 8, Format.MXFP4: 4, Format.NVFP4: 4}


@dataclasses.dataclass(frozen=True)
class MoEConfig:
    """One MoE layer as one rank sees it (mj_moe_config).

    hidden: H, a multiple of 64 up to 8192. intermediate: I, a multiple of 64.
    num_experts: global E, a multiple of num_ranks. num_topk: K.
    max_tokens_per_rank: tokens per rank a forward() may take (the buffer's T_max).
    weight_format, dispatch_format: one of the pairs of FORMAT_ROWS (names or
    megajit.Format). activation: "swiglu", "swigluoai" or "situ". clamp: > 0
    clamps the swiglu family (NUMERICS.md step 3). num_ranks, rank: expert
    parallelism; this rank holds experts rank*E/R .. (rank+1)*E/R - 1.
    block_m: 0 = the heuristics choose per token count; 8/16/32/64/128/160 forced,
      at most 160 for the MXFP4 and NVFP4 weight rows without a shared expert
      (nor, for mxfp4-a8, expert biases), 128 otherwise (include/megajit.h, mj_moe_config.block_m).
    unfold_mx_scales: no effect (mj_moe_config.unfold_mx_scales): every row
      applies MX weight scales exactly; kept so callers that pass it still run.
    swiglu_alpha, swiglu_beta: swiglu's h = g * sigmoid(alpha * g), v = u + beta
      (0 = standard: alpha 1, beta 0; swigluoai is swiglu at 1.702 and 1).
      situ_gate_beta, situ_up_beta: situ's h = bg * tanh(g / bg) * sigmoid(g),
      v = bu * tanh(u / bu) (0 = standard: 4 and 25). Kernel constants
      (NUMERICS.md step 4); another activation's parameters must stay 0
      (mj_moe_config).
    expert_biases: the experts have biases (gpt-oss), loaded with
      MegaMoE.load_bias (mj_moe_config.expert_biases; compiled into the kernels).
    shared_intermediate, shared_format: a shared expert fused into the layer
      (DeepSeek-V3), loaded with MegaMoE.load_shared: its intermediate size, a
      multiple of intermediate, and its weights' format (a name or megajit.Format;
      None with shared_intermediate 0: no shared expert). Every rank runs it on each
      of its own tokens from their dispatched rows, with routing weight 1, alphas 1,
      no biases and the layer's activation, clamp and GEMM 2 input format, and adds
      its output after the routed slots (NUMERICS.md step 8). The formats it fuses
      in per row (mj_moe_config): bf16 -> bf16; mxfp8, mxfp4-a8, mxfp4-a16 -> mxfp8;
      nvfp4, nvfp4-a16 -> mxfp8 or bf16 (InvalidArgument for others); the kernel runs
      every one, bf16 beside nvfp4 where hidden and intermediate are multiples of 128
      (Unsupported otherwise).
    """

    hidden: int
    intermediate: int
    num_experts: int
    num_topk: int
    max_tokens_per_rank: int
    weight_format: Format = Format.BF16
    dispatch_format: Format = Format.BF16
    activation: Activation = Activation.SWIGLU
    clamp: float = 0.0
    num_ranks: int = 1
    rank: int = 0
    block_m: int = 0
    unfold_mx_scales: bool = False
    swiglu_alpha: float = 0.0
    swiglu_beta: float = 0.0
    situ_gate_beta: float = 0.0
    situ_up_beta: float = 0.0
    expert_biases: bool = False
    shared_intermediate: int = 0
    shared_format: Optional[Format] = None

    @classmethod
    def for_row(cls, row, **fields):
        """A config for a format row by name ("mxfp4-a8"; FORMAT_ROWS)."""
        if row not in FORMAT_ROWS:
            raise invalid(f"megajit: unknown format row {row!r} (known: {', '.join(FORMAT_ROWS)})")
        w, d, _ = FORMAT_ROWS[row]
        return cls(weight_format=w, dispatch_format=d, **fields)

    @property
    def local_experts(self):
        """Experts this rank holds: num_experts / num_ranks."""
        return self.num_experts // max(1, self.num_ranks)

    @property
    def l2_format(self):
        """The format GEMM 2's input is quantized into (None for an unsupported pair)."""
        pair = (parse_format(self.weight_format), parse_format(self.dispatch_format))
        for w, d, l2 in FORMAT_ROWS.values():
            if (w, d) == pair:
                return l2
        return None

    def symm_config(self):
        """The SymmConfig of the buffer this layer runs in."""
        return SymmConfig(
            hidden=self.hidden,
            num_experts=self.num_experts,
            num_topk=self.num_topk,
            max_tokens_per_rank=self.max_tokens_per_rank,
            dispatch_format=parse_format(self.dispatch_format),
            num_ranks=self.num_ranks,
            intermediate=self.intermediate,
            shared_intermediate=self.shared_intermediate,
        )

    def block_m_for(self, num_tokens):
        """The BLOCK_M (tokens per tile) a launch with num_tokens per rank uses
        (mj_mega_moe_block_m; no GPU needed). InvalidArgument for a bad config."""
        out = ctypes.c_int()
        check(
            _lib.load().mj_mega_moe_block_m(
                ctypes.byref(self._c()), c_int(num_tokens, "num_tokens"), ctypes.byref(out)
            )
        )
        return out.value

    def _c(self):
        params = {name: c_float(getattr(self, name), name) for name in _ACT_PARAMS}
        for name, value in params.items():
            if value != 0 and ctypes.c_float(value).value == 0:
                raise invalid(f"megajit: {name} {value} rounds to 0 as a float (0 means the standard value)")
        # In C, shared_format 0 is both "unset" and bf16: only here can a format without
        # a shared expert, or a shared expert without a format, be told apart.
        has_shared = c_int(self.shared_intermediate, "shared_intermediate") != 0
        shared_format = None if self.shared_format is None else parse_format(self.shared_format)
        if shared_format is not None and not has_shared:
            raise invalid(f"megajit: shared_format {format_name(shared_format)}: there is no shared expert "
                          "(shared_intermediate is 0; leave shared_format None)")
        if has_shared and shared_format is None:
            raise invalid(f"megajit: shared_intermediate {self.shared_intermediate} needs shared_format "
                          "(the shared expert's weight format)")
        return c_struct(
            _capi.MoeConfig,
            self,
            weight_format=int(parse_format(self.weight_format)),
            dispatch_format=int(parse_format(self.dispatch_format)),
            activation=int(enum_member(Activation, self.activation, "activation")),
            clamp=c_float(self.clamp, "clamp"),
            shared_format=int(shared_format) if has_shared else 0,
            **params,
        )


def first_token_counts(block_m, top):
    """{BLOCK_M: the first token count in 0..top that picks it} for block_m(t), a
    pick that never decreases with t: each next value starts at the first count
    past the current one's, found by bisection (a few calls, not top + 1)."""
    first, t = {}, 0
    while t <= top:
        current = block_m(t)
        first[current] = t
        lo, hi = t, top + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if block_m(mid) == current else (lo, mid)
        t = hi
    return first


def _require_float32(obj, name):
    """InvalidArgument unless host buffer obj holds float32 values in this machine's
    byte order (numpy float32, array('f'), ctypes c_float arrays); other objects are
    left to _host_pointer, which says what it takes."""
    try:
        fmt = memoryview(obj).format
    except TypeError:
        return
    native = "<" if sys.byteorder == "little" else ">"
    if fmt.lstrip("@=" + native) != "f":
        raise invalid(f"megajit: {name} must hold float32 values, got buffer format {fmt!r}")


def _host_pointer(obj, name, nbytes, keep):
    """Address of a host buffer-protocol object of exactly nbytes (copied when read-only)."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"megajit: {name} must be a torch.Tensor or a host buffer (numpy array, bytes), "
            f"not {type(obj).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise invalid(f"megajit: {name} must be C-contiguous")
    mv = mv.cast("B")
    if mv.nbytes != nbytes:
        raise invalid(f"megajit: {name} has {mv.nbytes} bytes, expected {nbytes}")
    data = bytearray(mv) if mv.readonly else mv
    keep.append(data)
    return ctypes.addressof((ctypes.c_char * nbytes).from_buffer(data))


class MegaMoE(Owner):
    """One rank's MegaMoE layer: its expert weights (mj_weights) in the kernel's
    layout and the symmetric buffer it runs in.

    MegaMoE(rt, config) with num_ranks = 1 makes its own buffer; with more ranks
    pass `buffer=`: SymmBuffer.create_nccl(...) for one process per GPU, or one
    SymmBuffer.create(...) shared by the MegaMoE of every emulated rank. Load
    every projection of every local expert (load / load_experts), then warmup()
    before serving or capturing CUDA graphs, then forward().
    """

    _kind = "weights"

    def __init__(self, runtime, config=None, buffer=None, **fields):
        config = config_of(MoEConfig, config, fields)
        lib = _lib.load()
        self.runtime = runtime
        self.config = config
        self._cfg = config._c()
        out = ctypes.c_void_p()
        check(lib.mj_weights_create(runtime._handle(), ctypes.byref(self._cfg), ctypes.byref(out)))
        self._own(out.value, lib.mj_weights_destroy, parent=runtime)
        self._owns_buffer = buffer is None
        try:
            if buffer is None:
                if config.num_ranks != 1:
                    raise invalid(
                        "megajit: a MegaMoE of several ranks needs buffer= (SymmBuffer.create_nccl "
                        "for one process per GPU, or one SymmBuffer.create shared by emulated ranks)"
                    )
                buffer = SymmBuffer.create(runtime, config.symm_config())
            elif not isinstance(buffer, SymmBuffer):
                raise TypeError(f"megajit: buffer must be a megajit.SymmBuffer, not {type(buffer).__name__}")
            elif buffer.config != config.symm_config():
                raise invalid(
                    f"megajit: the buffer was made for {buffer.config} but this layer needs "
                    f"{config.symm_config()}"
                )
        except BaseException:
            self.close()
            raise
        self.buffer = buffer
        self._moe = lib.mj_mega_moe
        self._forward_c = lib.mj_moe_forward
        self._loaded = set()
        self._fast = None  # what forward reads on every call, made at its first call

    def close(self):
        """Frees the weights and, when this layer made it, its buffer."""
        super().close()
        buf = getattr(self, "buffer", None)
        if buf is not None and self._owns_buffer:
            buf.close()

    # ---------------------------------------------------------- weights

    def load(self, expert, projection, weight, scales=None):
        """Loads one projection of local expert `expert` (0 .. E/R - 1) from the
        checkpoint layout (mj_weights_load): `weight` row-major [out, in] with
        gate/up [I, H] and down [H, I]:
          bf16: torch.bfloat16 [out, in]
          mxfp8: torch.float8_e4m3fn (or uint8 bytes) [out, in]
          mxfp4, nvfp4: uint8 [out, in / 2], E2M1 pairs, the even element in the low nibble
        `scales` [out, in / group]: UE8M0 bytes (uint8 or torch.float8_e8m0fnu) per 32
        for the MX formats, UE4M3 (uint8 or torch.float8_e4m3fn) per 16 for NVFP4,
        None for bf16. Tensors may be on the CPU or on the runtime's GPU (both the
        same), or host buffers (numpy). Returns when the image is written: the
        sources may be freed (device sources are read after every pending
        operation of the context, cuCtxSynchronize). Not during graph capture."""
        self._load(c_int(expert, "expert", 0, self.config.local_experts - 1), projection, weight, scales)

    def load_shared(self, projection, weight, scales=None):
        """Loads one projection of the layer's shared expert (mj_weights_load_shared;
        MoEConfig.shared_intermediate) as load() loads a routed expert's: gate/up
        [I_s, H], down [H, I_s] with I_s = shared_intermediate, in shared_format
        (mxfp8: E4M3 data and UE8M0 scales [out, in / 32]; bf16: no scales), same
        sources, same synchronization. The shared expert has no alphas or biases.
        Every projection must be loaded before forward()."""
        # Before the sources are checked: without a shared expert there is no format or
        # shape to check them against.
        if not self.config.shared_intermediate:
            raise invalid("megajit: this layer has no shared expert "
                          "(MoEConfig(shared_intermediate=..., shared_format=...))")
        self._load(None, projection, weight, scales)

    def _load(self, e, projection, weight, scales):
        """load of local expert e (checked), or load_shared for e None."""
        proj = enum_member(Projection, projection, "projection (gate, up or down)")
        c, shared = self.config, e is None
        fmt = parse_format(c.shared_format if shared else c.weight_format)
        h, i = c.hidden, c.shared_intermediate if shared else c.intermediate
        rows, cols = (h, i) if proj == Projection.DOWN else (i, h)
        group = _GROUP[fmt]
        whose = "shared " if shared else ""
        keep = []
        wp, w_dev = self._source(weight, f"{whose}{proj.name.lower()} weight", fmt, rows, cols, None, keep)
        sp, s_dev = 0, w_dev
        if group and scales is None:
            raise invalid(f"megajit: {whose}{format_name(fmt)} weights need scales [{rows}, {cols // group}]")
        if not group and scales is not None:
            raise invalid(f"megajit: {whose}bf16 weights take no scales")
        if scales is not None:
            sp, s_dev = self._source(scales, f"{whose}{proj.name.lower()} scales", fmt, rows, cols // group,
                                     "scales", keep)
        if w_dev != s_dev:
            raise invalid("megajit: weight and scales must both be on the GPU or both on the CPU")
        lib, dev = _lib.load(), 1 if w_dev else 0
        if shared:
            check(lib.mj_weights_load_shared(self._handle(), int(proj), wp or None, sp or None, dev))
        else:
            check(lib.mj_weights_load(self._handle(), e, int(proj), wp or None, sp or None, dev))
        self._loaded.add((e, proj))

    def load_bias(self, expert, projection, bias):
        """Loads the bias of one projection of local expert `expert` (mj_weights_load_bias;
        config.expert_biases): float32 [intermediate] for "gate" and "up", [hidden] for
        "down", finite; a torch tensor on the CPU or the runtime's GPU, or a host buffer.
        Where it enters: gate and up join the scaled GEMM 1 accumulator before its BF16
        rounding; down, times each pair's routing weight, joins GEMM 2's before its rounding.
        Zero until loaded; a reload needs no recompile. Not during graph capture."""
        e = c_int(expert, "expert", 0, self.config.local_experts - 1)
        proj = enum_member(Projection, projection, "projection (gate, up or down)")
        n = self.config.hidden if proj == Projection.DOWN else self.config.intermediate
        name = f"{proj.name.lower()} bias"
        keep = []
        torch = _torch.loaded()
        if torch is not None and isinstance(bias, torch.Tensor):
            if bias.dtype != torch.float32 or tuple(bias.shape) != (n,) or not bias.is_contiguous():
                raise invalid(f"megajit: {name} must be a contiguous torch.float32 [{n}], got a "
                              f"{_torch.describe(bias)}")
            ptr, dev = self._source_device(bias, name, keep)
        else:
            if hasattr(bias, "__cuda_array_interface__"):
                raise TypeError(f"megajit: {name}: pass device memory as a torch.Tensor")
            _require_float32(bias, name)
            ptr, dev = _host_pointer(bias, name, 4 * n, keep), False
        check(_lib.load().mj_weights_load_bias(self._handle(), e, int(proj), ptr, 1 if dev else 0))

    def _source_device(self, t, name, keep):
        """(address, on_device) of a torch tensor on the CPU or the runtime's GPU."""
        if t.is_cuda:
            dev = self.runtime.device_index
            if dev is not None and t.get_device() != dev:
                raise invalid(f"megajit: {name} is on {t.device} but the runtime uses cuda:{dev}")
            return t.data_ptr(), True
        if t.device.type != "cpu":
            raise invalid(f"megajit: {name} must be on the CPU or a CUDA device, got {t.device}")
        keep.append(t)
        return t.data_ptr(), False

    def _source(self, t, name, fmt, rows, cols, kind, keep):
        """(address, on_device) of a weight or scale source after checking it."""
        torch = _torch.loaded()
        if torch is None or not isinstance(t, torch.Tensor):
            if hasattr(t, "__cuda_array_interface__"):
                raise TypeError(f"megajit: {name}: pass device memory as a torch.Tensor")
            elem_bits = 8 if kind == "scales" else _BITS[fmt]
            return _host_pointer(t, name, rows * cols * elem_bits // 8, keep), False
        if kind == "scales":
            allowed = {torch.uint8}
            allowed.add(torch.float8_e4m3fn if fmt == Format.NVFP4 else getattr(torch, "float8_e8m0fnu", torch.uint8))
            shape = (rows, cols)
        elif fmt == Format.BF16:
            allowed, shape = {torch.bfloat16}, (rows, cols)
        elif fmt == Format.MXFP8:
            allowed, shape = {torch.float8_e4m3fn, torch.uint8}, (rows, cols)
        else:
            allowed = {torch.uint8, getattr(torch, "float4_e2m1fn_x2", torch.uint8)}
            shape = (rows, cols // 2)
        if t.dtype not in allowed:
            names = " or ".join(sorted(str(d) for d in allowed))
            raise invalid(f"megajit: {name} must be {names}, got a {_torch.describe(t)}")
        if tuple(t.shape) != shape:
            raise invalid(f"megajit: {name} must have shape {list(shape)}, got a {_torch.describe(t)}")
        if not t.is_contiguous():
            raise invalid(f"megajit: {name} must be contiguous, got strides {t.stride()}")
        return self._source_device(t, name, keep)

    def load_experts(self, w13, w2, w13_scales=None, w2_scales=None, w13_bias=None, w2_bias=None, *,
                     shared_w13=None, shared_w2=None, shared_w13_scales=None, shared_w2_scales=None):
        """Loads every local expert from stacked tensors in vLLM's layout: w13
        [E/R, 2I, H...] (gate rows 0..I-1, then up), w2 [E/R, H, I...], and their
        scales stacked the same way (None for bf16); element layouts as load().
        With config.expert_biases, w13_bias float32 [E/R, 2I] and w2_bias [E/R, H]
        (load_bias); both or neither. With config.shared_intermediate I_s, the
        shared expert too (load_shared), unstacked: shared_w13 [2 I_s, H...] (gate
        rows, then up) and shared_w2 [H, I_s...], with their scales for mxfp8; both
        or neither (load_shared loads them one by one instead)."""
        n, i = self.config.local_experts, self.config.intermediate
        for name, t in (("w13", w13), ("w2", w2), ("w13_scales", w13_scales), ("w2_scales", w2_scales)):
            if t is not None and (not hasattr(t, "shape") or len(t.shape) != 3 or t.shape[0] != n):
                raise invalid(f"megajit: {name} must be stacked [{n}, ...] (local experts first)")
            if t is not None and 2 * i != t.shape[1] and name.startswith("w13"):
                raise invalid(f"megajit: {name} must have 2 * intermediate = {2 * i} rows per expert")
        i_s = self.config.shared_intermediate
        if (shared_w13 is None) != (shared_w2 is None):
            raise invalid("megajit: pass both shared_w13 and shared_w2, or neither")
        if shared_w13 is None and (shared_w13_scales is not None or shared_w2_scales is not None):
            raise invalid("megajit: shared expert scales without shared_w13 and shared_w2")
        if shared_w13 is not None and not i_s:
            raise invalid("megajit: this layer has no shared expert "
                          "(MoEConfig(shared_intermediate=..., shared_format=...))")
        # Checked before any expert loads: a bad shared tensor leaves nothing half-loaded.
        for name, t in (("shared_w13", shared_w13), ("shared_w13_scales", shared_w13_scales)):
            if t is not None and (not hasattr(t, "shape") or len(t.shape) != 2 or t.shape[0] != 2 * i_s):
                raise invalid(f"megajit: {name} must be [2 * shared_intermediate = {2 * i_s}, ...] "
                              "(gate rows, then up)")
        if (w13_bias is None) != (w2_bias is None):
            raise invalid("megajit: pass both w13_bias and w2_bias, or neither")
        if w13_bias is not None and not self.config.expert_biases:
            raise invalid("megajit: these weights have no biases (MoEConfig(expert_biases=True))")
        torch = _torch.loaded()
        for name, t, width in (("w13_bias", w13_bias, 2 * i), ("w2_bias", w2_bias, self.config.hidden)):
            if t is None:
                continue
            if tuple(getattr(t, "shape", ())) != (n, width):
                raise invalid(f"megajit: {name} must have shape [{n}, {width}]")
            if torch is not None and isinstance(t, torch.Tensor):
                if t.dtype != torch.float32:
                    raise invalid(f"megajit: {name} must be torch.float32, got a {_torch.describe(t)}")
            else:
                _require_float32(t, name)
        for e in range(n):
            s13 = None if w13_scales is None else w13_scales[e]
            self.load(e, "gate", w13[e, :i], None if s13 is None else s13[:i])
            self.load(e, "up", w13[e, i:], None if s13 is None else s13[i:])
            self.load(e, "down", w2[e], None if w2_scales is None else w2_scales[e])
            if w13_bias is not None:  # numpy rows of a C-contiguous array are contiguous already
                rows = (w13_bias[e, :i], w13_bias[e, i:], w2_bias[e])
                for proj, b in zip(("gate", "up", "down"), rows):
                    self.load_bias(e, proj, b.contiguous() if hasattr(b, "contiguous") else b)
        if shared_w13 is not None:
            s13 = shared_w13_scales
            self.load_shared("gate", shared_w13[:i_s], None if s13 is None else s13[:i_s])
            self.load_shared("up", shared_w13[i_s:], None if s13 is None else s13[i_s:])
            self.load_shared("down", shared_w2, shared_w2_scales)

    def set_alphas(self, expert, l1_alpha_gate=1.0, l1_alpha_up=1.0, l2_alpha=1.0, l2_act_scale=1.0):
        """Per-expert fp32 scalars (default 1), kept on the device so changing them needs
        no recompile or graph recapture (mj_weights_set_alphas): l1_alpha_gate and
        l1_alpha_up multiply GEMM 1's gate rows and up rows of this expert (with the
        NVFP4 per-token scale, before the BF16 rounding, NUMERICS.md step 2);
        l2_act_scale multiplies the activation (with the routing weight) before it
        is quantized into GEMM 2's input (step 5); l2_alpha multiplies GEMM 2's
        output rows before their BF16 rounding (step 7). Copied synchronously from
        the host, not ordered with your streams: change them between launches."""
        check(
            _lib.load().mj_weights_set_alphas(
                self._handle(),
                c_int(expert, "expert"),
                c_float(l1_alpha_gate, "l1_alpha_gate"),
                c_float(l1_alpha_up, "l1_alpha_up"),
                c_float(l2_alpha, "l2_alpha"),
                c_float(l2_act_scale, "l2_act_scale"),
            )
        )

    @property
    def loaded(self):
        """Whether every projection of every local expert, and of the shared expert
        when the layer has one, has been loaded."""
        return len(self._loaded) == 3 * (self.config.local_experts + bool(self.config.shared_intermediate))

    # ------------------------------------------------------------ launch

    def block_m(self, num_tokens):
        """The BLOCK_M a launch with num_tokens per rank uses (MoEConfig.block_m_for)."""
        return self.config.block_m_for(num_tokens)

    def warmup(self, max_tokens=None, stream=None):
        """Compiles (or reads from the cache) and loads every kernel forward() can
        use for 0..max_tokens tokens (default: max_tokens_per_rank), so a forward
        never compiles and CUDA-graph capture cannot fail with CaptureError: one
        MegaMoE kernel per BLOCK_M (mj_mega_moe_warmup, nothing runs), and the
        pre-dispatch kernels, by a pre-dispatch of 0 tokens on `stream` (it
        rewrites this rank's top-k rows to -1: call warmup before serving).
        Emulated ranks: warm every rank before launching any. Returns the
        BLOCK_Ms warmed."""
        top = self.config.max_tokens_per_rank if max_tokens is None else max_tokens
        top = c_int(top, "max_tokens", 0, self.config.max_tokens_per_rank)
        lib = _lib.load()
        bm = ctypes.c_int()

        def block_m(t):
            check(lib.mj_mega_moe_block_m(ctypes.byref(self._cfg), t, ctypes.byref(bm)))
            return bm.value

        first = first_token_counts(block_m, top)
        for t in first.values():
            check(lib.mj_mega_moe_warmup(self.runtime._handle(), self.buffer._handle(), self._handle(), t))
        dev = self.runtime.device_index
        check(
            lib.mj_pre_dispatch(
                self.runtime._handle(), self.buffer._handle(), self.config.rank,
                None, None, None, None, 0, _torch.stream_handle(stream, dev),
            )
        )
        return sorted(first)

    def forward(self, hidden_states, topk_weights, topk_ids, recv_stats=None, *, out=None,
                expert_scales=None, stream=None):
        """The layer's routed experts for this rank's tokens: pre-dispatch (quantize
        into the buffer) then the MegaMoE kernel (dispatch, GEMM 1, activation,
        GEMM 2, combine), both on `stream` (default: PyTorch's current stream, so it
        captures into torch.cuda.graph), in one C call (mj_moe_forward: every
        argument is checked and every kernel loaded before either launches). The
        call shape of vLLM's DeepGemmMegaMoEExperts.forward.

        hidden_states: torch.bfloat16 [T, H], T <= max_tokens_per_rank (T = 0 is
          valid and still launches: peers may route to this rank's experts).
        topk_weights: torch.float32 [T, K]; topk_ids: torch.int32 [T, K], global
          expert ids, -1 = masked (a token with every slot masked gives 0).
        recv_stats: optional torch.int32 [E/R]: each local expert's received valid
          (token, slot) pairs of all ranks are ADDED (zero it yourself).
        out: optional torch.bfloat16 [T, H] to write instead of a new tensor.
        expert_scales: optional torch.float32 [E] multiplying each valid slot's weight.
        Every tensor: contiguous, on the runtime's CUDA device. Returns out.

        The routing weight multiplies the activation before GEMM 2 (NUMERICS.md
        step 5), never the combine. With check_device_inputs (and not capturing)
        the call synchronizes and raises for bad ids or a device error word
        (single-rank and one-process-per-GPU buffers; emulated ranks are not
        checked). With emulated ranks every rank's forward must be in flight
        together, on a stream each."""
        fast = self._fast
        if fast is None:
            fast = self._fast = self._forward_constants()
        (tensor, bf16, f32, i32, dev, hidden, k, max_tokens, stats_shape, scales_shape, runtime, buffer,
         empty_like, raw_stream, call) = fast
        x, tw, ids, rs, es = hidden_states, topk_weights, topk_ids, recv_stats, expert_scales
        # The common case in one expression of the cheapest attribute reads; anything
        # else (a closed handle, a tensor subclass, a wrong dtype, device, shape or
        # layout) goes to _forward_checked, which raises its precise error or runs
        # valid input this expression does not take (a subclass, no device index).
        rt, buf, w = runtime._ptr, buffer._ptr, self._ptr
        sx = x.shape if type(x) is tensor else ()
        n = sx[0] if len(sx) == 2 else max_tokens + 1
        nk = (n, k)
        if not (rt and buf and w and n <= max_tokens and sx[1] == hidden
                and x.dtype is bf16 and x.get_device() == dev and x.is_contiguous()
                and type(tw) is tensor and tw.dtype is f32 and tw.get_device() == dev
                and tw.shape == nk and tw.is_contiguous()
                and type(ids) is tensor and ids.dtype is i32 and ids.get_device() == dev
                and ids.shape == nk and ids.is_contiguous()
                and (out is None or (type(out) is tensor and out.dtype is bf16 and out.get_device() == dev
                                     and out.shape == sx and out.is_contiguous()))
                and (rs is None or (type(rs) is tensor and rs.dtype is i32 and rs.get_device() == dev
                                    and rs.shape == stats_shape and rs.is_contiguous()))
                and (es is None or (type(es) is tensor and es.dtype is f32 and es.get_device() == dev
                                    and es.shape == scales_shape and es.is_contiguous()))):
            return self._forward_checked(x, tw, ids, rs, out, es, stream)
        if out is None:
            out = empty_like(x)  # x is a contiguous bf16 [T, H] tensor on the device
        st = call(rt, buf, w, x.data_ptr(), ids.data_ptr(), tw.data_ptr(),
                  None if es is None else es.data_ptr(), out.data_ptr(), n,
                  None if rs is None else rs.data_ptr(),
                  raw_stream(dev) if stream is None else _torch.stream_handle(stream, dev))
        if st:
            raise make_error(st)
        return out

    def _forward_constants(self):
        """What forward reads on every call, made at its first (it needs PyTorch)."""
        torch = _torch.require("MegaMoE.forward")
        c = self.config
        return (torch.Tensor, torch.bfloat16, torch.float32, torch.int32, self.runtime.device_index,
                c.hidden, c.num_topk, c.max_tokens_per_rank, (c.local_experts,), (c.num_experts,),
                self.runtime, self.buffer, torch.empty_like, _torch.raw_stream_fn(torch), self._forward_c)

    def _forward_checked(self, x, topk_weights, topk_ids, recv_stats, out, expert_scales, stream):
        """forward with every check spelled out, each raising its own message (the
        fast path's fallback)."""
        torch = _torch.require("MegaMoE.forward")
        c, dev = self.config, self.runtime.device_index
        ptr = _torch.check_cuda
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            ptr(torch, x, "hidden_states", torch.bfloat16, (None, c.hidden), dev)
        n = x.shape[0]
        if n > c.max_tokens_per_rank:
            raise invalid(f"megajit: {n} tokens but max_tokens_per_rank is {c.max_tokens_per_rank}")
        xp = ptr(torch, x, "hidden_states", torch.bfloat16, (n, c.hidden), dev)
        wp = ptr(torch, topk_weights, "topk_weights", torch.float32, (n, c.num_topk), dev)
        ip = ptr(torch, topk_ids, "topk_ids", torch.int32, (n, c.num_topk), dev)
        rp = sp = None
        if recv_stats is not None:
            rp = ptr(torch, recv_stats, "recv_stats", torch.int32, (c.local_experts,), dev)
        if expert_scales is not None:
            sp = ptr(torch, expert_scales, "expert_scales", torch.float32, (c.num_experts,), dev)
        if out is None:
            out = x.new_empty((n, c.hidden))
            yp = out.data_ptr()
        else:
            yp = ptr(torch, out, "out", torch.bfloat16, (n, c.hidden), dev)
        s = _torch.stream_handle(stream, dev)
        check(self._forward_c(self.runtime._handle(), self.buffer._handle(), self._handle(),
                              xp, ip, wp, sp, yp, n, rp, s))
        return out

    __call__ = forward

    def run(self, num_tokens, out=None, recv_stats=None, stream=None):
        """mj_mega_moe alone, on what was last pre-dispatched into this rank's region
        (buffer.pre_dispatch): the kernel only reads its input region, so it may run
        again on the same pre-dispatched tokens and gives the same result (its
        counters reset themselves). Returns out (bf16 [num_tokens, H])."""
        torch = _torch.require("MegaMoE.run")
        c = self.config
        dev = self.runtime.device_index
        n = c_int(num_tokens, "num_tokens", 0, c.max_tokens_per_rank)
        if out is None:
            out = torch.empty((n, c.hidden), dtype=torch.bfloat16, device=self.runtime.device)
        yp = _torch.check_cuda(torch, out, "out", torch.bfloat16, (n, c.hidden), dev)
        rp = None
        if recv_stats is not None:
            rp = _torch.check_cuda(torch, recv_stats, "recv_stats", torch.int32, (c.local_experts,), dev)
        check(self._moe(self.runtime._handle(), self.buffer._handle(), self._handle(), yp or None, n, rp,
                        _torch.stream_handle(stream, dev)))
        return out

    def __repr__(self):
        return f"<megajit.MegaMoE {self.config}>"
