"""The GPU test's PyTorch side (python/tests/gpu/numerics.py and its model and
inputs) against the C fp64 reference of tests/reference, on the CPU: weight
quantization and pre-dispatch bit for bit, the MegaMoE reference within
rounding (calc_diff < 1e-9), recv_stats exactly. Needs PyTorch (skipped in
make test on a machine without it); the GPU test then compares the kernels
with a reference already checked here."""

import subprocess
import sys

import pytest

from conftest import REPO, torch_or_skip

torch = torch_or_skip()
sys.path.insert(0, str(REPO / "python" / "tests" / "gpu"))

import numerics as nx  # noqa: E402
import test_megajit_gpu as gpu  # noqa: E402

import megajit  # noqa: E402
from megajit import Format  # noqa: E402

@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = tmp_path_factory.mktemp("harness") / "reference_harness"
    sources = [REPO / "python" / "tests" / "gpu" / "reference_harness.c",
               REPO / "tests" / "reference" / "quant.c", REPO / "tests" / "reference" / "moe_ref.c"]
    subprocess.run(["gcc", "-std=c11", "-O2", f"-I{REPO}", f"-I{REPO / 'templates'}", "-o", str(exe),
                    *map(str, sources), "-lm"], check=True)
    return exe


def write(path, t):
    path.write_bytes(bytes(t.contiguous().view(-1).view(torch.uint8).tolist()))


def write_inputs(d, m, x, ids, tw):
    """The harness's input files in d: model m's master weights and alphas, the tokens and routing."""
    write(d / "w1.f32", m["master_w1"])
    write(d / "w2.f32", m["master_w2"])
    write(d / "alphas.f32", torch.stack([m["alpha_gate"], m["alpha_up"], m["alpha_down"], m["act_scale"]]))
    write(d / "x.bf16", x)
    write(d / "ids.i32", ids)
    write(d / "tw.f32", tw)


def read(path):
    return torch.tensor(list(path.read_bytes()), dtype=torch.uint8)


@pytest.mark.parametrize("case", gpu.CASES, ids=gpu.case_name)
@pytest.mark.parametrize("T", [37, 1])
def test_numerics_match_the_c_reference(harness, tmp_path, case, T):
    row, act, clamp, params = case
    H, I, E, K = gpu.H, gpu.I, gpu.E, gpu.K
    m = gpu.make_model(row)
    x, ids, tw = gpu.gen_inputs(T, seed=T)
    write_inputs(tmp_path, m, x, ids, tw)
    wf, df, lf = megajit.FORMAT_ROWS[row]
    p = subprocess.run([str(harness), *map(str, (int(wf), int(df), int(lf), int(megajit.Activation[act.upper()]), clamp,
                                                 *params, 0, 0, 0, H, I, E, K, T, gpu.TMAX, tmp_path))],
                       capture_output=True, text=True, check=True)
    xo, so, io, wo, xso = map(int, p.stdout.split())

    # weights: the checkpoint bytes the GPU test loads are the C quantizer's
    w13 = m["w13"].view(torch.uint8) if m["w13"].dtype != torch.uint8 else m["w13"]
    assert torch.equal(read(tmp_path / "q1"), w13.contiguous().view(-1).view(torch.uint8))
    assert torch.equal(read(tmp_path / "q2"), m["w2q"].contiguous().view(-1).view(torch.uint8))
    if m["s13"] is not None:
        assert torch.equal(read(tmp_path / "s1"), m["s13"].contiguous().view(-1))
        assert torch.equal(read(tmp_path / "s2"), m["s2"].contiguous().view(-1))

    # pre-dispatch: numerics.quantize_tokens is the C reference's, bit for bit
    region = read(tmp_path / "region")
    qx, qsf, qxs = nx.quantize_tokens(df, x)
    xq = region[xo:xo + qx.numel() * qx.element_size()].view(T, -1)
    assert torch.equal(xq, qx.contiguous().view(torch.uint8).view(T, -1))
    sf = region[so:so + qsf.numel()].view(T, -1) if qsf is not None else None
    if qsf is not None:
        assert torch.equal(sf, qsf)
    xs = region[xso:xso + 4 * T].view(torch.float32) if df == Format.NVFP4 else torch.ones(T)
    if qxs is not None:
        assert torch.equal(xs, qxs)
    vid = region[io:io + 4 * T * K].view(torch.int32).view(T, K)
    vtw = region[wo:wo + 4 * T * K].view(torch.float32).view(T, K)
    assert torch.equal(vid, ids) and torch.equal(vtw, tw)

    # the MegaMoE reference, from the same quantized inputs
    tokens = xq.view(torch.bfloat16) if df == Format.BF16 else xq
    ref = nx.moe_reference(gpu.layer_of(m, act, clamp, params), gpu.dequant_tokens(df, tokens, sf), xs, vid, vtw)
    c_y = read(tmp_path / "y").view(torch.bfloat16).view(T, H)
    assert nx.calc_diff(ref, c_y) < 1e-9
    assert torch.equal(read(tmp_path / "stats").view(torch.int32),
                       torch.bincount(ids[ids >= 0].long(), minlength=E).int())


