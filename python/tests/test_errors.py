"""Bad input raises megajit exceptions (or TypeError) and never crashes the
interpreter: NULL-equivalents, wrong types, out-of-range values, closed
handles, and (with PyTorch) wrong tensors. Each case runs in this process, so
a crash would end the test run."""

import ctypes
import dataclasses
import functools

import pytest

from conftest import torch_or_skip

import megajit
from megajit import _torch

GOOD_MOE = dict(hidden=512, intermediate=128, num_experts=16, num_topk=4, max_tokens_per_rank=64)


@pytest.fixture
def rt(tmp_path):
    with megajit.Runtime(cache_dir=tmp_path) as rt:
        yield rt


def test_exception_hierarchy():
    for cls in (megajit.InvalidArgument, megajit.NoDeviceError, megajit.CompileError, megajit.CaptureError,
                megajit.CudaError, megajit.CacheError, megajit.FileError, megajit.OutOfMemory,
                megajit.Unsupported, megajit.NotFound):
        assert issubclass(cls, megajit.Error)
    assert issubclass(megajit.InvalidArgument, ValueError)
    assert issubclass(megajit.NotFound, LookupError)
    assert issubclass(megajit.FileError, OSError)
    for status in megajit.Status:
        if status:
            cls = megajit.errors.error_class(status)
            assert cls is not megajit.Error, status
            assert megajit.status_name(status) == "MJ_" + status.name


def test_error_carries_status_and_message(rt):
    with pytest.raises(megajit.InvalidArgument) as e:
        megajit.Runtime(arch="sm_99")
    assert e.value.status == megajit.Status.ERR_INVALID_ARG
    assert str(e.value) == e.value.message == 'unknown arch "sm_99" (expected sm_90a or sm_100a)'
    assert "ERR_INVALID_ARG" in repr(e.value)
    # a success clears the thread's last error, as the C API says
    rt.stats()
    assert megajit._lib.load().mj_last_error() == b""


def test_runtime_arguments():
    with pytest.raises(TypeError):
        megajit.Runtime(cache_dir=123)
    with pytest.raises(megajit.InvalidArgument, match="NUL"):
        megajit.Runtime(cache_dir="a\0b")
    class CpuDevice:  # what torch.device("cpu") looks like
        type, index = "cpu", None

    with pytest.raises(megajit.InvalidArgument, match="CUDA device"):
        megajit.Runtime(device=CpuDevice())


def test_family_settings(rt):
    fam = rt.families["mega_moe"]
    assert fam.num_sms == 0 and fam.pdl is False
    fam.num_sms = 66
    fam.pdl = True
    assert (fam.num_sms, fam.pdl) == (66, True)
    other = rt.families[megajit.Family.PRE_DISPATCH]
    assert (other.num_sms, other.pdl) == (0, False)  # families are independent
    assert list(rt.families) == ["pre_dispatch", "mega_moe", "bench_ceilings"] and len(rt.families) == 3
    with pytest.raises(megajit.InvalidArgument, match="SM count -1"):
        fam.num_sms = -1
    with pytest.raises(megajit.InvalidArgument, match="unknown kernel family"):
        rt.families["gemm"]
    with pytest.raises(megajit.InvalidArgument, match="unknown kernel family"):
        rt.families[7]
    with pytest.raises(TypeError):
        fam.num_sms = "all"


def test_closed_handles_raise(rt, tmp_path):
    c = megajit.Cache(tmp_path)
    c.close()
    c.close()  # twice is fine
    with pytest.raises(megajit.InvalidArgument, match="closed"):
        c.ls()
    m = megajit.Manifest.preset("deepseek-v3-ep8")
    m.close()
    with pytest.raises(megajit.InvalidArgument, match="closed"):
        len(m)
    rt2 = megajit.Runtime(cache_dir=tmp_path)
    rt2.close()
    with pytest.raises(megajit.InvalidArgument, match="closed"):
        rt2.info()
    with pytest.raises(megajit.InvalidArgument, match="closed"):
        rt2.families["mega_moe"].num_sms


def test_int_arguments_never_wrap(rt):
    with pytest.raises(megajit.InvalidArgument, match="outside"):
        megajit.SymmBuffer.create(rt, hidden=2**40, num_experts=16, num_topk=4, max_tokens_per_rank=8)
    with pytest.raises(TypeError, match="integer"):
        megajit.SymmBuffer.create(rt, hidden=512.0, num_experts=16, num_topk=4, max_tokens_per_rank=8)
    with pytest.raises(TypeError):
        megajit.SymmBuffer.create(rt, hidden=512, num_experts=16)
    with pytest.raises(megajit.InvalidArgument, match="num_sms|outside"):
        rt.families["pre_dispatch"].num_sms = 2**33


