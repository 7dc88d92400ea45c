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


def run_harness(harness, d, row, act, clamp, x, params=(0.0, 0.0), biases=0, shared_inter=0,
                shared_fmt=0):
    """Runs the C reference on the inputs written to d (write_inputs, and b1/b2 or sw1/sw2
    for biases or a shared expert) and reads back its pre-dispatched region: the token
    bytes [T, ...] and their block scales as quantized (None for BF16), the per-token
    scales (ones but for NVFP4), ids and weights; with numerics.quantize_tokens' of x."""
    T = x.shape[0]
    wf, df, lf = megajit.FORMAT_ROWS[row]
    args = (int(wf), int(df), int(lf), int(act), clamp, *params, biases, shared_inter, shared_fmt,
            gpu.H, gpu.I, gpu.E, gpu.K, T, gpu.TMAX, d)
    p = subprocess.run([str(harness), *map(str, args)], capture_output=True, text=True, check=True)
    xo, so, io, wo, xso = map(int, p.stdout.split())
    region = read(d / "region")
    qx, qsf, qxs = nx.quantize_tokens(df, x)
    return {"xq": region[xo:xo + qx.numel() * qx.element_size()].view(T, -1),
            "sf": region[so:so + qsf.numel()].view(T, -1) if qsf is not None else None,
            "xs": region[xso:xso + 4 * T].view(torch.float32) if df == Format.NVFP4 else torch.ones(T),
            "ids": region[io:io + 4 * T * gpu.K].view(torch.int32).view(T, gpu.K),
            "tw": region[wo:wo + 4 * T * gpu.K].view(torch.float32).view(T, gpu.K),
            "qx": qx, "qsf": qsf, "qxs": qxs}


def assert_weight_bytes(d, q, sc, m):
    """The checkpoint bytes of model (or shared expert) m the GPU test loads are the C
    quantizer's: files q1, q2 (data) and sc1, sc2 (scales) of d."""
    w13 = m["w13"].view(torch.uint8) if m["w13"].dtype != torch.uint8 else m["w13"]
    assert torch.equal(read(d / f"{q}1"), w13.contiguous().view(-1).view(torch.uint8))
    assert torch.equal(read(d / f"{q}2"), m["w2q"].contiguous().view(-1).view(torch.uint8))
    if m["s13"] is not None:
        assert torch.equal(read(d / f"{sc}1"), m["s13"].contiguous().view(-1))
        assert torch.equal(read(d / f"{sc}2"), m["s2"].contiguous().view(-1))


def harness_tokens(row, r):
    """The dequantized tokens of run_harness's region r."""
    df = megajit.FORMAT_ROWS[row][1]
    return gpu.dequant_tokens(df, r["xq"].view(torch.bfloat16) if df == Format.BF16 else r["xq"], r["sf"])


@pytest.mark.parametrize("case", gpu.CASES, ids=gpu.case_name)
@pytest.mark.parametrize("T", [37, 1])
def test_numerics_match_the_c_reference(harness, tmp_path, case, T):
    row, act, clamp, params = case
    H, E = gpu.H, gpu.E
    m = gpu.make_model(row)
    x, ids, tw = gpu.gen_inputs(T, seed=T)
    write_inputs(tmp_path, m, x, ids, tw)
    r = run_harness(harness, tmp_path, row, megajit.Activation[act.upper()], clamp, x, params)
    assert_weight_bytes(tmp_path, "q", "s", m)

    # pre-dispatch: numerics.quantize_tokens is the C reference's, bit for bit
    assert torch.equal(r["xq"], r["qx"].contiguous().view(torch.uint8).view(T, -1))
    if r["qsf"] is not None:
        assert torch.equal(r["sf"], r["qsf"])
    if r["qxs"] is not None:
        assert torch.equal(r["xs"], r["qxs"])
    assert torch.equal(r["ids"], ids) and torch.equal(r["tw"], tw)

    # the MegaMoE reference, from the same quantized inputs
    ref = nx.moe_reference(gpu.layer_of(m, act, clamp, params), harness_tokens(row, r), r["xs"], r["ids"],
                           r["tw"])
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
    H, I, E, T = gpu.H, gpu.I, gpu.E, 37
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
    r = run_harness(harness, tmp_path, row, megajit.Activation.SWIGLUOAI, gpu.CLAMP, x, biases=1)
    layer = {**gpu.layer_of(m, "swigluoai", gpu.CLAMP), "b1": b1, "b2": b2,
             "down_bias_unweighted": unweighted}
    ref = nx.moe_reference(layer, harness_tokens(row, r), r["xs"], r["ids"], r["tw"])
    c_y = read(tmp_path / "y").view(torch.bfloat16).view(T, H)
    cd = nx.calc_diff(ref, c_y)
    assert (cd >= 1e-3) if unweighted else (cd < 1e-9), cd


# (row, shared format, mult): the GPU test's shared experts, every fusable pair.
SHARED_PAIRS = gpu.SHARED_CASES


@pytest.mark.parametrize("row,sfmt,mult", SHARED_PAIRS, ids=lambda v: str(getattr(v, "name", v)).lower())
def test_shared_expert_matches_the_c_reference(harness, tmp_path, row, sfmt, mult):
    """numerics.moe_reference with a fused shared expert = the C reference's (slot K,
    weight 1, alphas 1, after the routed slots in the fp32 sum), from the shared weights
    the GPU test loads (bit for bit); a clamp and a token with every routed slot masked
    (which gets the shared output alone) included. The negative control leaves the
    shared expert out of the PyTorch side and must disagree. The two references sum
    fp64 dot products in different orders, so a BF16 rounding tie can rarely come out
    an ulp apart (over the 16 pairs seeds 8, 11, 12, 14 and 15 have such ties, 8 in
    nvfp4-a16 alone): seed 13 has none."""
    H, I, T = gpu.H, gpu.I, 37
    m = gpu.make_model(row)
    sh = gpu.make_shared(sfmt, mult * I)
    x, ids, tw = gpu.gen_inputs(T, seed=13)
    assert bool((ids < 0).all(1).any())
    write_inputs(tmp_path, m, x, ids, tw)
    write(tmp_path / "sw1.f32", sh["master_w1"])
    write(tmp_path / "sw2.f32", sh["master_w2"])
    r = run_harness(harness, tmp_path, row, megajit.Activation.SWIGLUOAI, gpu.CLAMP, x,
                    shared_inter=mult * I, shared_fmt=int(sfmt))
    assert_weight_bytes(tmp_path, "sq", "ss", sh)
    a, routing = harness_tokens(row, r), (r["xs"], r["ids"], r["tw"])
    layer = gpu.layer_of(m, "swigluoai", gpu.CLAMP)
    c_y = read(tmp_path / "y").view(torch.bfloat16).view(T, H)
    assert nx.calc_diff(nx.moe_reference({**layer, "shared": sh}, a, *routing), c_y) < 1e-9
    assert nx.calc_diff(nx.moe_reference(layer, a, *routing), c_y) >= 1e-3
