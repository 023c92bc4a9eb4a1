"""Every launch error, on the CPU backend (fake and real codegen) and, marked `gpu`, on a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rt_kernels import copy_nc, fill, scale2d, vecadd

import anodize as az
from anodize import AliasingError, ArgumentError, ContractViolation, KernelFault, LaunchError
from anodize.runtime.device import CpuDevice, Device

N = 1024


def f32(dev: Device, n: int, fill_value: float | None = None) -> Any:
    if fill_value is None:
        return dev.to_device(np.arange(n, dtype=np.float32))
    return dev.to_device(np.full(n, fill_value, dtype=np.float32))


class StridedCAI:
    """A foreign CUDA array view over an anodize buffer, with chosen shape and strides."""

    def __init__(self, buf: az.Buffer, shape: tuple[int, ...], strides: tuple[int, ...] | None):
        self._buf = buf
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": buf.dtype.str, "data": (buf.ptr, False),
            "version": 3, "strides": strides, "stream": None,
        }


# ---- LaunchError -----------------------------------------------------------------------


def test_safe_launch_of_uncontracted_kernel(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(LaunchError) as e:
        copy_nc[az.LaunchConfig.for_num_elems(N)](a, c)
    assert "copy_nc" in e.value.message and "no launch contract" in e.value.message
    assert e.value.help is not None and "unsafe_launch" in e.value.help and "@az.launch_contract" in e.value.help
    assert type(e.value) is LaunchError


def test_unsafe_launch_of_uncontracted_kernel_runs(dev: Device) -> None:
    a, c = f32(dev, N), dev.zeros(N, az.f32)
    copy_nc.unsafe_launch(az.LaunchConfig.for_num_elems(N, block=128), a, c)
    np.testing.assert_array_equal(c.to_host(), np.arange(N, dtype=np.float32))


def test_unsafe_launch_of_wrong_rank_fails_closed(dev: Device) -> None:
    a, c = f32(dev, N), dev.zeros(N, az.f32)
    copy_nc.unsafe_launch(az.LaunchConfig.for_shape((32, 32), block=(16, 16)), a, c)
    with pytest.raises(KernelFault) as e:
        c.to_host()
    assert e.value.kind == "rank" and e.value.kernel == "copy_nc"
    assert not c.to_host().any()  # no write got through; the fault was reset


def test_unsafe_launch_still_checks_types_and_aliasing(dev: Device) -> None:
    a = f32(dev, N)
    with pytest.raises(AliasingError):
        copy_nc.unsafe_launch(az.LaunchConfig.for_num_elems(N), a, a)
    with pytest.raises(ArgumentError):
        copy_nc.unsafe_launch(az.LaunchConfig.for_num_elems(N), a, dev.empty(N, az.i32))


def test_block_over_device_limit(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(LaunchError, match="exceeds the limit of 1024"):
        copy_nc.unsafe_launch(az.LaunchConfig(1, (64, 32)), a, c)


def test_grid_over_device_limit(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(LaunchError, match="grid dimension y = 70000"):
        copy_nc.unsafe_launch(az.LaunchConfig((1, 70000), (32, 1)), a, c)


def test_shared_memory_over_device_limit(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(LaunchError, match="shared memory"):
        copy_nc.unsafe_launch(az.LaunchConfig(4, 256, shared_mem=1 << 30), a, c)


def test_config_must_be_a_launch_config(dev: Device) -> None:
    with pytest.raises(LaunchError, match="LaunchConfig"):
        vecadd[(4, 256)]  # type: ignore[index]


# ---- ContractViolation -------------------------------------------------------------------


def test_rank_violation(dev: Device) -> None:
    with pytest.raises(ContractViolation) as e:
        vecadd[az.LaunchConfig.for_shape((32, 32))]
    assert "1-D launch contract" in e.value.message and "2-D" in e.value.message
    assert "for_num_elems" in (e.value.help or "")


def test_block_violation(dev: Device) -> None:
    with pytest.raises(ContractViolation) as e:
        vecadd[az.LaunchConfig.for_num_elems(N, block=128)]
    assert "block 256" in e.value.message and "block 128" in e.value.message
    assert e.value.help == "pass `block=256` to the LaunchConfig, or leave `block` out: `LaunchConfig.for_num_elems(n)` takes the block of the kernel's contract"


@az.launch_contract(domain=1, block=64)
@az.kernel
def block64(c: az.DisjointSlice[az.f32]) -> None:
    i = az.thread.index_1d()
    if i in c:
        c[i] = 1.0


@az.launch_contract(domain=2, block=(32, 8))
@az.kernel
def scale2d_32x8(m: az.DisjointSlice2D[az.f32]) -> None:
    ij = az.thread.index_2d()
    if ij in m:
        m[ij] = 2.0


def test_for_num_elems_without_block_takes_the_contract_block(dev: Device, request: pytest.FixtureRequest) -> None:
    """A `block=64` kernel launched with `for_num_elems(n)` (no block): the launch uses the
    contract's block, the grid recomputed as ceil(n / 64), and every element is written."""
    n = 1000
    launch = block64[az.LaunchConfig.for_num_elems(n)]
    assert launch.config.block == (64, 1, 1) and launch.config.grid == (16, 1, 1)  # type: ignore[attr-defined]
    if request.node.callspec.params["dev"] != "cpu-fake":  # the fake codegen knows only rt_kernels
        c = dev.empty(n, az.f32)
        launch(c)
        assert (np.asarray(c.to_host()) == 1.0).all()
    # another n with the same default grid (ceil(n / 256) == 4) is another launch under block 64
    assert block64[az.LaunchConfig.for_num_elems(769)].config.grid == (13, 1, 1)  # type: ignore[attr-defined]
    # a kernel without a fixed block keeps the default block
    assert az.LaunchConfig.for_num_elems(n).block == (256, 1, 1)


