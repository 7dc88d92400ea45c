"""NUMERICS.md in PyTorch, for the GPU test: the element formats, the
quantizers (weights, pre-dispatch, the GEMM 2 input) and the MegaMoE
reference (dequantize, two matmuls, activation, weighted sum), all on the CPU
in fp32 / fp64 so that no GPU math mode can change a rounding.

Formats are megajit.Format values; a quantized tensor is (data, scales) in the
checkpoint / symmetric-buffer byte layout: E4M3 bytes, E2M1 pairs (element 2b
in the low nibble of byte b), UE8M0 or UE4M3 scale bytes along the last axis.
"""

import torch

from megajit import Format

GROUP = {Format.BF16: 0, Format.MXFP8: 32, Format.MXFP4: 32, Format.NVFP4: 16}
E4M3_MAX = 448.0
E2M1_MAX = 6.0
_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def f32(x):
    return torch.as_tensor(x, dtype=torch.float32)


# ------------------------------------------------------------- elements

def bf16_round(x):
    """RNE to BF16, as the same dtype (float32 or float64) back."""
    return x.to(torch.float32).to(torch.bfloat16).to(x.dtype)


def e4m3_bytes(x):
    """fp32 -> E4M3 bytes, RNE with saturation to +-448."""
    return x.to(torch.float32).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_values(b):
    """E4M3 bytes -> fp32."""
    return b.contiguous().view(torch.float8_e4m3fn).to(torch.float32)


def e2m1_codes(x):
    """fp32 -> E2M1 codes 0..15 (NUMERICS.md thresholds; no negative zero)."""
    a = x.abs()
    idx = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int()
           + (a > 2.5).int() + (a >= 3.5).int() + (a > 5.0).int())
    sign = torch.signbit(x) & (idx != 0)
    return (idx + 8 * sign.int()).to(torch.uint8)


def e2m1_values(codes):
    """E2M1 codes -> fp64."""
    c = codes.long()
    v = _E2M1[c & 7]
    return torch.where((c & 8) != 0, -v, v)


def pack_fp4(codes):
    """[..., n] codes -> [..., n / 2] bytes, the even element in the low nibble."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack_fp4(data):
    """[..., n / 2] bytes -> [..., n] codes."""
    lo, hi = data & 0xF, data >> 4
    return torch.stack([lo, hi], dim=-1).reshape(*data.shape[:-1], data.shape[-1] * 2)


def pow2(e):
    """2**e for integer tensors, exact, as fp64."""
    return torch.ldexp(torch.ones(e.shape, dtype=torch.float64), e.long())


def ue8m0_for_amax(amax, qmax):
    """The UE8M0 byte of the smallest power of two >= max(amax, 1e-4) / qmax (fp32), in 1..254."""
    v = torch.clamp_min(amax.to(torch.float32), 1e-4) / f32(qmax)
    bits = v.view(torch.int32)
    e = (bits >> 23) + ((bits & 0x7FFFFF) != 0).int()
    return e.clamp(1, 254).to(torch.uint8)


def groups(x, g):
    return x.reshape(*x.shape[:-1], x.shape[-1] // g, g)


# --------------------------------------------------------- quantizers

def mx_scaled(fmt, x):
    """MXFP8 / MXFP4 (fp32 [..., n]): (the groups of 32 divided by their UE8M0
    scale, fp32 [..., n / 32, 32]; the scale bytes [..., n / 32])."""
    v = groups(x, 32)
    e = ue8m0_for_amax(v.abs().amax(-1), E4M3_MAX if fmt == Format.MXFP8 else E2M1_MAX)
    return v * pow2(127 - e.int())[..., None].to(torch.float32), e


def mx_quantize(fmt, x):
    """MXFP8 / MXFP4 (fp32 [..., n]) -> (E4M3 bytes or E2M1 pairs, scale bytes)."""
    q, e = mx_scaled(fmt, x)
    if fmt == Format.MXFP8:
        return e4m3_bytes(q).reshape(x.shape), e
    return pack_fp4(e2m1_codes(q).reshape(x.shape)), e


def quantize_weight(fmt, w):
    """One projection [out, in] (fp32) -> (data, scales or None, alpha) in the
    checkpoint layout, as tests/reference/quant.c's mjr_quantize_weights after the
    GPU test's NVFP4 pre-scaling (amax 2688 = 448 * 6, the inverse in the alpha)."""
    w = w.to(torch.float32)
    if fmt == Format.BF16:
        return w.to(torch.bfloat16), None, 1.0
    if fmt == Format.NVFP4:
        amax = float(w.abs().max()) or 1.0
        s = f32(2688.0) / f32(amax)
        v = groups(w * s, 16)
        sf = e4m3_bytes(v.abs().amax(-1) / f32(6.0))
        sv = e4m3_values(sf)[..., None]
        codes = torch.where(sv > 0, e2m1_codes(v / torch.where(sv > 0, sv, f32(1.0))), torch.zeros_like(v, dtype=torch.uint8))
        return pack_fp4(codes.reshape(w.shape)), sf, float(f32(1.0) / s)
    return (*mx_quantize(fmt, w), 1.0)


