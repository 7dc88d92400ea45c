"""MegaMoE.forward's Python side on CPU tensors (needs PyTorch; make test skips
it without): its one C call gets exactly the tensors' addresses, and input the
fast path must not take never reaches C. No GPU here, so the layer's handles
are stand-ins, mj_moe_forward is replaced by a recorder, the current-stream
getter by a constant, and the runtime's device index is the CPU's (-1, what
get_device() gives a CPU tensor): the checks are what is tested."""

import pytest

from conftest import torch_or_skip

import megajit
from megajit import _torch

H, I, E, K, TMAX = 512, 128, 16, 4, 64
STREAM = 0x5EED


class Stand:
    """An open Runtime or SymmBuffer as forward sees one."""

    def __init__(self, kind, ptr):
        self._kind, self._ptr = kind, ptr
        self.device_index = -1

    def _handle(self):
        if self._ptr is None:
            raise megajit.InvalidArgument(f"megajit: this {self._kind} is closed")
        return self._ptr


@pytest.fixture
def layer(monkeypatch):
    torch = torch_or_skip()
    monkeypatch.setattr(_torch, "raw_stream_fn", lambda torch: lambda index: STREAM)
    moe = megajit.MegaMoE.__new__(megajit.MegaMoE)
    moe.runtime, moe.buffer = Stand("runtime", 0x1000), Stand("symm_buffer", 0x2000)
    moe.config = megajit.MoEConfig(hidden=H, intermediate=I, num_experts=E, num_topk=K, max_tokens_per_rank=TMAX)
    moe._ptr, moe._fast = 0x3000, None
    moe.calls = []

    def record(*args):
        moe.calls.append(args)
        return 0

    moe._forward_c = record
    return torch, moe


def inputs(torch, t=8):
    return (torch.zeros(t, H, dtype=torch.bfloat16), torch.zeros(t, K, dtype=torch.float32),
            torch.zeros(t, K, dtype=torch.int32))


def test_forward_passes_the_tensors(layer):
    torch, moe = layer
    x, tw, ids = inputs(torch)
    y = moe.forward(x, tw, ids)
    assert y.dtype is torch.bfloat16 and tuple(y.shape) == (8, H) and y.is_contiguous()
    assert moe.calls == [(0x1000, 0x2000, 0x3000, x.data_ptr(), ids.data_ptr(), tw.data_ptr(), None,
                          y.data_ptr(), 8, None, STREAM)]
    out = torch.empty(8, H, dtype=torch.bfloat16)
    stats = torch.zeros(E, dtype=torch.int32)
    scales = torch.ones(E, dtype=torch.float32)
    assert moe.forward(x, tw, ids, stats, out=out, expert_scales=scales, stream=77) is out
    assert moe.calls[1] == (0x1000, 0x2000, 0x3000, x.data_ptr(), ids.data_ptr(), tw.data_ptr(),
                            scales.data_ptr(), out.data_ptr(), 8, stats.data_ptr(), 77)
    # T = 0: still one call, with no tokens
    x0, tw0, ids0 = inputs(torch, 0)
    assert tuple(moe(x0, tw0, ids0).shape) == (0, H)
    assert moe.calls[2][8] == 0 and len(moe.calls) == 3


def test_a_failing_call_raises_its_status(layer):
    torch, moe = layer
    moe._forward_c = lambda *args: megajit.Status.ERR_CAPTURE
    with pytest.raises(megajit.CaptureError):
        moe.forward(*inputs(torch))


class Refused(Exception):
    """What forward's fallback raises here: the fast path did not take the input."""