@pytest.mark.parametrize("row", ["mxfp4-a16", "nvfp4"])
@pytest.mark.parametrize("unweighted", [False, True])
def test_biases_match_the_c_reference(harness, tmp_path, row, unweighted):
    """numerics.moe_reference with expert biases = the C reference's (its down bias times the
    routing weight); the negative control drops that weight on the PyTorch side only and must
    disagree."""
    H, I, E, K, T = gpu.H, gpu.I, gpu.E, gpu.K, 37
    m = gpu.make_model(row)
    x, ids, tw = gpu.gen_inputs(T, seed=5)
    gen = torch.Generator().manual_seed(3)
    # the size of what they join (tokens of amplitude 1..16): a smaller down bias would
    # let the control that drops its routing weight pass
    b1 = (torch.rand(E, 2 * I, generator=gen) * 2 - 1) * 4
    b2 = (torch.rand(E, H, generator=gen) * 2 - 1) * 16
    write_inputs(tmp_path, m, x, ids, tw)
    write(tmp_path / "b1.f32", b1)
    write(tmp_path / "b2.f32", b2)
    wf, df, lf = megajit.FORMAT_ROWS[row]
    act = int(megajit.Activation.SWIGLUOAI)
    p = subprocess.run([str(harness), *map(str, (int(wf), int(df), int(lf), act, gpu.CLAMP, 0.0, 0.0, 1, 0, 0,
                                                 H, I, E, K, T, gpu.TMAX, tmp_path))],
                       capture_output=True, text=True, check=True)
    xo, so, io, wo, xso = map(int, p.stdout.split())
    region = read(tmp_path / "region")
    qx, qsf, _ = nx.quantize_tokens(df, x)
    xq = region[xo:xo + qx.numel() * qx.element_size()].view(T, -1)
    sf = region[so:so + qsf.numel()].view(T, -1) if qsf is not None else None
    xs = region[xso:xso + 4 * T].view(torch.float32) if df == Format.NVFP4 else torch.ones(T)
    vid = region[io:io + 4 * T * K].view(torch.int32).view(T, K)
    vtw = region[wo:wo + 4 * T * K].view(torch.float32).view(T, K)
    tokens = xq.view(torch.bfloat16) if df == Format.BF16 else xq
    layer = {**gpu.layer_of(m, "swigluoai", gpu.CLAMP), "b1": b1, "b2": b2,
             "down_bias_unweighted": unweighted}
    ref = nx.moe_reference(layer, gpu.dequant_tokens(df, tokens, sf), xs, vid, vtw)
    c_y = read(tmp_path / "y").view(torch.bfloat16).view(T, H)
    cd = nx.calc_diff(ref, c_y)
    assert (cd >= 1e-3) if unweighted else (cd < 1e-9), cd


