"""`az.torch` ops on CUDA tensors, on the CPU: the fake GPU of tests/fakecuda.py (its kernels are
the CPU backend's, run at launch on host memory, and its driver logs every stream wait) and
PyTorch CPU tensors dressed as CUDA ones (`is_cuda`, `get_device`, `__cuda_array_interface__`
and the current raw stream patched for the test).  So the op's CUDA paths run here: the eager
call that launches through the launcher's quick pass without the dispatcher (`_Impls.eager_cuda`),
its refusals, the dispatcher's implementation and its `_launch` fallback, and the stream waits
on a side stream.  The GPU twins are in tests/runtime/test_torch_op.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fakecuda  # noqa: E402

import anodize as az  # noqa: E402
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread  # noqa: E402
from anodize.runtime import device as devmod, lazy  # noqa: E402
from anodize.runtime.launch import Launcher  # noqa: E402


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def fadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=256, requires=lambda a, s, c: len(a) == len(c))
@kernel
def fscale(a: Slice[f32], s: f32, c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * s


def _cfg(a: Any, *_: Any) -> az.LaunchConfig:
    return az.LaunchConfig.for_num_elems(a.numel(), block=256)


class _Cuda:
    """What the test sees: the fake GPU, its driver, the current raw stream (settable), and
    counts of the dispatcher's and `Launcher.__call__`'s calls."""

    def __init__(self, dev: Any, state: Any) -> None:
        self.dev, self.state = dev, state
        self.stream = 0
        self.dispatched = 0
        self.full_launches = 0
        self.regular = 0


@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Cuda]:
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    dev, state = fakecuda.install(monkeypatch)
    got = _Cuda(dev, state)
    monkeypatch.setattr(devmod, "_GPUS", {0: dev})
    monkeypatch.setattr(lazy.cuda_device(), "pointer_device", lambda ptr: 0)
    T = torch.Tensor
    monkeypatch.setattr(T, "is_cuda", property(lambda t: True))
    monkeypatch.setattr(T, "get_device", lambda t: 0)
    monkeypatch.setattr(T, "__cuda_array_interface__", property(lambda t: {
        "shape": tuple(t.shape), "typestr": "<f4", "data": (t.data_ptr(), False), "version": 2, "strides": None, "stream": None}))
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: got.stream, raising=False)  # (absent from a CPU build)
    real = Launcher.__call__

    def counted(self: Launcher, *args: Any, **kwargs: Any) -> None:
        got.full_launches += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(Launcher, "__call__", counted)
    for k in (fadd, fscale):  # no launcher planned on an earlier test's fake GPU
        k.store.launchers.clear()
        k.store.launches.clear()
        k.store.last_launcher = None
    yield got


def _op(cuda: _Cuda, k: Any, name: str) -> Any:
    op = az.torch.custom_op(k, name=name, outputs=lambda a, *_: {"c": (a.shape, az.f32)}, config=_cfg)
    real = op._op

    def dispatched(*args: Any, **kwargs: Any) -> Any:
        cuda.dispatched += 1
        return real(*args, **kwargs)

    op._op = dispatched
    impl = op._az_cuda

    def regular(*args: Any) -> Any:  # the implementation the eager call's loop picks (not the quick call)
        cuda.regular += 1
        return impl(*args)

    op._az_cuda = regular
    return op


def test_a_repeated_eager_call_launches_through_the_quick_pass_without_the_dispatcher(cuda: _Cuda) -> None:
    op = _op(cuda, fadd, "azfake::fadd")
    a, b = torch.rand(1000), torch.rand(1000)
    assert torch.equal(op(a, b), a + b)  # the first call plans (the full path)
    assert cuda.dispatched == 0 and cuda.full_launches == 1
    for k in range(3):
        c = op(a, b + k)
        assert torch.equal(c, a + (b + k)) and c.dtype == torch.float32 and c.shape == (1000,)
    assert cuda.dispatched == 0 and cuda.full_launches == 1 and cuda.regular == 1  # no dispatcher, no Launcher.__call__
    assert not any(e[0] in ("wait", "record") for e in cuda.state.log if isinstance(e, tuple))  # the legacy stream: no waits
    with pytest.raises(az.ContractViolation, match=r"len\(b\) == len\(c\)"):
        op(a, torch.rand(999))  # refused by the quick pass: the full path's located error


def test_what_the_quick_pass_refuses_takes_the_regular_paths(cuda: _Cuda) -> None:
    op = _op(cuda, fadd, "azfake::fadd2")
    a, b = torch.rand(1000), torch.rand(1000)
    op(a, b)
    strided = torch.rand(2000)[::2]
    assert torch.equal(op(a, strided), a + strided)  # not contiguous: the implementation's `_launch`
    assert cuda.dispatched == 0 and cuda.full_launches == 2
    g = torch.rand(1000, requires_grad=True)
    assert torch.equal(op(a, g), a + g.detach())  # autograd: the dispatcher
    assert cuda.dispatched == 1
    with torch.no_grad():
        op(a, g)  # no grad recorded, but the quick pass refuses requires_grad: the fallback, no dispatcher
    assert cuda.dispatched == 1 and cuda.full_launches == 4
    s = _op(cuda, fscale, "azfake::fscale")
    assert torch.allclose(s(a, 2.0), a * 2.0) and torch.allclose(s(a, 3.0), a * 3.0)
    assert cuda.dispatched == 1
    assert torch.allclose(s(a, 2), a * 2.0) and cuda.dispatched == 2  # an int where the schema takes a float


def test_a_side_stream_orders_the_quick_launch_after_and_before_it(cuda: _Cuda) -> None:
    op = _op(cuda, fadd, "azfake::fadd3")
    a, b = torch.rand(1000), torch.rand(1000)
    op(a, b)
    cuda.stream = 4242
    cuda.state.log.clear()
    assert torch.equal(op(a, b), a + b) and cuda.full_launches == 1
    log = [e for e in cuda.state.log if isinstance(e, tuple)]
    waits = {(e[1], e[2]) for e in log if e[0] == "wait"}  # (the waiting stream, the stream it waits for)
    ours = cuda.dev._stream_h
    assert waits == {(ours, 4242), (4242, ours)}, log  # ours waits for theirs, then theirs for ours


def test_the_output_allocation_is_the_anchor_like_new_empty(cuda: _Cuda) -> None:
    """The outputs are the anchor's `new_empty` (its device and dtype, no keywords parsed); an
    output of another dtype gets it."""
    op = _op(cuda, fadd, "azfake::fadd4")
    a, b = torch.rand(64), torch.rand(64)
    impls = az.torch._IMPLS["azfake::fadd4"]
    outs = impls.allocate((a, b), True)
    assert len(outs) == 1 and outs[0].shape == (64,) and outs[0].dtype == torch.float32 and not outs[0].requires_grad
    kept = impls.outputs
    impls.outputs = lambda a, b: {"c": ((8, 8), az.f64)}
    other = impls.allocate((a, b), True)[0]
    assert other.dtype == torch.float64 and other.shape == (8, 8)
    impls.outputs = kept
    assert np.array_equal(op(a, b).numpy(), (a + b).numpy())