def dequantize(fmt, data, scales, cols):
    """Checkpoint or buffer bytes -> fp64 [..., cols] (every element times its scale: exact)."""
    if fmt == Format.BF16:
        return data.view(torch.bfloat16).to(torch.float64) if data.dtype != torch.bfloat16 else data.to(torch.float64)
    if fmt == Format.MXFP8:
        v = e4m3_values(data.view(torch.uint8)).to(torch.float64)
    else:
        v = e2m1_values(unpack_fp4(data.view(torch.uint8)))
    g = GROUP[fmt]
    sf = scales.view(torch.uint8)
    s = e4m3_values(sf).to(torch.float64) if fmt == Format.NVFP4 else pow2(sf.int() - 127)
    return (groups(v, g) * s[..., None]).reshape(*v.shape[:-1], cols)


def quantize_tokens(fmt, x):
    """Pre-dispatch of BF16 rows [T, H] -> (x bytes, x_sf or None, x_scales or None)
    bit for bit as the kernel (NUMERICS.md; tests/reference/quant.c)."""
    xf = x.to(torch.float32)
    if fmt == Format.BF16:
        return x.view(torch.uint8).reshape(x.shape[0], -1), None, None
    if fmt == Format.NVFP4:
        row = torch.clamp_min(xf.abs().amax(-1), 1e-4)
        pts = row / f32(2688.0)
        six_pts = f32(6.0) * pts
        v = groups(xf, 16)
        sf = e4m3_bytes(v.abs().amax(-1) / six_pts[:, None])
        sv = e4m3_values(sf)
        denom = sv * pts[:, None]
        inv = torch.where(sv > 0, f32(1.0) / torch.where(sv > 0, denom, f32(1.0)), f32(0.0))
        codes = e2m1_codes(v * inv[..., None]).reshape(xf.shape)
        return pack_fp4(codes), sf, pts
    return (*mx_quantize(fmt, xf), None)


def quantize_act(fmt, act):
    """Step 6 (the L1 epilogue) on fp64 activations [n, I], back to the fp64 values
    GEMM 2 reads; scale and code decisions in fp32 like the kernel."""
    if fmt == Format.BF16:
        return bf16_round(act)
    a = act.to(torch.float32)
    if fmt == Format.NVFP4:
        v = groups(a, 16)
        sv = e4m3_values(e4m3_bytes(v.abs().amax(-1) * f32(0.16666667)))
        inv = torch.where(sv > 0, f32(1.0) / torch.where(sv > 0, sv, f32(1.0)), f32(0.0))
        q = e2m1_values(e2m1_codes(v * inv[..., None])) * sv[..., None].to(torch.float64)
        return q.reshape(a.shape)
    q, e = mx_scaled(fmt, a)
    d = e4m3_values(e4m3_bytes(q)).to(torch.float64) if fmt == Format.MXFP8 else e2m1_values(e2m1_codes(q))
    return (d * pow2(e.int() - 127)[..., None]).reshape(a.shape)


# ------------------------------------------------------------ reference

STANDARD_ACT_PARAMS = {"swiglu": (1.0, 0.0), "swigluoai": (1.702, 1.0), "situ": (4.0, 25.0)}


def activate(act, g, u, params=(0.0, 0.0)):
    """Step 4 in fp64 with the kernel's fp32 constants: swiglu family g sigmoid(a g) (u + b),
    situ a tanh(g / a) sigmoid(g) b tanh(u / b); params as MoEConfig gives them (0 = standard)."""
    a, b = (float(f32(p if p else s)) for p, s in zip(params, STANDARD_ACT_PARAMS[act]))
    if act == "situ":
        return a * torch.tanh(g / a) * torch.sigmoid(g) * (b * torch.tanh(u / b))
    return g * torch.sigmoid(a * g) * (u + b)


