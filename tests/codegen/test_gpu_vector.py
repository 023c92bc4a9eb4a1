"""On a GPU: vectorised grid-stride loops and range-proven kernels give the CPU's results.

Skipped without a GPU (the `gpu` marker); the lead runs these on the H200.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import cg_gridstride as G
import cg_ranges as R
import numpy as np
import pytest
from cg_helpers import rng

import anodize as az

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from stencil2d import reference as stencil_reference  # noqa: E402
from stencil2d import stencil2d  # noqa: E402


def _host_args(name: str, n: int) -> list[Any]:
    r = rng()
    if name == "copy_gs":
        return [r.random(n + 1, dtype=np.float32), np.zeros(n + 1, np.float32)]
    if name == "vecadd_gs":
        return [r.random(n + 1, dtype=np.float32), r.random(n + 1, dtype=np.float32), np.zeros(n + 1, np.float32)]
    if name == "axpy64_gs":
        return [1.25, r.random(n + 1), r.random(n + 1), np.zeros(n + 1)]
    if name == "divmod_gs":
        return [r.integers(-1000, 1000, n + 1).astype(np.int32), r.integers(1, 10, n + 1).astype(np.int32), np.zeros(n + 1, np.int32), np.zeros(n + 1, np.int32)]
    if name == "update_gs":
        return [r.integers(0, 2**32, n + 1).astype(np.uint32), r.integers(0, 2**32, n + 1).astype(np.uint32)]
    if name == "widen_gs":
        return [r.random(n + 1, dtype=np.float32), np.zeros(n + 1), np.zeros(n + 1, np.int32)]
    raise AssertionError(name)


def _run(dev: Any, kernel: Any, host: list[Any], n: int, off: int, grid: int) -> list[np.ndarray]:
    bufs = [dev.to_device(a) if isinstance(a, np.ndarray) else a for a in host]
    views = [b[off : off + n] if not isinstance(b, float) else b for b in bufs]
    kernel[az.LaunchConfig(grid, 64)](*views)
    dev.synchronize()
    return [b.to_host() for b in bufs if not isinstance(b, float)]


@pytest.mark.parametrize("name", ["copy_gs", "vecadd_gs", "axpy64_gs", "divmod_gs", "update_gs", "widen_gs"])
@pytest.mark.parametrize(("n", "grid"), [(1, 1), (5, 1), (1003, 2), (1 << 16, 7), (100_003, 400)])
@pytest.mark.parametrize("off", [0, 1])
def test_vector_grid_stride_matches_cpu(name: str, n: int, grid: int, off: int) -> None:
    kernel = getattr(G, name)
    host = _host_args(name, n)
    gpu = _run(az.device(0), kernel, [a.copy() if isinstance(a, np.ndarray) else a for a in host], n, off, grid)
    cpu = _run(az.device("cpu"), kernel, [a.copy() if isinstance(a, np.ndarray) else a for a in host], n, off, grid)
    for g, c in zip(gpu, cpu, strict=True):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("n", [7, 1003, 4098])
def test_gpu_mapping(n: int) -> None:
    dev = az.device(0)
    for off, vector in ((0, True), (1, False)):
        a = dev.zeros(n + 1, az.i32)
        c = dev.zeros(n + 1, az.i32)
        G.owner_gs[az.LaunchConfig(3, 64)](a[off : off + n], c[off : off + n])
        got = c.to_host()[off : off + n]
        idx = np.arange(n)
        tail = n & ~3
        want = np.where(idx < tail, (idx // 4) % 192, (idx - tail) % 192) if vector else idx % 192
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (257, 511), (1024, 999)])
def test_stencil2d_without_checks_on_gpu(shape: tuple[int, int]) -> None:
    dev = az.device(0)
    assert stencil2d.compile().bounds_checks == 0
    u_h = rng().random(shape, dtype=np.float32)
    u, out = dev.to_device(u_h), dev.empty(shape, az.f32)
    stencil2d[az.LaunchConfig.for_shape(shape, block=(32, 8))](u, out)
    np.testing.assert_allclose(out.to_host(), stencil_reference(u_h), rtol=1e-6)
    for k in (R.stencil_early_exit,):
        out2 = dev.empty(shape, az.f32)
        k[az.LaunchConfig.for_shape(shape, block=(32, 8))](u, out2)
        np.testing.assert_array_equal(out2.to_host(), out.to_host())


def test_unguarded_neighbour_still_faults_on_gpu() -> None:
    dev = az.device(0)
    u = dev.to_device(rng().random((5, 6), dtype=np.float32))
    out = dev.empty((5, 6), az.f32)
    with pytest.raises(az.KernelFault) as ei:
        R.stencil_unguarded[az.LaunchConfig.for_shape((5, 6), block=(32, 8))](u, out)
        dev.synchronize()
    assert ei.value.kind == "read" and ei.value.length == 5
