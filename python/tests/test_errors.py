"""Bad input raises megajit exceptions (or TypeError) and never crashes the
interpreter: NULL-equivalents, wrong types, out-of-range values, closed
handles, and (with PyTorch) wrong tensors. Each case runs in this process, so
a crash would end the test run."""

import ctypes

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
                dict(situ_gate_beta=4.0), dict(activation="situ", situ_up_beta=-25.0)):
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