def expert_rows(layer, w1, w2, x, mul_g, mul_u, mul_act, alpha_down=1.0, b1=None, b2=None, b2_weight=None):
    """Steps 2-7 of one expert (intermediate size I = w2.shape[1]) for rows x [n, H]
    (fp64): w1 [2I, H] (gate rows, then up) and w2 [H, I] dequantized (fp64); mul_g,
    mul_u, mul_act [n] the per-row multipliers of step 2 and 5 as the kernel forms
    them (fp32 products, as fp64); b1 [2I], b2 [H] and b2_weight [n] the biases and
    the down bias's weight (optional). The layer's activation, clamp and GEMM 2 input
    format come from `layer` (moe_reference). Returns the BF16 outputs [n, H] as fp32."""
    I = w2.shape[1]
    c = float(bf16_round(f32(layer["clamp"]))) if layer["clamp"] > 0 else 0.0
    g = (x @ w1[:I].T) * mul_g[:, None]
    u = (x @ w1[I:].T) * mul_u[:, None]
    if b1 is not None:
        g = g + b1[:I].to(torch.float64)
        u = u + b1[I:].to(torch.float64)
    g, u = bf16_round(g), bf16_round(u)
    if c > 0:
        g = torch.clamp(g, max=c)
        u = torch.clamp(u, -c, c)
    act = activate(layer["act"], g, u, layer.get("act_params", (0.0, 0.0))) * mul_act[:, None]
    actq = quantize_act(layer["l2"], act)
    out = (actq @ w2.T) * alpha_down
    if b2 is not None:
        out = out + b2_weight.to(torch.float64)[:, None] * b2.to(torch.float64)
    return bf16_round(out).to(torch.float32)


def moe_reference(layer, a, xs, ids, tw):
    """Steps 1-8 for one rank's tokens.

    layer: dict with w1 [E, 2I, H] and w2 [E, H, I] (fp64, dequantized), alpha_gate,
      alpha_up, alpha_down, act_scale (fp32 [E]), l2 (Format), act (str), clamp (float),
      act_params (the activation's two parameters, 0 = standard; optional), b1 [E, 2I]
      and b2 [E, H] (fp32 expert biases; optional, include/megajit.h mj_weights_load_bias);
      down_bias_unweighted (negative controls only: b2 without the routing weight);
      shared: the fused shared expert (optional, include/megajit.h
      mj_moe_config.shared_intermediate), a dict with w1 [2 I_s, H] and w2 [H, I_s]
      (fp64, dequantized): run on every token with routing weight 1, alphas 1 and
      no biases, its output added after the routed slots (slot K), so a token whose
      routed slots are all masked gets BF16(its shared output).
    a: the rank's dequantized tokens [T, H] (fp64); xs: per-token scale [T] (fp32).
    ids, tw: the top-k ids [T, K] and weights [T, K] as pre-dispatch stored them.
    Returns y [T, H] as BF16. Experts are global ids (every expert's weights are given).
    """
    T, K = ids.shape
    H = layer["w2"].shape[1]
    o = torch.zeros(T, K, H, dtype=torch.float32)
    for e in sorted(set(int(v) for v in ids.flatten().tolist() if v >= 0)):
        t, k = (ids == e).nonzero(as_tuple=True)
        mul_g = (xs[t] * layer["alpha_gate"][e]).to(torch.float64)
        mul_u = (xs[t] * layer["alpha_up"][e]).to(torch.float64)
        mul_act = (tw[t, k] * layer["act_scale"][e]).to(torch.float64)
        b1, b2 = layer.get("b1"), layer.get("b2")
        o[t, k] = expert_rows(layer, layer["w1"][e], layer["w2"][e], a[t], mul_g, mul_u, mul_act,
                              float(layer["alpha_down"][e]), None if b1 is None else b1[e],
                              None if b2 is None else b2[e],
                              torch.ones_like(tw[t, k]) if layer.get("down_bias_unweighted") else tw[t, k])
    acc = torch.zeros(T, H, dtype=torch.float32)
    valid = ids >= 0
    for k in range(K):
        acc = torch.where(valid[:, k, None], acc + o[:, k], acc)
    shared = layer.get("shared")
    if shared is None:
        return torch.where(valid.any(1)[:, None], acc, torch.zeros_like(acc)).to(torch.bfloat16)
    # Slot K: the fp32 sum goes on (xs * alpha 1 = xs, weight 1 * l2_act_scale 1 = 1).
    ones = torch.ones(T, dtype=torch.float64)
    return (acc + expert_rows(layer, shared["w1"], shared["w2"], a, xs.to(torch.float64), xs.to(torch.float64),
                              ones)).to(torch.bfloat16)


def calc_diff(x, y):
    """NUMERICS.md: 1 - 2 sum(x y) / sum(x x + y y) in fp64, 0 when both are zero."""
    x = x.to(torch.float64)
    y = y.to(torch.float64)
    sq = float((x * x + y * y).sum())
    return 0.0 if sq == 0.0 else 1.0 - 2.0 * float((x * y).sum()) / sq
