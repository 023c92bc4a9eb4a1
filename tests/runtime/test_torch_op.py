"""`az.torch.custom_op`: anodize kernels as `torch.library` custom ops, on PyTorch's CPU build
(the CPU backend runs them); skipped cleanly without PyTorch.

The op is checked by `torch.library.opcheck` (schema, fake implementation, autograd
registration), traced by `torch.compile(fullgraph=True)` (which raises on a graph break) and
`torch._dynamo.explain` (0 graph breaks; inductor's compile under `-m slow`), differentiated
through a user backward made of other anodize ops, and keeps the kernel's launch checks; a
repeated CPU call launches through the quick pass over the tensors themselves.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import anodize as az  # noqa: E402
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread  # noqa: E402


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def vmul(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * b[i]


@launch_contract(domain=1, block=256, requires=lambda a, s, c: len(a) == len(c))
@kernel
def scale(a: Slice[f32], s: f32, c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * s


@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def shift_left(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i + 1]  # the last thread reads past `a`: a fault


def _cfg(a: object, *_: object) -> az.LaunchConfig:
    return az.LaunchConfig.for_num_elems(a.numel(), block=256)  # type: ignore[attr-defined]


def _mul_backward(ctx: object, g: object) -> tuple[object, object]:
    a, b = ctx.inputs  # type: ignore[attr-defined]
    return MUL(g, b), MUL(g, a)


MUL = az.torch.custom_op(vmul, name="aztest::vmul", outputs=lambda a, b: {"c": (a.shape, az.f32)}, config=_cfg, backward=_mul_backward)
SCALE = az.torch.custom_op(scale, name="aztest::scale", outputs=lambda a, s: {"c": (a.shape, az.f32)}, config=_cfg)


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_DEVICE", "cpu")


def test_op_runs_the_kernel() -> None:
    a, b = torch.rand(1000), torch.rand(1000)
    assert torch.equal(MUL(a, b), a * b)
    assert torch.allclose(SCALE(a, 2.5), a * 2.5)
    assert MUL(a, b).dtype == torch.float32 and MUL(a, b).shape == (1000,)


def test_op_keeps_the_launch_checks() -> None:
    a = torch.rand(100)
    with pytest.raises(az.ContractViolation, match=r"len\(b\) == len\(c\)"):
        MUL(a, torch.rand(99))
    with pytest.raises(az.ArgumentError, match="parameter `b`"):
        MUL(a, torch.rand(100, dtype=torch.float64))


def test_opcheck() -> None:
    a = torch.rand(64, requires_grad=True)
    b = torch.rand(64, requires_grad=True)
    torch.library.opcheck(MUL, (a, b))
    torch.library.opcheck(SCALE, (torch.rand(64), 3.0))


def test_fake_tensors_give_the_output_shape() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = MUL(torch.empty(77), torch.empty(77))
    assert out.shape == (77,) and out.dtype == torch.float32


def test_torch_compile_fullgraph_has_no_graph_break() -> None:
    def model(a: object, b: object) -> object:
        return SCALE(MUL(a, b), 0.5).sum() + 1  # type: ignore[operator]

    a, b = torch.rand(512), torch.rand(512)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(a, b), (a * b * 0.5).sum() + 1)
    explained = torch._dynamo.explain(model)(a, b)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_autograd_through_a_user_backward() -> None:
    a = torch.rand(300, requires_grad=True)
    b = torch.rand(300, requires_grad=True)
    (MUL(a, b) * torch.arange(300.0)).sum().backward()
    ga, gb = a.grad.clone(), b.grad.clone()  # type: ignore[union-attr]
    a.grad = b.grad = None
    (a * b * torch.arange(300.0)).sum().backward()
    assert torch.allclose(ga, a.grad) and torch.allclose(gb, b.grad)  # type: ignore[arg-type]


def test_registration_errors() -> None:
    with pytest.raises(az.ArgumentError, match="namespace::op"):
        az.torch.custom_op(vmul, name="novmul", outputs=lambda a, b: {"c": (a.shape, az.f32)}, config=_cfg)
    with pytest.raises(az.ArgumentError, match="no output parameter"):
        az.torch.custom_op(vmul, name="aztest::vmul_all_in", outputs=lambda a, b, c: {}, config=_cfg)


@pytest.mark.gpu
def test_op_on_cuda_tensors_on_a_side_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    a, b = torch.rand(1 << 20, device="cuda"), torch.rand(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = MUL(a, b)
        d = c * 2  # queued by PyTorch on the same stream, after the op
    torch.cuda.synchronize()
    assert torch.equal(d, a * b * 2)
    assert np.array_equal(MUL(a, b).cpu().numpy(), (a * b).cpu().numpy())


def test_an_eager_call_skips_the_dispatcher_only_when_nothing_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The op is an `OpOverloadPacket` (`.default`, opcheck and torch.compile see the registered
    op); its eager call on plain CPU tensors runs the implementation without the dispatcher,
    and anything the dispatcher is for (autograd, keyword arguments, a scalar it converts, a
    fake tensor, a dispatch mode) still goes through it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert isinstance(MUL, torch._ops.OpOverloadPacket) and MUL.default is torch.ops.aztest.vmul.default
    through: list[int] = []

    def count(op: object) -> None:
        real = op._op  # type: ignore[attr-defined]

        def counted(*args: object, **kwargs: object) -> object:
            through.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(op, "_op", counted)

    count(MUL)
    count(SCALE)
    a, b = torch.rand(500), torch.rand(500)
    assert torch.equal(MUL(a, b), a * b) and not through  # eager, plain tensors: no dispatcher
    g = torch.rand(500, requires_grad=True)
    out = MUL(a, g)
    assert len(through) == 1 and out.requires_grad  # autograd: the dispatcher (the user's backward)
    with torch.no_grad():
        assert torch.equal(MUL(a, g), a * g) and len(through) == 1  # no grad recorded: skipped again
    assert torch.equal(MUL(a=a, b=b), a * b) and len(through) == 2  # keyword arguments
    assert torch.allclose(SCALE(a, 2), a * 2.0) and len(through) == 3  # an int where the schema takes a float
    assert torch.allclose(SCALE(a, 2.0), a * 2.0) and len(through) == 3
    with FakeTensorMode() as mode:
        fa, fb = mode.from_tensor(a), mode.from_tensor(b)
        assert MUL(fa, fb).shape == (500,) and len(through) == 4  # fake tensors: the fake implementation
    with pytest.raises(az.ContractViolation, match=r"len\(b\) == len\(c\)"):
        MUL(a, torch.rand(499))  # the launch's checks, eager path too


@pytest.mark.gpu
def test_a_repeated_cuda_call_takes_the_quick_pass_and_the_fallbacks_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA tensors a repeated call launches through the launcher's quick pass (no
    `Launcher.__call__`); a tensor the pass refuses (requires_grad, not contiguous) and a
    wrong argument take `_launch` and the full path, with the same results and errors."""
    monkeypatch.delenv("ANODIZE_DEVICE", raising=False)
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    from anodize.runtime.launch import Launcher

    calls: list[int] = []
    real_call = Launcher.__call__

    def counted(self: Launcher, *args: object, **kwargs: object) -> None:
        calls.append(1)
        real_call(self, *args, **kwargs)

    monkeypatch.setattr(Launcher, "__call__", counted)
    a, b = torch.rand(5000, device="cuda"), torch.rand(5000, device="cuda")
    MUL(a, b)
    before = len(calls)
    for k in range(3):
        assert torch.equal(MUL(a, b + k), a * (b + k))
    assert len(calls) == before  # the quick pass launched
    g = torch.rand(5000, device="cuda", requires_grad=True)
    assert torch.equal(MUL(a, g), a * g.detach())
    strided = torch.rand(10000, device="cuda")[::2]
    assert torch.equal(MUL(a, strided), a * strided)
    assert len(calls) == before + 2  # refused by the quick pass: `_launch`
    with pytest.raises(az.ContractViolation, match=r"len\(b\) == len\(c\)"):
        MUL(a, torch.rand(4999, device="cuda"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = MUL(a, b)  # the quick pass on a side stream: ordered after and before PyTorch's work there
        d = c * 2
    torch.cuda.synchronize()
    assert torch.equal(d, a * b * 2)


def test_a_repeated_cpu_call_takes_the_quick_pass_and_errors_still_come_from_the_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime.launch import Launcher

    full_runs: list[int] = []
    real_full = Launcher._full

    def counted(self: Launcher, args: tuple[object, ...]) -> None:
        full_runs.append(1)
        real_full(self, args)

    monkeypatch.setattr(Launcher, "_full", counted)
    a, b = torch.rand(2000), torch.rand(2000, requires_grad=True)
    MUL(a, b)  # plans (or, planned before, runs the quick pass)
    before = len(full_runs)
    for _ in range(3):
        c = MUL(a, b + 1)
        assert torch.equal(c, a * (b.detach() + 1))
    assert len(full_runs) == before  # no full pass: the quick pass over the tensors launched
    with pytest.raises(az.ContractViolation, match=r"len\(b\) == len\(c\)"):
        MUL(a, torch.rand(1999))
    with pytest.raises(az.ArgumentError, match="parameter `b`"):
        MUL(a, torch.rand(2000, dtype=torch.float64))
    assert torch.allclose(SCALE(a, 2.0), a * 2.0) and torch.allclose(SCALE(a, 3.0), a * 3.0)


@pytest.mark.slow  # ~20 s of CPU for inductor's C++ (gcc); the default run keeps the aot_eager trace above
def test_torch_compile_with_inductor_on_cpu() -> None:
    def model(a: object, b: object) -> object:
        return torch.relu(SCALE(MUL(a, b), 2.0)) + 1  # type: ignore[operator]

    a, b = torch.rand(256), torch.rand(256)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)  # inductor: C++ of the code around the op (gcc)
    assert torch.allclose(compiled(a, b), torch.relu(a * b * 2.0) + 1)


def test_host_tensors_pack_like_their_numpy_views() -> None:
    from anodize.runtime.launch_fast import host_tensors_quick

    x, y = torch.rand(100), torch.empty(100)
    launch = scale[az.LaunchConfig.for_num_elems(100, block=256)]
    launch(x.numpy(), 2.0, y.numpy())
    plan = launch.last_plan
    quick = host_tensors_quick(plan, (x, 2.0, y))
    assert quick is not None
    assert quick((x, 2.0, y)) == [x.data_ptr(), 100, 2.0, y.data_ptr(), 100]
    assert quick((x, 2.0, torch.empty(99))) is None  # `requires` fails: the full path reports it
    assert quick((x, 2.0, x)) is None  # the output aliases `a`
    assert quick((x.double(), 2.0, y)) is None  # another dtype
    assert quick((x, 2.0, torch.empty(200)[::2])) is None  # not contiguous
    assert quick((torch._neg_view(x), 2.0, y)) is None  # its memory holds -x
    assert quick((x.numpy(), 2.0, y)) is None  # not a tensor
    assert quick((x, 2, y)) is None  # the scalar's type is not the plan's
    assert host_tensors_quick(plan, (x.numpy(), 2.0, y)) is None


def test_a_fault_of_the_quick_pass_is_recorded_like_the_full_paths() -> None:
    shifted = az.torch.custom_op(shift_left, name="aztest::shift_left", outputs=lambda a: {"c": (a.shape, az.f32)}, config=_cfg)
    dev = az.device("cpu")
    x = torch.rand(100)
    shifted(x)  # plans: the full path
    with pytest.raises(az.KernelFault, match="index 100 out of bounds"):
        dev.check()
    got = shifted(x)  # the quick pass
    assert torch.equal(got[:99], x[1:])
    with pytest.raises(az.KernelFault, match="index 100 out of bounds"):
        dev.check()