def bad_inputs(torch):
    """(what, call arguments, keyword arguments) the fast path must hand to
    _forward_checked, the fallback that raises each precise error (the GPU test
    checks their exception classes; test_errors.py checks check_cuda's messages on
    CPU tensors). Each case breaks one rule only, with every tensor contiguous
    unless contiguity is the rule, so the fast path's own check of it is what
    must send it to the fallback."""
    x, tw, ids = inputs(torch)
    bf16, f32, i32 = torch.bfloat16, torch.float32, torch.int32

    class Sub(torch.Tensor):
        pass

    return [
        ("float32 hidden_states", (x.float(), tw, ids), {}),
        ("float64 topk_weights", (x, tw.double(), ids), {}),
        ("int64 topk_ids", (x, tw, ids.long()), {}),
        ("float32 out", (x, tw, ids), {"out": torch.empty(8, H)}),
        ("int64 recv_stats", (x, tw, ids, torch.zeros(E, dtype=torch.int64)), {}),
        ("bf16 expert_scales", (x, tw, ids), {"expert_scales": torch.ones(E, dtype=bf16)}),
        ("None for topk_weights", (x, None, ids), {}),
        ("a list for hidden_states", ([[0.0] * H], tw, ids), {}),
        ("more than max_tokens_per_rank", inputs(torch, TMAX + 1), {}),
        ("1-D hidden_states", (x[0], tw, ids), {}),
        ("3-D hidden_states", (x[None], tw, ids), {}),
        ("wrong hidden size", (x[:, :256].contiguous(), tw, ids), {}),
        ("K mismatch", (x, tw[:, :2].contiguous(), ids[:, :2].contiguous()), {}),
        ("T mismatch", (x, tw[:4], ids[:4]), {}),
        ("ids of another T", (x, tw, ids[:4]), {}),
        ("non-contiguous hidden_states", (torch.zeros(H, 8, dtype=bf16).t(), tw, ids), {}),
        ("non-contiguous topk_weights", (x, torch.zeros(K, 8, dtype=f32).t(), ids), {}),
        ("non-contiguous topk_ids", (x, tw, torch.zeros(K, 8, dtype=i32).t()), {}),
        ("non-contiguous out", (x, tw, ids), {"out": torch.empty(H, 8, dtype=bf16).t()}),
        ("out of the wrong shape", (x, tw, ids), {"out": torch.empty(8, H + 1, dtype=bf16)}),
        ("recv_stats of the wrong size", (x, tw, ids, torch.zeros(E + 1, dtype=i32)), {}),
        ("expert_scales of the wrong size", (x, tw, ids), {"expert_scales": torch.ones(E - 1)}),
        ("a tensor subclass (valid input the fallback runs)", (x.as_subclass(Sub), tw, ids), {}),
    ]


@pytest.mark.parametrize("index", range(23))
def test_bad_input_goes_to_the_checked_path(layer, index):
    torch, moe = layer
    cases = bad_inputs(torch)
    assert len(cases) == 23
    what, args, kwargs = cases[index]
    seen = []

    def fallback(*a):
        seen.append(a)
        raise Refused(what)

    moe._forward_checked = fallback
    with pytest.raises(Refused):
        moe.forward(*args, **kwargs)
    assert moe.calls == [] and len(seen) == 1, what


def test_valid_input_takes_the_fast_path(layer):
    """The negative control of the test above: the same fallback is never called."""
    torch, moe = layer
    moe._forward_checked = lambda *a: pytest.fail("valid input went to the checked path")
    x, tw, ids = inputs(torch)
    moe.forward(x, tw, ids, torch.zeros(E, dtype=torch.int32), out=torch.empty(8, H, dtype=torch.bfloat16),
                expert_scales=torch.ones(E))
    moe.forward(*inputs(torch, 1))
    moe.forward(*inputs(torch, TMAX))
    assert len(moe.calls) == 3


def test_tensors_off_the_runtimes_device(layer):
    """A runtime on cuda:0: CPU (and meta) tensors are refused with the real
    fallback's message, and nothing reaches C."""
    torch, moe = layer
    moe.runtime.device_index = 0
    x, tw, ids = inputs(torch)
    with pytest.raises(megajit.InvalidArgument, match="hidden_states must be on a CUDA device") as e:
        moe.forward(x, tw, ids)
    assert isinstance(e.value, ValueError)
    with pytest.raises(megajit.InvalidArgument, match="hidden_states must be on a CUDA device"):
        moe.forward(torch.empty(8, H, dtype=torch.bfloat16, device="meta"), tw, ids)
    assert moe.calls == []


def test_a_bad_stream_never_reaches_c(layer):
    torch, moe = layer
    with pytest.raises(TypeError, match="stream"):
        moe.forward(*inputs(torch), stream="s0")
    assert moe.calls == []


@pytest.mark.parametrize("closed", ["runtime", "buffer", "weights"])
def test_a_closed_handle_never_reaches_c(layer, closed):
    torch, moe = layer
    owner = {"runtime": moe.runtime, "buffer": moe.buffer, "weights": moe}[closed]
    owner._ptr = None
    with pytest.raises(megajit.InvalidArgument):
        moe.forward(*inputs(torch))
    assert moe.calls == []