def test_symm_buffer_config_errors(rt):
    with pytest.raises(megajit.InvalidArgument) as e:
        megajit.SymmBuffer.create(rt, hidden=100, num_experts=16, num_topk=4, max_tokens_per_rank=8)
    assert "hidden" in e.value.message
    with pytest.raises(megajit.InvalidArgument):
        megajit.SymmBuffer.create(rt, hidden=512, num_experts=16, num_topk=4, max_tokens_per_rank=8,
                                  dispatch_format="fp7")
    with pytest.raises(megajit.InvalidArgument):
        megajit.SymmBuffer.create(rt, hidden=512, num_experts=16, num_topk=4, max_tokens_per_rank=8, num_ranks=0)
    # the 64-bit shared_intermediate reaches C where the header puts it
    with pytest.raises(megajit.InvalidArgument, match="shared_intermediate 192 must be 0 .* multiple of intermediate"):
        megajit.SymmBuffer.create(rt, hidden=512, num_experts=16, num_topk=4, max_tokens_per_rank=8,
                                  intermediate=128, shared_intermediate=192)
    cfg = megajit.SymmConfig(512, 16, 4, 8, "mxfp8")
    if not rt.has_device:
        with pytest.raises(megajit.NoDeviceError):
            megajit.SymmBuffer.create(rt, cfg)
    with pytest.raises(megajit.InvalidArgument, match="comm"):
        megajit.SymmBuffer.create_nccl(rt, cfg)
    with pytest.raises(megajit.InvalidArgument):
        megajit.SymmBuffer.create_nccl(rt, cfg, comm=0)
    with pytest.raises(TypeError):
        megajit.SymmBuffer.create(rt, config="big")


def test_moe_config_errors(rt):
    with pytest.raises(megajit.InvalidArgument) as e:
        megajit.MegaMoE(rt, megajit.MoEConfig(**GOOD_MOE, weight_format="bf16", dispatch_format="nvfp4"))
    assert "bf16" in e.value.message and "nvfp4" in e.value.message
    for bad in (dict(hidden=500), dict(intermediate=100), dict(num_experts=15, num_ranks=2),
                dict(num_topk=0), dict(max_tokens_per_rank=0), dict(rank=3), dict(block_m=24),
                dict(clamp=-1.0), dict(unfold_mx_scales=2), dict(swiglu_beta=float("nan")),
                dict(situ_gate_beta=4.0), dict(activation="situ", situ_up_beta=-25.0),
                dict(shared_intermediate=128, shared_format="mxfp8")):
        with pytest.raises(megajit.InvalidArgument):
            megajit.MegaMoE(rt, megajit.MoEConfig(**{**GOOD_MOE, **bad}))
    with pytest.raises(megajit.InvalidArgument, match="activation"):
        megajit.MoEConfig(**GOOD_MOE, activation="relu")._c()
    with pytest.raises(megajit.InvalidArgument, match="format row"):
        megajit.MoEConfig.for_row("fp7", **GOOD_MOE)
    with pytest.raises(TypeError):
        megajit.MegaMoE(rt, {"hidden": 512})
    if not rt.has_device:
        with pytest.raises(megajit.NoDeviceError):
            megajit.MegaMoE(rt, megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE))
    assert megajit.live_handles().get("weights", 0) == 0


def test_block_m_needs_no_device():
    cfg = megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE)
    sizes = {cfg.block_m_for(t) for t in range(0, 65)}
    assert sizes <= {8, 16, 32, 64, 128} and len(sizes) >= 2
    assert megajit.MoEConfig.for_row("nvfp4", **GOOD_MOE, block_m=32).block_m_for(1) == 32
    unfolded = megajit.MoEConfig.for_row("mxfp4-a8", **GOOD_MOE, unfold_mx_scales=True)
    assert unfolded.block_m_for(1) == 8
    with pytest.raises(megajit.InvalidArgument, match="unfold_mx_scales"):
        megajit.MoEConfig.for_row("mxfp4-a8", **GOOD_MOE, unfold_mx_scales=2).block_m_for(1)
    # the activation's parameters go through to the C config (0 = standard)
    tuned = megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, swiglu_alpha=1.5, swiglu_beta=0.25)
    assert tuned.block_m_for(1) == cfg.block_m_for(1)
    with pytest.raises(megajit.InvalidArgument, match="swiglu_beta: 1 is a parameter of swiglu only"):
        megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, activation="swigluoai", swiglu_beta=1).block_m_for(1)
    with pytest.raises(megajit.InvalidArgument, match="rounds to 0"):
        megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, swiglu_alpha=1e-50).block_m_for(1)
    with pytest.raises(TypeError, match="situ_gate_beta"):
        megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, activation="situ", situ_gate_beta=[4.0])._c()
    with pytest.raises(megajit.InvalidArgument, match="num_tokens"):
        cfg.block_m_for(65)
    with pytest.raises(megajit.InvalidArgument):
        cfg.block_m_for(-1)


