"""Record slices through the GPU's code paths (coarsening, vectorised grid-stride loops), run
on the CPU backend with those paths switched on: every field at its offset, no element fused."""

from __future__ import annotations

import cg_records as K
import numpy as np
import pytest
from cg_helpers import run_cpu

from anodize.codegen.driver import compile_cpu


def _records(n: int) -> np.ndarray:
    h = np.zeros(n, K.V.dtype)
    h["x"] = np.arange(n, dtype=np.float32)
    h["y"] = -np.arange(n, dtype=np.float32)
    h["k"] = np.arange(n) % 7
    return h


@pytest.mark.parametrize("name,options", [
    ("swap", {"coarsen": True}), ("swap", {}), ("swap_gs", {"vector_grid_stride": True}), ("swap_gs", {}),
])
@pytest.mark.parametrize("n", [1, 5, 64, 1001])
def test_swap_on_every_path(name: str, options: dict[str, bool], n: int) -> None:
    ck = compile_cpu(getattr(K, name), **options)
    h = _records(n)
    o = np.zeros(n, K.V.dtype)
    grid = (n + 63) // 64
    assert run_cpu(ck, (grid,), (64,), h, o).count == 0
    np.testing.assert_array_equal(o["x"], h["y"] + np.float32(1))
    np.testing.assert_array_equal(o["y"], h["x"])
    np.testing.assert_array_equal(o["k"], h["k"] + 1)


@pytest.mark.parametrize("n", [3, 257])
def test_record_input_keeps_one_index_per_thread(n: int) -> None:
    """A 12-byte record input: not coarsened (consecutive records per thread would spread a warp's
    loads over more lines), and the result is the same."""
    ck = compile_cpu(K.ks, coarsen=True)
    assert ck.coarsen == 1
    h = _records(n)
    o = np.zeros(n, np.float32)
    assert run_cpu(ck, ((n + 63) // 64,), (64,), h, o).count == 0
    np.testing.assert_array_equal(o, h["x"] * h["k"].astype(np.float32))
