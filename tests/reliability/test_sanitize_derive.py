"""tools/sanitize_runner.py's derived launches, on the CPU backend (no GPU, no sanitizer):
generic kernels (type variables, `az.Constant`), `shared_mem=` contracts and 3-D contracts."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sanitize_runner as R
from sanitize import ROOT

import anodize as az

ACCEPT = ROOT / "fixtures" / "accept"


@pytest.fixture(scope="module")
def mods() -> dict[str, Any]:
    """The fixtures, loaded once as the runner loads them."""
    names = ("generic_kernels", "local_values", "shared_mem_contract", "three_d")
    return {n: R.load(ACCEPT / f"{n}.py") for n in names}


def _plans(kernel: Any, each_member: bool = False) -> list[R.LaunchPlan]:
    plans = R.derive_launches(kernel, each_member)
    assert all(isinstance(p, R.LaunchPlan) for p in plans), plans
    return plans  # type: ignore[return-value]


def test_a_type_variable_takes_the_first_member_or_each(mods: dict[str, Any]) -> None:
    (p,) = _plans(mods["generic_kernels"].scale)
    assert p.label == "[T=f32]" and p.constants == {}
    assert [q.scalar.name for q in p.params] == ["f32", "f32", "f32"]
    both = _plans(mods["generic_kernels"].scale, each_member=True)
    assert [q.label for q in both] == ["[T=f32]", "[T=f64]"]
    assert [q.params[1].scalar.name for q in both] == ["f32", "f64"]


def test_a_constant_gets_a_small_value_and_stays_an_argument(mods: dict[str, Any]) -> None:
    (p,) = _plans(mods["generic_kernels"].shift)
    assert p.label == "[I=i32,k=4]" and p.constants == {"k": 4}
    assert p.order == ("x", "out", "k") and [q.name for q in p.params] == ["x", "out"]  # the entry does not take `k`
    (w,) = _plans(mods["local_values"].window_sum)
    assert w.constants == {"width": 4} and w.label == "[T=f32,width=4]"


def test_a_constant_value_the_compile_path_refuses_is_passed_over(tmp_path: Path) -> None:
    src = """
    import anodize as az
    from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=64)
    @kernel
    def fifth(a: Slice[f32], c: DisjointSlice[f32], k: az.Constant[int]) -> None:
        i = thread.index_1d()
        if i in c:
            buf = az.local.array(k, f32)
            for j in range(k):
                buf[j] = a[i]
            c[i] = buf[4]  # needs k > 4: the first values tried (4, 2) are refused when specialised
    """
    path = tmp_path / "const_refused.py"
    path.write_text(textwrap.dedent(src))
    mod = R.load(path)
    (p,) = _plans(mod.fifth)
    assert p.constants["k"] > 4 and p.constants["k"] in R.CONST_CHOICES["i64"]
    rows = R.run_module(az.device("cpu"), path, call_main=False, rng=np.random.default_rng(0))
    assert [r["status"] for r in rows] == ["ok"], rows


def test_shared_mem_contracts_get_the_bytes_they_ask_for(mods: dict[str, Any]) -> None:
    m = mods["shared_mem_contract"]
    (p,) = _plans(m.reverse_block)  # shared_mem=lambda block: block * 4, block=64
    assert p.shared_mem == 64 * 4 and p.config().shared_mem == 256
    (q,) = _plans(m.scaled)  # shared_mem=lambda n: n * 4 + 16
    assert q.shared_mem == q.shapes["n"] * 4 + 16 and q.shared_mem <= R.MAX_SHARED


def test_three_d_contracts_get_a_three_d_grid(mods: dict[str, Any]) -> None:
    (p,) = _plans(mods["three_d"].shift)
    assert p.domain == 3 and len(p.grid_shape) == 3 and p.block == (8, 4, 2)
    assert p.shapes["u"] == p.shapes["out"] == p.grid_shape  # `requires`: every extent equal
    cfg = p.config()
    assert cfg.rank == 3 and cfg.block == (8, 4, 2)
    layers, rows, cols = p.grid_shape
    assert cfg.grid == (-(-cols // 8), -(-rows // 4), -(-layers // 2))


def test_the_derived_launches_run_on_the_cpu_backend(mods: dict[str, Any]) -> None:
    dev = az.device("cpu")
    rows: list[dict[str, Any]] = []
    for name in ("generic_kernels", "shared_mem_contract", "three_d"):
        rows += R.run_module(dev, ACCEPT / f"{name}.py", call_main=False, rng=np.random.default_rng(0), each_member=True)
    got = {r["kernel"]: r["status"] for r in rows}
    assert got == {
        "scale[T=f32]": "ok", "scale[T=f64]": "ok", "shift[I=i32,k=4]": "ok", "shift[I=i64,k=4]": "ok",
        "reverse_block": "ok", "scaled": "ok", "fill": "ok", "shift": "ok",
    }, got


def test_a_kernel_fault_is_recorded_as_a_fault_not_an_error(tmp_path: Path) -> None:
    src = """
    import anodize as az
    from anodize import DisjointSlice, Slice, i32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=32, requires=lambda k, c: len(k) == len(c))
    @kernel
    def pick(k: Slice[i32], c: DisjointSlice[i32]) -> None:
        i = thread.index_1d()
        if i in c:
            t = az.local.array(2, i32)
            for j in range(2):
                t[j] = j
            c[i] = t[k[i]]  # the derived inputs are 0-2: index 2 is out of range, a KernelFault
    """
    path = tmp_path / "faults.py"
    path.write_text(textwrap.dedent(src))
    (row,) = R.run_module(az.device("cpu"), path, call_main=False, rng=np.random.default_rng(0))
    assert row["status"].startswith("fault: KernelFault"), row