# The formats a shared expert fuses in, per row (include/megajit.h, mj_moe_config),
# (the kernel runs every one).
SHARED_FUSABLE = {"bf16": {"bf16"}, "mxfp8": {"mxfp8"}, "mxfp4-a8": {"mxfp8"}, "mxfp4-a16": {"mxfp8"},
                  "nvfp4": {"mxfp8", "bf16"}, "nvfp4-a16": {"mxfp8", "bf16"}}


def test_shared_expert_config():
    """A fused shared expert's config goes through mj_mega_moe_block_m, no GPU needed:
    every (row, shared format) pair of the header's matrix runs (one or two experts
    wide) or is InvalidArgument naming the formats the row takes; a pair whose stages
    do not fit the routed ones at the layer's stage K (bf16 beside nvfp4 at K 64) is
    Unsupported; bad sizes; and what only the Python side can tell, C's shared_format 0
    being bf16 too."""
    assert set(SHARED_FUSABLE) == set(megajit.FORMAT_ROWS)
    for row in megajit.FORMAT_ROWS:
        for fmt in megajit.Format:
            name = megajit.format_name(fmt)
            cfg = megajit.MoEConfig.for_row(row, **GOOD_MOE, shared_intermediate=128, shared_format=name)
            if name not in SHARED_FUSABLE[row]:
                allowed = " or ".join(sorted(SHARED_FUSABLE[row]))
                why = f"^shared_format {name}: a shared expert fuses into the {row} row in {allowed} only$"
                with pytest.raises(megajit.InvalidArgument, match=why):
                    cfg.block_m_for(1)
            else:
                for width in (128, 256):
                    wide = dataclasses.replace(cfg, shared_intermediate=width)
                    assert wide.block_m_for(1) > 0 and wide.block_m_for(64) >= wide.block_m_for(1)
                    c = wide._c()
                    assert (c.shared_intermediate, c.shared_format) == (width, fmt)
                    assert wide.symm_config().shared_intermediate == width
    for row in ("nvfp4", "nvfp4-a16"):
        narrow = megajit.MoEConfig.for_row(row, **{**GOOD_MOE, "intermediate": 64}, shared_intermediate=128,
                                           shared_format="bf16")
        with pytest.raises(megajit.Unsupported, match="^shared_format bf16: no stage of the shared expert fits "
                           f"the ring slot of a routed {row} task at this layer's stage K of 64") as e:
            narrow.block_m_for(1)
        assert e.value.status == megajit.Status.ERR_UNSUPPORTED
        assert dataclasses.replace(narrow, shared_format="mxfp8").block_m_for(1) > 0
    mxfp8 = functools.partial(megajit.MoEConfig.for_row, "mxfp8", **GOOD_MOE)
    for width in (64, 192, -128, 2**20):
        with pytest.raises(megajit.InvalidArgument, match=f"shared_intermediate {width} must be 0"):
            mxfp8(shared_intermediate=width, shared_format="mxfp8").block_m_for(1)
    with pytest.raises(megajit.InvalidArgument, match="outside"):
        mxfp8(shared_intermediate=2**40, shared_format="mxfp8").block_m_for(1)
    for fmt in ("bf16", megajit.Format.BF16, "mxfp8"):  # bf16 is C's 0: only Python sees it set
        with pytest.raises(megajit.InvalidArgument, match="there is no shared expert"):
            mxfp8(shared_format=fmt).block_m_for(1)
    with pytest.raises(megajit.InvalidArgument, match="needs shared_format"):
        mxfp8(shared_intermediate=128).block_m_for(1)
    with pytest.raises(megajit.InvalidArgument, match="fp7"):
        mxfp8(shared_intermediate=128, shared_format="fp7").block_m_for(1)
    assert mxfp8()._c().shared_intermediate == 0 and mxfp8().symm_config().shared_intermediate == 0


