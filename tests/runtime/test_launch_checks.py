"""Launch rules: unused grid/block dimensions, shared-memory bounds, keyword arguments.

Refusals raised when `kernel[config]` is built need no device; the kernels that run
do so on the CPU backend (real codegen) and, marked `gpu`, on a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import rt_launch_kernels as R
from rt_kernels import copy_nc, scale2d, vecadd

import anodize as az
from anodize import AliasingError, ArgumentError, ContractViolation, KernelFault, LaunchError
from anodize.kernel import Kernel
from anodize.runtime import launch as rt_launch
from anodize.runtime.config import LaunchConfig
from anodize.runtime.device import Device, cpu_device
from anodize.runtime.launch_checks import check_contract

N = 1024


def _reset() -> None:
    for v in vars(R).values():
        if isinstance(v, Kernel):
            v.store.clear()


def _drain(d: Device) -> Device:
    try:
        d.check()
    except KernelFault:
        pass
    return d


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def real(request: pytest.FixtureRequest) -> Iterator[Device]:
    """The CPU backend with the real codegen, and a GPU."""
    _reset()
    if request.param == "cpu":
        d = cpu_device()
    else:
        from anodize.runtime.device import device

        d = device(0)
    yield _drain(d)
    _drain(d)
    _reset()


def _forged(grid: tuple[int, int, int], block: tuple[int, int, int], rank: int) -> LaunchConfig:
    """A config whose rank disagrees with its extents (LaunchConfig itself never builds one)."""
    cfg = object.__new__(LaunchConfig)  # not `LaunchConfig(1, 1)`: that object is interned, shared by every launch
    object.__setattr__(cfg, "grid", grid)
    object.__setattr__(cfg, "block", block)
    object.__setattr__(cfg, "shared_mem", 0)
    object.__setattr__(cfg, "rank", rank)
    object.__setattr__(cfg, "_hash", hash((grid, block, 0, rank)))
    return cfg


# ---- A. every dimension beyond the contract's domain is 1 ------------------------------------


def test_grid_z_of_a_2d_kernel_names_the_dimension() -> None:
    def config(rows: int, cols: int) -> Any:  # a config built in a plain function: the checker cannot see it
        return az.LaunchConfig((cols // 16, rows // 16, 4), (16, 16))

    with pytest.raises(ContractViolation) as e:
        scale2d[config(64, 64)]
    # three extents make a 3-D config (a config's rank is the number of extents it was built with)
    assert e.value.message.startswith("kernel `scale2d` has a 2-D launch contract (domain=2), but the launch config is 3-D")
    assert "grid=(4, 4, 4)" in e.value.message
    assert "for_shape" in (e.value.help or "")


def test_block_z_of_a_2d_kernel_without_a_contract_block() -> None:
    with pytest.raises(ContractViolation, match=r"^kernel `copy2d_any_block` has a 2-D launch contract .* config is 3-D: .*block=\(8, 8, 2\)"):
        R.copy2d_any_block[az.LaunchConfig((4, 4), (8, 8, 2))]


@pytest.mark.parametrize(
    ("grid", "block", "what"),
    [((4, 2, 1), (256, 1, 1), "grid y is 2"), ((4, 1, 3), (256, 1, 1), "grid z is 3"),
     ((4, 1, 1), (256, 2, 1), "block y is 2"), ((4, 1, 1), (128, 1, 5), "block z is 5")],
)
def test_y_and_z_of_a_1d_kernel(grid: Any, block: Any, what: str) -> None:
    """A 1-D config with y or z extents (LaunchConfig gives such a config rank 2, refused as the
    wrong rank; forged here, to pin the rule itself)."""
    from anodize.runtime.launch import prepare

    k = R.copy_any_block  # no contract block, so only the unused dimension is wrong
    with pytest.raises(ContractViolation, match=f"^{what}, but `copy_any_block` has `domain=1`"):
        check_contract("copy_any_block", k.contract, _forged(grid, block, 1))  # type: ignore[arg-type]
    with pytest.raises(ContractViolation, match=f"^{what}, but `copy_any_block` has `domain=1`"):
        prepare(k, _forged(grid, block, 1), safe=True)
    if grid[1:] != (1, 1):  # a contract block that the config matches: the same complaint
        with pytest.raises(ContractViolation, match=f"^{what}, but `vecadd` has `domain=1`"):
            prepare(vecadd, _forged(grid, block, 1), safe=True)


def test_unsafe_launch_of_a_contracted_kernel_checks_dimensions_too(cpu: Device) -> None:
    m, out = cpu.zeros((64, 64), az.f32), cpu.zeros((64, 64), az.f32)
    with pytest.raises(ContractViolation, match=r"config is 3-D: LaunchConfig\(grid=\(4, 4, 2\)"):
        scale2d.unsafe_launch(az.LaunchConfig((4, 4, 2), (16, 16)), m, out, 1.0)


def test_a_refused_config_is_refused_every_time() -> None:
    cfg = az.LaunchConfig((4, 4, 2), (16, 16))
    for _ in range(3):
        with pytest.raises(ContractViolation, match=r"config is 3-D: LaunchConfig\(grid=\(4, 4, 2\)"):
            scale2d[cfg]


def test_dimensions_are_checked_once_per_config_not_per_launch(cpu: Device, fake: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real_check = rt_launch.check_contract
    monkeypatch.setattr(rt_launch, "check_contract", lambda *a: calls.append(1) or real_check(*a))
    a, b, c = cpu.zeros(N, az.f32), cpu.zeros(N, az.f32), cpu.zeros(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    for _ in range(5):
        vecadd[cfg](a, b, c)
        vecadd[cfg].op(a, b, c).run()
    assert len(calls) == 1


def test_unsafe_launch_without_contract_fails_closed_on_grid_z(real: Device) -> None:
    hm = np.arange(32 * 32, dtype=np.float32).reshape(32, 32) + 1
    m, out = real.to_device(hm), real.zeros((32, 32), az.f32)
    R.copy2d_nc.unsafe_launch(az.LaunchConfig((2, 2, 4), (16, 16)), m, out)
    with pytest.raises(KernelFault) as e:
        real.synchronize()
    f = e.value
    assert (f.kernel, f.kind, f.count) == ("copy2d_nc", "rank", 2 * 2 * 4 * 256)
    assert not out.to_host().any()  # no witness admitted a write
    R.copy2d_nc.unsafe_launch(az.LaunchConfig((2, 2), (16, 16, 2)), m, out)
    with pytest.raises(KernelFault, match="rank"):
        real.synchronize()
    assert not out.to_host().any()
    R.copy2d_nc.unsafe_launch(az.LaunchConfig((2, 2), (16, 16)), m, out)
    np.testing.assert_array_equal(out.to_host(), hm)


# ---- B. shared memory: every access bounds-checked -------------------------------------------


def test_too_little_dynamic_shared_memory_is_a_kernel_fault(real: Device) -> None:
    hx = np.arange(256, dtype=np.float32) + 1
    x, out = real.to_device(hx), real.zeros(256, az.f32)
    R.dyn_copy[az.LaunchConfig.for_num_elems(256, block=64, shared_mem=63 * 4)](x, out)
    with pytest.raises(KernelFault) as e:
        out.to_host()
    f = e.value
    assert (f.kind, f.index, f.length, f.count) == ("write", 63, 63, 4 * 2)  # thread 63's write and read, 4 blocks
    np.testing.assert_array_equal(out.to_host(), np.where(np.arange(256) % 64 == 63, 0, hx))
    R.dyn_copy[az.LaunchConfig.for_num_elems(256, block=64)](x, out)  # none at all
    with pytest.raises(KernelFault, match="length 0"):
        real.synchronize()
    R.dyn_copy[az.LaunchConfig.for_num_elems(256, block=64, shared_mem=64 * 4)](x, out)  # the process survived
    np.testing.assert_array_equal(out.to_host(), hx)


def test_static_shared_index_out_of_range_faults(real: Device) -> None:
    hx = np.arange(128, dtype=np.float32) + 1
    x, out = real.to_device(hx), real.zeros(128, az.f32)
    R.static_oob[az.LaunchConfig.for_num_elems(128, block=64)](x, out)
    with pytest.raises(KernelFault) as e:
        real.synchronize()
    assert e.value.kind == "write" and e.value.length == 32 and 32 <= e.value.index < 64
    assert e.value.count == 2 * 32 * 2
    np.testing.assert_array_equal(out.to_host(), np.where(np.arange(128) % 64 < 32, hx, 0))


def test_shared_mem_over_the_device_limit_is_refused(real: Device) -> None:
    x, out = real.zeros(64, az.f32), real.zeros(64, az.f32)
    limit = real.limits.max_shared_per_block
    with pytest.raises(LaunchError, match=f"more than the {limit} available"):
        R.dyn_copy[az.LaunchConfig(1, 64, shared_mem=limit + 4)](x, out)
    with pytest.raises(LaunchError, match=r"\(128 static \+ "):  # static + dynamic together
        R.static_oob[az.LaunchConfig(1, 64, shared_mem=limit - 64)](x, out)


# ---- C. keyword arguments ----------------------------------------------------------------------


def test_keyword_arguments_bind_by_name(dev: Device) -> None:
    ha, hb = np.arange(N, dtype=np.float32), np.full(N, 2.0, np.float32)
    a, b = dev.to_device(ha), dev.to_device(hb)
    cfg = az.LaunchConfig.for_num_elems(N)
    c = dev.zeros(N, az.f32)
    vecadd[cfg](c=c, b=b, a=a)
    np.testing.assert_array_equal(c.to_host(), ha + hb)
    c2 = dev.zeros(N, az.f32)
    vecadd[cfg](a, c=c2, b=b)
    np.testing.assert_array_equal(c2.to_host(), ha + hb)
    c3 = dev.zeros(N, az.f32)
    vecadd[cfg].op(a, b=b, c=c3).run()
    np.testing.assert_array_equal(c3.to_host(), ha + hb)
    c4 = dev.zeros(N, az.f32)
    copy_nc.unsafe_launch(az.LaunchConfig.for_num_elems(N, block=128), c=c4, a=a)
    np.testing.assert_array_equal(c4.to_host(), ha)


def test_keyword_arguments_get_the_same_validation(dev: Device) -> None:
    a = dev.zeros(N, az.f32)
    cfg = az.LaunchConfig.for_num_elems(N)
    with pytest.raises(AliasingError, match="output `c`"):
        vecadd[cfg](a=a, b=dev.zeros(N, az.f32), c=a)
    with pytest.raises(ArgumentError, match="parameter `b`"):
        vecadd[cfg](a=a, b=dev.zeros(N, az.i32), c=dev.zeros(N, az.f32))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (2, {"d": 0}, "kernel `vecadd` has no parameter `d`"),
        (0, {"a": 0, "b": 0, "out": 0}, "kernel `vecadd` has no parameter `out`"),
        (1, {"a": 0, "b": 0, "c": 0}, "kernel `vecadd`, parameter `a`: given twice"),
        (1, {"c": 0}, "kernel `vecadd`: no argument for parameter `b`"),
        (0, {"b": 0}, "kernel `vecadd`: no argument for parameters `a`, `c`"),
        (3, {"a": 0}, "kernel `vecadd`, parameter `a`: given twice"),
        (4, {"c": 0}, "kernel `vecadd` takes 3 arguments (a, b, c), got 5"),
    ],
)
def test_bad_keyword_arguments(dev: Device, args: int, kwargs: dict[str, int], message: str) -> None:
    bufs = [dev.zeros(N, az.f32) for _ in range(4)]
    kw = {k: bufs[0] for k in kwargs}
    cfg = az.LaunchConfig.for_num_elems(N)
    with pytest.raises(ArgumentError) as e:
        vecadd[cfg](*bufs[:args], **kw)
    assert e.value.message.startswith(message)
    with pytest.raises(ArgumentError):
        vecadd[cfg].op(*bufs[:args], **kw)
    if "no parameter" in message:
        assert "`a`, `b`, `c`" in (e.value.help or "")


def test_a_config_has_the_rank_it_was_built_with() -> None:
    assert LaunchConfig(4, 256).rank == 1
    assert LaunchConfig((4, 4), (16, 16)).rank == 2
    assert LaunchConfig((4, 4, 1), (16, 16, 1)).rank == 3  # three extents: rank 3, even with trailing 1s
    assert LaunchConfig.for_num_elems(1000).rank == 1
    assert LaunchConfig.for_shape((30, 40)).rank == 2
    cfg = LaunchConfig.for_shape((5, 30, 40), block=(16, 8, 2))
    assert cfg.rank == 3 and cfg.grid == (3, 4, 3) and cfg.block == (16, 8, 2)
    assert LaunchConfig.for_shape((5, 30, 40)).block == (8, 8, 4)
    with pytest.raises(LaunchError, match=r"\(bx, by, bz\)"):
        LaunchConfig.for_shape((5, 30, 40), block=(16, 16))
    with pytest.raises(ContractViolation, match="the launch config is 3-D"):
        scale2d[LaunchConfig((4, 4, 1), (16, 16, 1))]  # a 2-D kernel takes a 2-D config