def test_for_num_elems_with_another_block_names_both_blocks(dev: Device) -> None:
    """An explicit block that disagrees with the contract is an error naming both blocks."""
    with pytest.raises(ContractViolation) as e:
        block64[az.LaunchConfig.for_num_elems(N, block=256)]
    assert "block 64" in e.value.message and "block 256" in e.value.message
    assert "`block=64`" in (e.value.help or "") and "leave `block` out" in (e.value.help or "")


def test_for_shape_without_block_takes_the_contract_block(dev: Device) -> None:
    """`for_shape((rows, cols))` without a block on a `block=(32, 8)` kernel: that block, the
    grid over the shape recomputed (x over the columns)."""
    cfg = scale2d_32x8[az.LaunchConfig.for_shape((20, 70))].config  # type: ignore[attr-defined]
    assert cfg.block == (32, 8, 1) and cfg.grid == (3, 3, 1) and cfg.rank == 2


def test_block_violation_2d(dev: Device) -> None:
    with pytest.raises(ContractViolation, match=r"block \(16, 16\).*block \(32, 8\)"):
        scale2d[az.LaunchConfig.for_shape((64, 64), block=(32, 8))]


def test_requires_violation_message(dev: Device) -> None:
    a, b, c = f32(dev, 1000), f32(dev, 1024), dev.empty(1024, az.f32)
    with pytest.raises(ContractViolation) as e:
        vecadd[az.LaunchConfig.for_num_elems(1024)](a, b, c)
    assert e.value.message == "`len(a) == len(c)` violated: left side 1000, right side 1024"
    assert "len(a) == len(c) and len(b) == len(c)" in (e.value.help or "")


def test_requires_second_relation(dev: Device) -> None:
    a, b, c = f32(dev, 1024), f32(dev, 7), dev.empty(1024, az.f32)
    with pytest.raises(ContractViolation) as e:
        vecadd[az.LaunchConfig.for_num_elems(1024)](a, b, c)
    assert e.value.message == "`len(b) == len(c)` violated: left side 7, right side 1024"


def test_requires_with_scalars_and_shapes(dev: Device) -> None:
    out = dev.empty(12, az.i32)
    with pytest.raises(ContractViolation, match=r"`rows \* cols == len\(out\)` violated: left side 15, right side 12"):
        fill[az.LaunchConfig.for_num_elems(12, block=64)](out, 1, 3, 5)
    m, o = dev.to_device(np.ones((4, 5), np.float32)), dev.empty((4, 6), az.f32)
    with pytest.raises(ContractViolation, match=r"`m.shape\[1\] == out.shape\[1\]` violated: left side 5, right side 6"):
        scale2d[az.LaunchConfig.for_shape((4, 6))](m, o, 2.0)