# (row, shared format, mult): the GPU test's shared experts (gpu.SHARED_FORMAT), plus
# pairs the reference runs and the kernel not yet: NVFP4 tokens, whose per-token scale
# the shared GEMM 1 takes, and BF16 shared weights beside NVFP4 routed ones.
SHARED_PAIRS = [(row, gpu.SHARED_FORMAT[row], mult) for row, mult in gpu.SHARED_CASES] + [
    ("nvfp4", Format.MXFP8, 1), ("nvfp4-a16", Format.BF16, 2)]


@pytest.mark.parametrize("row,sfmt,mult", SHARED_PAIRS, ids=lambda v: str(getattr(v, "name", v)).lower())
def test_shared_expert_matches_the_c_reference(harness, tmp_path, row, sfmt, mult):
    """numerics.moe_reference with a fused shared expert = the C reference's (slot K,
    weight 1, alphas 1, after the routed slots in the fp32 sum), from the shared weights
    the GPU test loads (bit for bit); a clamp and a token with every routed slot masked
    (which gets the shared output alone) included. The negative control leaves the
    shared expert out of the PyTorch side and must disagree. The two references sum
    fp64 dot products in different orders, so a BF16 rounding tie can rarely come out
    an ulp apart (seeds 6 and 10 have one each, 6 in the routed nvfp4 path alone):
    seed 8 has none."""
    H, I, E, K, T = gpu.H, gpu.I, gpu.E, gpu.K, 37
    m = gpu.make_model(row)
    sh = gpu.make_shared(sfmt, mult * I)
    x, ids, tw = gpu.gen_inputs(T, seed=8)
    assert bool((ids < 0).all(1).any())
    write_inputs(tmp_path, m, x, ids, tw)
    write(tmp_path / "sw1.f32", sh["master_w1"])
    write(tmp_path / "sw2.f32", sh["master_w2"])
    wf, df, lf = megajit.FORMAT_ROWS[row]
    act = int(megajit.Activation.SWIGLUOAI)
    p = subprocess.run([str(harness), *map(str, (int(wf), int(df), int(lf), act, gpu.CLAMP, 0.0, 0.0, 0,
                                                 mult * I, int(sfmt), H, I, E, K, T, gpu.TMAX, tmp_path))],
                       capture_output=True, text=True, check=True)
    xo, so, io, wo, xso = map(int, p.stdout.split())
    w13 = sh["w13"].view(torch.uint8) if sh["w13"].dtype != torch.uint8 else sh["w13"]
    assert torch.equal(read(tmp_path / "sq1"), w13.contiguous().view(-1).view(torch.uint8))
    assert torch.equal(read(tmp_path / "sq2"), sh["w2q"].contiguous().view(-1).view(torch.uint8))
    if sh["s13"] is not None:
        assert torch.equal(read(tmp_path / "ss1"), sh["s13"].contiguous().view(-1))
        assert torch.equal(read(tmp_path / "ss2"), sh["s2"].contiguous().view(-1))
    region = read(tmp_path / "region")
    qx, qsf, _ = nx.quantize_tokens(df, x)
    xq = region[xo:xo + qx.numel() * qx.element_size()].view(T, -1)
    sf = region[so:so + qsf.numel()].view(T, -1) if qsf is not None else None
    xs = region[xso:xso + 4 * T].view(torch.float32) if df == Format.NVFP4 else torch.ones(T)
    vid = region[io:io + 4 * T * K].view(torch.int32).view(T, K)
    vtw = region[wo:wo + 4 * T * K].view(torch.float32).view(T, K)
    a = gpu.dequant_tokens(df, xq.view(torch.bfloat16) if df == Format.BF16 else xq, sf)
    layer = gpu.layer_of(m, "swigluoai", gpu.CLAMP)
    c_y = read(tmp_path / "y").view(torch.bfloat16).view(T, H)
    assert nx.calc_diff(nx.moe_reference({**layer, "shared": sh}, a, xs, vid, vtw), c_y) < 1e-9
    assert nx.calc_diff(nx.moe_reference(layer, a, xs, vid, vtw), c_y) >= 1e-3
