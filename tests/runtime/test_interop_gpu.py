"""CuPy and PyTorch arrays as kernel arguments (zero-copy), and the aliasing check across libraries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rt_kernels import scale2d, vecadd

import anodize as az
from anodize import AliasingError, ArgumentError
from anodize.runtime.device import Device

pytestmark = pytest.mark.gpu

N = 4096


class DLPackOnly:
    """Hides `__cuda_array_interface__`, so the launch takes the DLPack path."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __dlpack__(self, **kw: Any) -> Any:
        return self._inner.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._inner.__dlpack_device__()


def test_cupy_arguments(gpu: Device) -> None:
    cp = pytest.importorskip("cupy")
    a = cp.arange(N, dtype=cp.float32)
    b = cp.ones(N, dtype=cp.float32)
    c = cp.zeros(N, dtype=cp.float32)
    vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)
    gpu.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), np.arange(N, dtype=np.float32) + 1)


def test_cupy_on_its_own_stream(gpu: Device) -> None:
    cp = pytest.importorskip("cupy")
    with cp.cuda.Stream(non_blocking=True):
        a = cp.arange(N, dtype=cp.float32) * 3  # queued on CuPy's stream
        b = cp.ones(N, dtype=cp.float32)
        c = cp.empty(N, dtype=cp.float32)
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)  # our stream waits for CuPy's
    gpu.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), np.arange(N, dtype=np.float32) * 3 + 1)


def test_cupy_mixed_with_anodize_buffers(gpu: Device) -> None:
    cp = pytest.importorskip("cupy")
    a = gpu.to_device(np.arange(N, dtype=np.float32))
    b = cp.full(N, 2, dtype=cp.float32)
    c = gpu.empty(N, az.f32)
    vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32) + 2)


def test_cupy_aliasing_and_dtype(gpu: Device) -> None:
    cp = pytest.importorskip("cupy")
    big = cp.zeros(2 * N, dtype=cp.float32)
    b = cp.zeros(N, dtype=cp.float32)
    with pytest.raises(AliasingError, match="overlaps the memory of `a`"):
        vecadd[az.LaunchConfig.for_num_elems(N)](big[:N], b, big[N // 2 : N // 2 + N])
    with pytest.raises(ArgumentError, match="parameter `b`: expects elements of f32"):
        vecadd[az.LaunchConfig.for_num_elems(N)](big[:N], cp.zeros(N, cp.float64), big[N:])
    with pytest.raises(ArgumentError, match="C-contiguous"):
        vecadd[az.LaunchConfig.for_num_elems(N)](big[::2], b, cp.zeros(N, cp.float32))


def test_torch_arguments(gpu: Device) -> None:
    torch = pytest.importorskip("torch")
    a = torch.arange(N, dtype=torch.float32, device="cuda")
    b = torch.ones(N, dtype=torch.float32, device="cuda")
    c = torch.empty(N, dtype=torch.float32, device="cuda")
    vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)
    gpu.synchronize()
    np.testing.assert_array_equal(c.cpu().numpy(), np.arange(N, dtype=np.float32) + 1)


def test_torch_through_dlpack_only(gpu: Device) -> None:
    torch = pytest.importorskip("torch")
    m = torch.rand(33, 65, device="cuda")
    out = torch.empty(33, 65, device="cuda")
    scale2d[az.LaunchConfig.for_shape((33, 65))](DLPackOnly(m), DLPackOnly(out), 2.0)
    gpu.synchronize()
    torch.testing.assert_close(out, m * 2)


def test_torch_through_dlpack_only_from_a_side_stream(gpu: Device) -> None:
    """A tensor still being written on a PyTorch side stream: naming the legacy default stream to
    `__dlpack__` orders that stream, and our blocking stream with it, after the producer."""
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        big = torch.rand(1 << 24, device="cuda")
        for _ in range(20):  # keep the side stream busy while the launch is queued
            big = big * 1.0001
        a = big[:N].clone()
        b = torch.ones(N, device="cuda")
        c = torch.empty(N, device="cuda")
        vecadd[az.LaunchConfig.for_num_elems(N)](DLPackOnly(a), DLPackOnly(b), DLPackOnly(c))
    gpu.synchronize()
    side.synchronize()
    torch.testing.assert_close(c, a + 1)


def test_torch_views_sharing_storage_alias(gpu: Device) -> None:
    torch = pytest.importorskip("torch")
    base = torch.zeros(2 * N, device="cuda")
    b = torch.zeros(N, device="cuda")
    with pytest.raises(AliasingError, match="output `c`"):
        vecadd[az.LaunchConfig.for_num_elems(N)](base[:N], b, base[N - 1 : 2 * N - 1])
    with pytest.raises(AliasingError):
        vecadd[az.LaunchConfig.for_num_elems(N)](DLPackOnly(base[:N]), b, DLPackOnly(base[:N]))


def test_torch_errors(gpu: Device) -> None:
    torch = pytest.importorskip("torch")
    m = torch.rand(16, 32, device="cuda")
    with pytest.raises(ArgumentError, match="C-contiguous"):
        scale2d[az.LaunchConfig.for_shape((32, 16))](m.t(), torch.empty(32, 16, device="cuda"), 1.0)
    with pytest.raises(ArgumentError, match="expects elements of f32"):
        scale2d[az.LaunchConfig.for_shape((16, 32))](m.double(), torch.empty(16, 32, device="cuda"), 1.0)
    with pytest.raises(ArgumentError, match="host memory|lives"):
        scale2d[az.LaunchConfig.for_shape((16, 32))](m, torch.empty(16, 32), 1.0)


_HALF_COPY = """
from anodize import DisjointSlice, Slice, kernel, launch_contract, thread, {t}

@launch_contract(domain=1, block=256)
@kernel
def twice_{t}(x: Slice[{t}], out: DisjointSlice[{t}]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * {t}(2.0)
"""


def _half_kernel(t: str) -> Any:
    """One kernel per half type, from a module file (a kernel is compiled from its source)."""
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / f"interop_half_{t}.py"
    path.write_text(_HALF_COPY.format(t=t))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, f"twice_{t}")


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_torch_half_tensors_zero_copy(gpu: Device, t: str) -> None:
    """PyTorch f16 and bf16 CUDA tensors, through the CUDA array interface (bf16 is `|V2` there:
    DLPack names it) and through DLPack alone; the kernel writes the tensor's own memory."""
    torch = pytest.importorskip("torch")
    k = _half_kernel(t)
    dt = torch.float16 if t == "f16" else torch.bfloat16
    x = torch.linspace(-3, 3, N, device="cuda").to(dt)
    for wrap in (lambda v: v, DLPackOnly):
        out = torch.zeros(N, dtype=dt, device="cuda")
        ptr = out.data_ptr()
        k[az.LaunchConfig.for_num_elems(N)](wrap(x), wrap(out))
        gpu.synchronize()
        assert out.data_ptr() == ptr
        torch.testing.assert_close(out, x * 2)


def test_jax_bf16_arrays_zero_copy(gpu: Device) -> None:
    jnp = pytest.importorskip("jax.numpy")
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU here")
    k = _half_kernel("bf16")
    x = jnp.linspace(-3, 3, N, dtype=jnp.bfloat16)
    out = gpu.empty(N, az.bf16)
    k[az.LaunchConfig.for_num_elems(N)](x, out)
    np.testing.assert_array_equal(out.to_host().astype(np.float32), np.asarray(x * 2).astype(np.float32))