def test_requires_overflow_is_rejected(dev: Device) -> None:
    out = dev.empty(12, az.i32)
    with pytest.raises(ContractViolation) as e:
        fill[az.LaunchConfig.for_num_elems(12, block=64)](out, 1, 2**32, 2**32)
    assert "`rows * cols == len(out)`" in e.value.message and "overflows 64-bit" in e.value.message


def test_requires_checked_on_every_launch(dev: Device) -> None:
    cfg = az.LaunchConfig.for_num_elems(N)
    a, b, c = f32(dev, N), f32(dev, N), dev.empty(N, az.f32)
    vecadd[cfg](a, b, c)
    with pytest.raises(ContractViolation):
        vecadd[cfg](a[: N - 1], b, c)
    vecadd[cfg](a, b, c)
    np.testing.assert_array_equal(c.to_host(), 2 * np.arange(N, dtype=np.float32))


# ---- ArgumentError -------------------------------------------------------------------------


def test_argument_count(dev: Device) -> None:
    a, b = f32(dev, N), f32(dev, N)
    with pytest.raises(ArgumentError, match=r"kernel `vecadd` takes 3 arguments \(a, b, c\), got 2"):
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b)


def test_argument_kind_scalar_for_slice(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(ArgumentError) as e:
        vecadd[az.LaunchConfig.for_num_elems(N)](a, 3.0, c)
    assert "parameter `b`" in e.value.message and "Slice[f32]" in e.value.message and "3.0" in e.value.message


def test_argument_kind_slice_for_scalar(dev: Device) -> None:
    out = dev.empty(12, az.i32)
    with pytest.raises(ArgumentError, match=r"parameter `value`: expects a scalar i32, got a Buffer"):
        fill[az.LaunchConfig.for_num_elems(12, block=64)](out, out, 3, 4)


def test_argument_dtype(dev: Device) -> None:
    a = dev.to_device(np.arange(N, dtype=np.float64))
    b, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(ArgumentError) as e:
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)
    assert "parameter `a`" in e.value.message and "f32" in e.value.message and "f64" in e.value.message
    assert "astype" in (e.value.help or "")


def test_argument_ndim(dev: Device) -> None:
    a2 = dev.to_device(np.ones((32, 32), np.float32))
    b, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(ArgumentError, match=r"parameter `a`: expects a 1-D array .* got 2-D with shape \(32, 32\)"):
        vecadd[az.LaunchConfig.for_num_elems(N)](a2, b, c)
    with pytest.raises(ArgumentError, match=r"parameter `m`: expects a 2-D array"):
        scale2d[az.LaunchConfig.for_shape((32, 32))](f32(dev, 64), dev.empty((32, 32), az.f32), 1.0)


def test_argument_2d_shape(dev: Device) -> None:
    out = dev.empty((2, 12), az.f32)
    if dev.kind == "cpu":
        bad: Any = np.ones((2, 3, 4), np.float32)
    else:
        bad = StridedCAI(dev.empty(24, az.f32), (2, 3, 4), None)
    with pytest.raises(ArgumentError, match=r"parameter `m`: expects a 2-D array .* got 3-D with shape \(2, 3, 4\)"):
        scale2d[az.LaunchConfig.for_shape((2, 12))](bad, out, 1.0)


def test_argument_contiguity(dev: Device) -> None:
    c = dev.empty(N, az.f32)
    b = f32(dev, N)
    if dev.kind == "cpu":
        a: Any = np.arange(2 * N, dtype=np.float32)[::2]
    else:
        a = StridedCAI(dev.empty(2 * N, az.f32), (N,), (8,))
    with pytest.raises(ArgumentError, match=r"parameter `a`: expects a C-contiguous array"):
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)


def test_argument_device(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    other = CpuDevice() if dev.kind == "cpu" else az.device("cpu")
    b = f32(other, N)
    with pytest.raises(ArgumentError) as e:
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, c)
    assert "parameter `b`" in e.value.message and "but the launch runs on" in e.value.message


