"""On a GPU: every codegen test kernel gives the same results as the CPU backend.

Skipped without a GPU (the `gpu` marker); the lead runs these on the H200.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cg_kernels as K
import numpy as np
import pytest
from cg_helpers import rng

import anodize as az

pytestmark = pytest.mark.gpu


def _run(dev: Any, kernel: Any, config: az.LaunchConfig, host_args: list[Any], safe: bool) -> list[np.ndarray]:
    bufs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in host_args]
    if safe:
        kernel[config](*bufs)
    else:
        kernel.unsafe_launch(config, *bufs)
    dev.synchronize()
    return [b.to_host() for b in bufs if not isinstance(b, (int, float, np.generic))]


CASES: list[tuple[str, Callable[[], tuple[az.LaunchConfig, list[Any]]], bool, float]] = [
    ("vecadd", lambda: (az.LaunchConfig.for_num_elems(1000), [rng().random(1000, dtype=np.float32)] * 2 + [np.zeros(1000, np.float32)]), True, 0),
    (
        "saxpy",
        lambda: (az.LaunchConfig.for_num_elems(777, block=K.BLOCK), [np.float32(1.5), rng().random(777, dtype=np.float32), rng().random(777, dtype=np.float32), np.zeros(777, np.float32)]),
        True,
        0,
    ),
    ("scale2d", lambda: (az.LaunchConfig.for_shape((37, 53), block=(16, 8)), [rng().random((37, 53)), 2.5, np.zeros((37, 53))]), True, 0),
    ("control", lambda: (az.LaunchConfig.for_num_elems(200, block=64), [rng().integers(-100, 100, 200, dtype=np.int32), np.zeros(200, np.int32)]), True, 0),
    (
        "int_ops",
        lambda: (
            az.LaunchConfig.for_num_elems(300, block=32),
            [rng().integers(-1000, 1000, 300, dtype=np.int32), rng().integers(1, 50, 300, dtype=np.int32) * np.int32(-1), np.zeros(300, np.int32), np.zeros(300, np.int32)],
        ),
        True,
        0,
    ),
    (
        "casts",
        lambda: (
            az.LaunchConfig.for_num_elems(104, block=32),
            [np.concatenate([np.array([np.nan, np.inf, -np.inf, 3e9], np.float32), (rng().standard_normal(100) * 1e3).astype(np.float32)])]
            + [np.zeros(104, t) for t in (np.int32, np.uint32, np.float64, np.int32)],
        ),
        True,
        0,
    ),
    (
        "math32",
        lambda: (az.LaunchConfig.for_num_elems(256, block=32), [(rng().random(256) + 0.5).astype(np.float32), (rng().random(256) + 0.5).astype(np.float32), np.zeros(256, np.float32)]),
        True,
        1e-5,
    ),
    ("math64", lambda: (az.LaunchConfig.for_num_elems(200, block=32), [rng().random(200) * 3 + 0.01, np.zeros(200)]), True, 1e-14),
    ("helpers", lambda: (az.LaunchConfig.for_num_elems(100, block=32), [rng().random(100, dtype=np.float32), np.zeros(100, np.float32)]), True, 0),
    ("histogram", lambda: (az.LaunchConfig(3, 64), [rng().integers(0, 16, 1000, dtype=np.int32), np.zeros(16, np.uint32), np.zeros(1, np.float32)]), True, 0),
    ("block_sum", lambda: (az.LaunchConfig(4, 64, shared_mem=256), [rng().random(200, dtype=np.float32), np.zeros(4, np.float32)]), True, 1e-5),
    (
        "warp_ops",
        lambda: (
            az.LaunchConfig(1, 64),
            [rng().integers(-100, 100, 64, dtype=np.int32)] + [np.zeros(64, t) for t in (np.int32, np.int32, np.float64, np.int64, np.uint32, np.bool_)],
        ),
        True,
        0,
    ),
    ("transpose", lambda: (az.LaunchConfig((3, 2), (8, 8)), [rng().random((13, 21), dtype=np.float32), np.zeros((21, 13), np.float32)]), True, 0),
    ("float_divmod", lambda: (az.LaunchConfig(2, 32), [rng().standard_normal(50) * 100, rng().standard_normal(50) * 10 + 0.5, np.zeros(50), np.zeros(50)]), False, 0),
]


@pytest.mark.parametrize(("name", "make", "safe", "rtol"), CASES, ids=[c[0] for c in CASES])
def test_gpu_matches_cpu(name: str, make: Callable[[], tuple[az.LaunchConfig, list[Any]]], safe: bool, rtol: float) -> None:
    kernel = getattr(K, name)
    config, args = make()
    gpu = _run(az.device(0), kernel, config, [a.copy() if isinstance(a, np.ndarray) else a for a in args], safe)
    cpu = _run(az.device("cpu"), kernel, config, [a.copy() if isinstance(a, np.ndarray) else a for a in args], safe)
    for g, c in zip(gpu, cpu, strict=True):
        if rtol:
            np.testing.assert_allclose(g, c, rtol=rtol)
        else:
            np.testing.assert_array_equal(g, c)


def test_out_of_bounds_read_raises_kernel_fault_on_gpu() -> None:
    dev = az.device(0)
    a = dev.to_device(rng().random(100, dtype=np.float32))
    c = dev.zeros(100, az.f32)
    with pytest.raises(az.KernelFault) as ei:
        K.oob_read.unsafe_launch(az.LaunchConfig(4, 32), a, c)
        dev.synchronize()
    assert ei.value.kind == "read" and ei.value.length == 100 and ei.value.path.endswith("cg_kernels.py")