class Stacked:
    """Stands in for a weight tensor in load_experts: a shape, and indexing that
    returns (name, index) so that a recorder shows which rows went where."""

    def __init__(self, name, *shape):
        self.name, self.shape = name, shape

    def __getitem__(self, index):
        return (self.name, index)


def stand_in_layer(**fields):
    """A MegaMoE of GOOD_MOE's mxfp8 layer with `fields`, without a GPU: no C handle,
    and load / load_shared record their calls (MegaMoE.calls) instead of loading."""
    moe = megajit.MegaMoE.__new__(megajit.MegaMoE)
    moe.config = megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, **fields)
    moe.calls = []
    moe.load = lambda *args: moe.calls.append(("load", *args))
    moe.load_shared = lambda *args: moe.calls.append(("load_shared", *args))
    return moe


def routed():
    """Stand-ins of load_experts' routed arguments for GOOD_MOE's mxfp8 layer."""
    n, i, h = GOOD_MOE["num_experts"], GOOD_MOE["intermediate"], GOOD_MOE["hidden"]
    return (Stacked("w13", n, 2 * i, h), Stacked("w2", n, h, i), Stacked("s13", n, 2 * i, h // 32),
            Stacked("s2", n, h, i // 32))


def test_load_experts_loads_the_shared_expert():
    """load_experts hands the shared expert's gate rows, up rows and down matrix, with
    their scales, to load_shared after every routed expert; it refuses bad shared
    arguments before loading anything."""
    moe = stand_in_layer(shared_intermediate=256, shared_format="mxfp8")
    s13, s2 = Stacked("shared_w13", 512, 512), Stacked("shared_w2", 512, 256)
    sf13, sf2 = Stacked("shared_s13", 512, 16), Stacked("shared_s2", 512, 8)
    moe.load_experts(*routed(), shared_w13=s13, shared_w2=s2, shared_w13_scales=sf13, shared_w2_scales=sf2)
    assert [c[0] for c in moe.calls] == ["load"] * 48 + ["load_shared"] * 3
    assert moe.calls[-3:] == [
        ("load_shared", "gate", ("shared_w13", slice(None, 256)), ("shared_s13", slice(None, 256))),
        ("load_shared", "up", ("shared_w13", slice(256, None)), ("shared_s13", slice(256, None))),
        ("load_shared", "down", s2, sf2),
    ]
    moe.calls.clear()
    moe.load_experts(*routed())  # without: the routed experts alone (load_shared may follow)
    assert {c[0] for c in moe.calls} == {"load"}
    bad = [
        ("pass both shared_w13 and shared_w2", dict(shared_w13=s13)),
        ("pass both shared_w13 and shared_w2", dict(shared_w2=s2)),
        ("scales without shared_w13", dict(shared_w13_scales=sf13)),
        ("scales without shared_w13", dict(shared_w2_scales=sf2)),
        (r"shared_w13 must be \[2 \* shared_intermediate = 512", dict(shared_w13=Stacked("w", 256, 512), shared_w2=s2)),
        (r"shared_w13 must be \[2 \* shared_intermediate", dict(shared_w13=Stacked("w", 1, 512, 512), shared_w2=s2)),
        (r"shared_w13_scales must be \[2 \* shared_intermediate",
         dict(shared_w13=s13, shared_w2=s2, shared_w13_scales=Stacked("s", 256, 16))),
    ]
    for message, kwargs in bad:
        moe.calls.clear()
        with pytest.raises(megajit.InvalidArgument, match=message):
            moe.load_experts(*routed(), **kwargs)
        assert moe.calls == [], message
    plain = stand_in_layer()
    with pytest.raises(megajit.InvalidArgument, match="no shared expert"):
        plain.load_experts(*routed(), shared_w13=s13, shared_w2=s2)
    assert plain.calls == []


def test_load_shared_checks_its_sources():
    """load_shared checks its sources against the shared expert's size and format (not
    the routed experts') before the C call, which a stand-in without a handle refuses."""
    moe = megajit.MegaMoE.__new__(megajit.MegaMoE)
    moe.config = megajit.MoEConfig.for_row("mxfp8", **GOOD_MOE, shared_intermediate=256, shared_format="mxfp8")
    with pytest.raises(megajit.InvalidArgument, match="shared gate weight has 65536 bytes, expected 131072"):
        moe.load_shared("gate", bytes(128 * 512), bytes(128 * 16))  # the routed experts' size
    with pytest.raises(megajit.InvalidArgument, match=r"shared mxfp8 weights need scales \[512, 8\]"):
        moe.load_shared("down", bytes(512 * 256))
    with pytest.raises(megajit.InvalidArgument, match="this weights is closed"):  # sources accepted
        moe.load_shared("down", bytes(512 * 256), bytes(512 * 8))
    with pytest.raises(megajit.InvalidArgument, match="unknown projection"):
        moe.load_shared("gate_up", bytes(256 * 512), bytes(256 * 16))
    bf16 = megajit.MegaMoE.__new__(megajit.MegaMoE)
    bf16.config = megajit.MoEConfig(**GOOD_MOE, shared_intermediate=128, shared_format="bf16")
    with pytest.raises(megajit.InvalidArgument, match="shared bf16 weights take no scales"):
        bf16.load_shared("up", bytes(2 * 128 * 512), bytes(128 * 16))
    plain = megajit.MegaMoE.__new__(megajit.MegaMoE)
    plain.config = megajit.MoEConfig(**GOOD_MOE)
    with pytest.raises(megajit.InvalidArgument, match="this layer has no shared expert"):
        plain.load_shared("gate", bytes(128 * 512))


def test_warmup_finds_every_block_m_by_bisection():
    """warmup's search for the first token count of each BLOCK_M gives what
    asking every count gives, for the library's pick of several layers."""
    from megajit.moe import first_token_counts

    for hidden, experts, topk, ranks, tmax in [(512, 16, 4, 1, 64), (7168, 256, 8, 8, 4096), (2880, 128, 4, 1, 1000)]:
        cfg = megajit.MoEConfig(hidden=hidden, intermediate=256, num_experts=experts, num_topk=topk,
                                num_ranks=ranks, max_tokens_per_rank=tmax)
        calls = []

        def block_m(t):
            calls.append(t)
            return cfg.block_m_for(t)

        every = {}
        for t in range(tmax + 1):
            every.setdefault(cfg.block_m_for(t), t)
        assert first_token_counts(block_m, tmax) == every
        assert len(calls) < 20 * len(every)
    assert first_token_counts(lambda t: 8, 0) == {8: 0}


def test_enum_names_are_the_librarys():
    """Families, formats and activations go by the names the C API prints."""
    for f in megajit.Family:
        assert megajit.runtime.family_name(f) == f.name.lower()
        assert megajit.runtime.family(f.name.lower()) == f
    for f in megajit.Format:
        assert megajit.format_name(f) == f.name.lower()
    assert megajit.MoEConfig(**GOOD_MOE, activation="swigluoai")._c().activation == megajit.Activation.SWIGLUOAI


def test_format_rows_and_names():
    for name, (w, d, l2) in megajit.FORMAT_ROWS.items():
        cfg = megajit.MoEConfig.for_row(name, **GOOD_MOE)
        assert cfg.l2_format == l2
        assert cfg.block_m_for(8) > 0  # the C API accepts every row
    for f in megajit.Format:
        assert megajit.parse_format(megajit.format_name(f)) == f
    with pytest.raises(megajit.InvalidArgument) as e:
        megajit.parse_format("fp7")
    assert "fp7" in e.value.message


def test_manifest_argument_errors(rt):
    m = megajit.Manifest.preset("deepseek-v3-ep8")
    with pytest.raises(megajit.InvalidArgument):
        m.describe(len(m))
    with pytest.raises(megajit.InvalidArgument):
        m.describe(-1)
    with pytest.raises(TypeError):
        megajit.Manifest.parse(42)
    with pytest.raises(megajit.NotFound):
        megajit.Manifest.load("no-such-preset-or-file")
    with pytest.raises(megajit.InvalidArgument):
        megajit.Manifest.parse("")
    with pytest.raises(megajit.InvalidArgument):
        megajit.Manifest.parse('{"archs": ["sm_90a"], "layers": [{"name": "\\udcff"}]}')
    with pytest.raises(megajit.InvalidArgument):
        m.set_archs("")


def test_raw_c_calls_with_null_arguments_fail_cleanly():
    """The C API's own NULL checks, reached through the declarations."""
    lib = megajit._lib.load()
    assert lib.mj_runtime_create(None, None) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_runtime_get_stats(None, None) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_manifest_parse(None, ctypes.byref(ctypes.c_void_p())) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_cache_list(None, None, None, megajit._capi.CacheEntryFn(), None) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_symm_buffer_view(None, 0, 0, None) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_weights_load(None, 0, 0, None, None, 0) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_mega_moe(None, None, None, None, 0, None, None) == megajit.Status.ERR_INVALID_ARG
    assert lib.mj_pre_dispatch(None, None, 0, None, None, None, None, 0, None) == megajit.Status.ERR_INVALID_ARG
    st = lib.mj_moe_forward(None, None, None, None, None, None, None, None, 0, None, None)
    assert st == megajit.Status.ERR_INVALID_ARG
    assert megajit.errors.make_error(st).message == "mj_moe_forward: NULL runtime, buffer or weights"
    lib.mj_runtime_destroy(None)
    lib.mj_symm_buffer_destroy(None)
    lib.mj_weights_destroy(None)
    lib.mj_cache_close(None)
    lib.mj_manifest_destroy(None)
    assert lib.mj_runtime_arch(None) is None
    assert lib.mj_family_name(99) is None


def test_stream_arguments():
    assert _torch.stream_handle(1234, None) == 1234
    assert _torch.stream_handle(None, None) == 0
    with pytest.raises(TypeError, match="stream"):
        _torch.stream_handle("default", 0)


def test_nccl_helper_errors(rt):
    from megajit import distributed

    with pytest.raises(megajit.InvalidArgument):
        distributed.NcclCommunicator.init_rank(b"short", 1, 0)
    with pytest.raises(megajit.InvalidArgument):
        distributed.NcclCommunicator.init_rank(bytes(128), 1, 1)
    closed = distributed.NcclCommunicator(None, 0, 1, 0)
    with pytest.raises(megajit.InvalidArgument, match="closed"):
        megajit.SymmBuffer.create_nccl(rt, megajit.SymmConfig(512, 16, 4, 8), closed)
    try:
        version = distributed.nccl_version()
    except distributed.NcclError as e:  # no NCCL on this machine: a clear error, not a crash
        assert "NCCL not found" in e.message
        pytest.skip("no NCCL here: its version, unique id and init_rank are not checked")
    assert version >= 21800
    assert len(distributed.unique_id()) == 128
    if not rt.has_device:
        with pytest.raises(distributed.NcclError):
            distributed.NcclCommunicator.init_rank(distributed.unique_id(), 1, 0)


def test_nccl_communicator_needs_torch_distributed():
    torch = torch_or_skip()
    from megajit import distributed

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        pytest.skip("a process group is already initialized")
    with pytest.raises(megajit.InvalidArgument, match="init_process_group"):
        distributed.nccl_communicator()


# ---------------------------------------------------------------- PyTorch

def test_tensor_checks():
    torch = torch_or_skip()
    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(megajit.InvalidArgument, match="CUDA") as e:
        _torch.check_cuda(torch, x, "hidden_states", torch.bfloat16, (None, 8), 0)
    assert isinstance(e.value, ValueError)
    with pytest.raises(megajit.InvalidArgument, match="torch.bfloat16"):
        _torch.check_cuda(torch, x.float(), "hidden_states", torch.bfloat16, (None, 8), 0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        _torch.check_cuda(torch, None, "hidden_states", torch.bfloat16, (None, 8), 0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        _torch.check_cuda(torch, [[1.0]], "hidden_states", torch.bfloat16, (None, 8), 0)
    meta = torch.empty(4, 8, dtype=torch.bfloat16, device="meta")
    with pytest.raises(megajit.InvalidArgument, match="CUDA"):
        _torch.check_cuda(torch, meta, "x", torch.bfloat16, (None, 8), 0)


def test_bias_buffers_must_hold_float32():
    """MegaMoE.load_bias takes host buffers of float32 in native byte order (any prefix
    that says so), and refuses other element types before anything is copied."""
    import array
    import ctypes

    from megajit.moe import _require_float32

    for ok in (array.array("f", [0.5, 1.0]), (ctypes.c_float * 2)(), memoryview(array.array("f", [1.0]))):
        _require_float32(ok, "gate bias")
    for bad in (b"\0" * 8, array.array("d", [1.0]), array.array("i", [1]), (ctypes.c_double * 2)()):
        with pytest.raises(megajit.InvalidArgument, match="gate bias must hold float32"):
            _require_float32(bad, "gate bias")
    _require_float32(object(), "gate bias")  # not a buffer: _host_pointer says what it takes