@pytest.mark.gpu
def test_numpy_array_on_gpu_launch_is_rejected(dev: Device) -> None:
    if dev.kind != "cuda":
        pytest.skip("GPU only")
    a, c = f32(dev, N), dev.empty(N, az.f32)
    with pytest.raises(ArgumentError, match=r"parameter `b`: is a NumPy array in host memory"):
        vecadd[az.LaunchConfig.for_num_elems(N)](a, np.ones(N, np.float32), c)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        (2**31, r"2147483648 does not fit in i32"),
        (-(2**31) - 1, r"does not fit in i32"),
        (1.5, r"expects an integer for i32, got the float 1.5"),
        (True, r"expects an integer for i32, got the bool True"),
        (np.int64(2**40), r"does not fit in i32"),
    ],
)
def test_scalar_range_and_kind(dev: Device, value: object, pattern: str) -> None:
    out = dev.empty(12, az.i32)
    with pytest.raises(ArgumentError, match=pattern):
        fill[az.LaunchConfig.for_num_elems(12, block=64)](out, value, 3, 4)


def test_scalar_f32_range(dev: Device) -> None:
    m, o = dev.to_device(np.ones((4, 4), np.float32)), dev.empty((4, 4), az.f32)
    with pytest.raises(ArgumentError, match=r"does not fit in f32"):
        scale2d[az.LaunchConfig.for_shape((4, 4))](m, o, 1e300)


def test_scalars_accept_python_and_numpy_numbers(dev: Device) -> None:
    out = dev.empty(12, az.i32)
    cfg = az.LaunchConfig.for_num_elems(12, block=64)
    fill[cfg](out, np.int32(-7), np.int64(3), 4)
    np.testing.assert_array_equal(out.to_host(), np.full(12, -7, np.int32))
    m, o = dev.to_device(np.ones((4, 4), np.float32)), dev.empty((4, 4), az.f32)
    scale2d[az.LaunchConfig.for_shape((4, 4))](m, o, 3)  # an int for an f32 parameter
    np.testing.assert_array_equal(o.to_host(), np.full((4, 4), 3, np.float32))


# ---- AliasingError ----------------------------------------------------------------------------


def test_alias_same_buffer(dev: Device) -> None:
    a, b = f32(dev, N), f32(dev, N)
    with pytest.raises(AliasingError) as e:
        vecadd[az.LaunchConfig.for_num_elems(N)](a, b, a)
    assert "output `c`" in e.value.message and "is the same buffer as `a`" in e.value.message
    assert "separate buffer" in (e.value.help or "")


def test_alias_overlapping_views(dev: Device) -> None:
    big = f32(dev, 2 * N)
    b = f32(dev, N // 2)
    with pytest.raises(AliasingError, match=r"output `c` .* overlaps the memory of `a`"):
        vecadd[az.LaunchConfig.for_num_elems(N // 2)](big[0 : N // 2], b, big[N // 4 : N // 4 + N // 2])
    with pytest.raises(AliasingError, match=r"overlaps the memory of `b`"):
        vecadd[az.LaunchConfig.for_num_elems(N // 2)](b, big.view()[N - 1 : N - 1 + N // 2], big[N // 2 : N])


def test_adjacent_views_do_not_alias(dev: Device) -> None:
    big = f32(dev, 2 * N)
    b = dev.to_device(np.ones(N, np.float32))
    vecadd[az.LaunchConfig.for_num_elems(N)](big[0:N], b, big[N : 2 * N])
    host = big.to_host()
    np.testing.assert_array_equal(host[N:], np.arange(N, dtype=np.float32) + 1)
    np.testing.assert_array_equal(host[:N], np.arange(N, dtype=np.float32))


def test_inputs_may_share_memory(dev: Device) -> None:
    a, c = f32(dev, N), dev.empty(N, az.f32)
    vecadd[az.LaunchConfig.for_num_elems(N)](a, a, c)
    np.testing.assert_array_equal(c.to_host(), 2 * np.arange(N, dtype=np.float32))


def test_empty_buffers_never_alias(dev: Device) -> None:
    a = f32(dev, 4)
    vecadd[az.LaunchConfig.for_num_elems(1)](a[0:0], a[0:0], a[2:2])
    dev.synchronize()


# ---- happy paths -----------------------------------------------------------------------------


def test_vecadd(dev: Device) -> None:
    n = 10_000
    ha, hb = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    a, b, c = dev.to_device(ha), dev.to_device(hb), dev.empty(n, az.f32)
    vecadd[az.LaunchConfig.for_num_elems(n)](a, b, c)
    np.testing.assert_array_equal(c.to_host(), ha + hb)


def test_scale2d(dev: Device) -> None:
    hm = np.random.rand(37, 53).astype(np.float32)
    m, o = dev.to_device(hm), dev.empty((37, 53), az.f32)
    scale2d[az.LaunchConfig.for_shape((37, 53))](m, o, 0.5)
    np.testing.assert_array_equal(o.to_host(), hm * np.float32(0.5))


def test_histogram_atomics(dev: Device) -> None:
    from rt_kernels import histogram

    hx = np.random.randint(0, 16, size=5000).astype(np.int32)
    x, h = dev.to_device(hx), dev.zeros(16, az.i32)
    histogram[az.LaunchConfig.for_num_elems(5000)](x, h)
    np.testing.assert_array_equal(h.to_host(), np.bincount(hx, minlength=16))


def test_cpu_launch_accepts_numpy_in_place(dev: Device) -> None:
    if dev.kind != "cpu":
        pytest.skip("NumPy arrays are host memory: CPU backend only")
    a = np.arange(N, dtype=np.float32)
    c = np.zeros(N, dtype=np.float32)
    vecadd[az.LaunchConfig.for_num_elems(N)](a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
    with pytest.raises(ArgumentError, match="read-only"):
        c.flags.writeable = False
        vecadd[az.LaunchConfig.for_num_elems(N)](a, a, c)


def test_min_compute_capability(dev: Device) -> None:
    from rt_kernels import future_only

    c = dev.zeros(64, az.f32)
    cfg = az.LaunchConfig.for_num_elems(64, block=32)
    if dev.kind == "cpu":  # the CPU backend has no compute capability: the contract does not apply
        assert dev.compute_capability is None
        future_only[cfg](c)
        np.testing.assert_array_equal(c.to_host(), np.ones(64, np.float32))
        return
    with pytest.raises(ContractViolation, match=r"needs compute capability 99.0 .* has \d+\.\d+"):
        future_only[cfg](c)


def test_same_launcher_on_two_devices(dev: Device) -> None:
    if dev.kind != "cpu":
        pytest.skip("a second CPU backend instance stands in for a second device")
    other = CpuDevice()
    cfg = az.LaunchConfig.for_num_elems(N)
    launcher = vecadd[cfg]
    for d in (dev, other, dev):
        a, c = f32(d, N), d.empty(N, az.f32)
        launcher(a, a, c)
        np.testing.assert_array_equal(c.to_host(), 2 * np.arange(N, dtype=np.float32))
    assert len(launcher._loaded) == 2 and len(launcher._plans_by_device) == 2


def test_unsafe_launch_of_contracted_kernel_still_checks_rank_and_block() -> None:
    """Contracted kernels carry no device-side rank check, so unsafe_launch must not bypass it."""
    import anodize as az
    from anodize.language.errors import ContractViolation

    from rt_kernels import vecadd  # a domain-1, block-256 contract

    dev = az.device("cpu")
    a, c = dev.to_device(np.ones(64, np.float32)), dev.empty(64, az.f32)
    with pytest.raises(ContractViolation, match="2-D"):
        vecadd.unsafe_launch(az.LaunchConfig((1, 1), (16, 16)), a, a, c)
    with pytest.raises(ContractViolation, match="block"):
        vecadd.unsafe_launch(az.LaunchConfig(1, 128), a, a, c)


def test_unsafe_launch_of_contracted_kernel_still_checks_requires() -> None:
    """Bounds checks removed on the strength of `requires` stay sound under unsafe_launch."""
    dev = az.device("cpu")
    a = dev.to_device(np.ones(1000, np.float32))
    b = dev.to_device(np.ones(1024, np.float32))
    c = dev.empty(1024, az.f32)
    with pytest.raises(ContractViolation, match=r"`len\(a\) == len\(c\)` violated: left side 1000, right side 1024"):
        vecadd.unsafe_launch(az.LaunchConfig.for_num_elems(1024), a, b, c)
