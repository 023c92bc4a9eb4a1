"""Guard-derived range facts: which bounds checks go, which must stay, and that the
kernels still compute the same results (CPU backend) at the edge values."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import cg_ranges as K
import numpy as np
import pytest
from budgets import quick_and_full
from cg_helpers import ARCH_PARAMS, filecheck, rng, run_cpu

from anodize.language.diagnostics import CheckError
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.language.ranges import ZERO, Lin, Prover
from anodize.kernel import Kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from stencil2d import reference as stencil_reference  # noqa: E402
from stencil2d import stencil2d  # noqa: E402

RANGE_KERNELS = sorted(n for n, v in vars(K).items() if isinstance(v, Kernel))

# checks left per kernel, and the source text of each remaining check's access
EXPECTED = {
    "stencil_early_exit": [],
    "stencil_or_exit": [],
    "stencil_unguarded": ["u[r - 1, c]"],
    "stencil_no_requires": ["u[r - 1, c]", "u[r + 1, c]"],
    "wrap_i64": ["a[x + 1]"],
    "bounded_i64": [],
    "narrow_i32": ["a[k + 1]"],
    "unsigned_ops": ["a[x - 1]", "a[y + 1]"],
    "reassigned": ["a[j]"],
    "loops": ["a[k + 1]", "a[j]"],
    "helper_boundary": ["a[j - 1]"],
    "requires_offset": [],
    "requires_offset_too_far": ["a[i + 3]"],
    "ifexp_arms": ["a[j + 2]"],
    "ifexp_tile_rows": [],
}


def _text_at(path: str, line: int, col: int) -> str:
    src = Path(path).read_text().splitlines()[line - 1]
    start = col - 1
    depth = 0
    for j in range(start, len(src)):
        if src[j] == "[":
            depth += 1
        elif src[j] == "]":
            depth -= 1
            if depth == 0:
                return src[start : j + 1]
    raise AssertionError(src)


def test_every_range_kernel_has_an_expectation() -> None:
    assert sorted(EXPECTED) == RANGE_KERNELS


@pytest.mark.parametrize("name", RANGE_KERNELS)
def test_checks_left(name: str) -> None:
    ck = compile_gpu(getattr(K, name), ptxas=False)
    left = [_text_at(s.path, s.line, s.col) for s in ck.fault_sites if s.kind == "read"]
    assert left == EXPECTED[name]
    assert ck.bounds_checks == len(EXPECTED[name])
    assert compile_cpu(getattr(K, name)).bounds_checks == len(EXPECTED[name])


def test_stencil2d_checked_build_has_no_checks_llvm() -> None:
    ck = compile_gpu(stencil2d, ptxas=False)
    assert ck.bounds_checks == 0 and ck.fault_sites == ()
    filecheck(
        ck.llvm_ir,
        textwrap.dedent(
            """
            CHECK: define ptx_kernel void @"stencil2d"(
            CHECK-SAME: ptr addrspace(1) noalias nocapture readonly %"u.data", i64 %"u.rows", i64 %"u.cols"
            CHECK-NOT: call void @"__az_fault"
            """
        ),
        what="stencil2d.ll",
    )


def test_stencil2d_checked_ptx_is_the_unchecked_ptx() -> None:
    ck = compile_gpu(stencil2d, ptxas=False)
    filecheck(
        ck.ptx,
        textwrap.dedent(
            """
            CHECK: .entry stencil2d(
            CHECK: .reqntid 32, 8, 1
            CHECK-NOT: __az_fault
            CHECK-COUNT-5: ld.global.nc.{{[bf]}}32
            CHECK: mul.rn.f32
            CHECK: st.global.{{[bf]}}32
            CHECK-NOT: __az_fault
            """
        ),
        what="stencil2d.ptx",
    )
    unchecked = compile_gpu(stencil2d, bounds_checks=False, ptxas=False)
    assert ck.ptx == unchecked.ptx


def test_stencil2d_registers_match_the_unchecked_build(ptxas_ok: object) -> None:
    ck = compile_gpu(stencil2d, "sm_90", ptxas=True)
    unchecked = compile_gpu(stencil2d, "sm_90", bounds_checks=False, ptxas=True)
    assert ck.resources.registers == unchecked.resources.registers
    assert ck.resources.spill_stores == 0


def test_unguarded_neighbour_keeps_its_check_in_ptx() -> None:
    ck = compile_gpu(K.stencil_unguarded, ptxas=False)
    filecheck(
        ck.llvm_ir,
        'CHECK: define ptx_kernel void @"stencil_unguarded"(\nCHECK: call void @"__az_fault"\n',
        what="stencil_unguarded.ll",
    )
    filecheck(ck.ptx, "CHECK: .entry stencil_unguarded(\nCHECK: call.uni __az_fault\n", what="stencil_unguarded.ptx")


@pytest.mark.parametrize("arch", ARCH_PARAMS)
@pytest.mark.parametrize("name", RANGE_KERNELS)
def test_ptxas_accepts_range_kernels(name: str, arch: str, ptxas_ok: object) -> None:
    ptxas_ok(compile_gpu(getattr(K, name), arch, ptxas=False).ptx, arch)  # type: ignore[operator]


@pytest.mark.parametrize("arch", ARCH_PARAMS)
def test_ptxas_accepts_stencil2d(arch: str, ptxas_ok: object) -> None:
    ptxas_ok(compile_gpu(stencil2d, arch, ptxas=False).ptx, arch)  # type: ignore[operator]


# ---- CPU backend results ---------------------------------------------------------------------


def _grid2d(rows: int, cols: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return (-(-cols // 32), -(-rows // 8)), (32, 8)


@pytest.mark.parametrize("shape", [(37, 45), (1, 5), (2, 2), (3, 40)])
def test_stencil2d_on_cpu_matches_numpy(shape: tuple[int, int]) -> None:
    u = rng().random(shape, dtype=np.float32)
    for k in (stencil2d, K.stencil_early_exit):
        out = np.full(shape, -1.0, np.float32)
        f = run_cpu(compile_cpu(k), *_grid2d(*shape), u, out, rank=2)
        assert f.count == 0
        np.testing.assert_allclose(out, stencil_reference(u), rtol=1e-6)


def test_stencil_or_exit_on_cpu() -> None:
    u = rng().random((19, 70), dtype=np.float32)
    out = np.zeros_like(u)
    f = run_cpu(compile_cpu(K.stencil_or_exit), *_grid2d(19, 70), u, out, rank=2)
    assert f.count == 0
    ref = u.copy()
    ref[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - np.float32(4) * u[1:-1, 1:-1]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_unguarded_neighbour_faults_on_row_zero() -> None:
    ck = compile_cpu(K.stencil_unguarded)
    u = rng().random((5, 6), dtype=np.float32)
    out = np.zeros_like(u)
    f = run_cpu(ck, *_grid2d(5, 6), u, out, rank=2)
    assert f.count == 6  # every column of row 0 reads row -1
    assert (f.index, f.length) == (-1, 5)
    np.testing.assert_array_equal(out[0], u[0])  # the failed read yields 0
    np.testing.assert_array_equal(out[1:], u[1:] + u[:-1])


def _run1(ck: object, n: int, *args: object) -> object:
    return run_cpu(ck, (1,), (64,), *args)  # type: ignore[arg-type]


def test_wrapping_guard_does_not_remove_the_check() -> None:
    ck = compile_cpu(K.wrap_i64)
    a = rng().random(10, dtype=np.float32) + 1
    c = np.full(4, -1.0, np.float32)
    f = _run1(ck, 4, a, np.int64(2**63 - 1), c)  # x + 1 wraps: the guard holds
    assert f.count == 4 and f.index == -(2**63) and f.length == 10  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, 0.0)
    f = _run1(ck, 4, a, np.int64(3), c)
    assert f.count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, a[4])


def test_bounded_guard_edges() -> None:
    ck = compile_cpu(K.bounded_i64)
    a = rng().random(10, dtype=np.float32)
    for x, expect in ((8, a[9] + a[8]), (0, a[1] + a[0])):
        c = np.full(3, -1.0, np.float32)
        assert _run1(ck, 3, a, np.int64(x), c).count == 0  # type: ignore[attr-defined]
        np.testing.assert_array_equal(c, expect)
    for x in (9, -1, 2**63 - 1, -(2**63)):
        c = np.full(3, -1.0, np.float32)
        assert _run1(ck, 3, a, np.int64(x), c).count == 0  # type: ignore[attr-defined]
        np.testing.assert_array_equal(c, -1.0)


def test_narrow_and_unsigned_kernels_compute_the_same() -> None:
    a = rng().random(10, dtype=np.float32)
    c = np.full(2, -1.0, np.float32)
    assert _run1(compile_cpu(K.narrow_i32), 2, a, np.int32(8), c).count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, a[9] + a[8])
    ck = compile_cpu(K.unsigned_ops)
    c = np.zeros(2, np.float32)
    # x = 0: `x - 1` is 2**32 - 1, not < 10; y = 2**64 - 1: `y + 1` wraps to 0 < 10
    assert _run1(ck, 2, a, np.uint32(0), np.uint64(2**64 - 1), c).count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, a[0] + a[0])
    c = np.zeros(2, np.float32)
    assert _run1(ck, 2, a, np.uint32(4), np.uint64(9), c).count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, a[4] + a[3] + a[9])


def test_reassigned_variable_faults_past_the_end() -> None:
    ck = compile_cpu(K.reassigned)
    n = 40
    a = rng().random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    f = _run1(ck, n, a, c)
    assert f.count == 1 and (f.index, f.length) == (n, n)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c[:-1], a[1:])
    assert c[-1] == 0


def test_loops_on_cpu() -> None:
    ck = compile_cpu(K.loops)
    n = 12
    a = rng().random(n, dtype=np.float32)
    c = np.zeros(3, np.float32)
    f = _run1(ck, 3, a, c)
    assert f.count == 3 and (f.index, f.length) == (n, n)  # type: ignore[attr-defined]  # a[k + 1] at k = n - 1
    acc = np.float32(0)
    for k in range(1, n):
        acc += a[k] - a[k - 1] + (a[k + 1] if k + 1 < n else np.float32(0))
    for j in range(n):
        acc += a[j]
    np.testing.assert_allclose(c, acc, rtol=1e-6)


def test_helper_and_requires_offsets_on_cpu() -> None:
    n = 30
    a = rng().random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    assert _run1(compile_cpu(K.helper_boundary), n, a, c).count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c[1:], a[:-1] + a[1:])
    assert c[0] == 0
    c = np.zeros(n - 2, np.float32)
    assert _run1(compile_cpu(K.requires_offset), n, a, c).count == 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(c, a[:-2] + a[1:-1] + a[2:])
    f = _run1(compile_cpu(K.requires_offset_too_far), n, a, c)
    assert f.count == 1 and (f.index, f.length) == (n, n)  # type: ignore[attr-defined]


def test_conditional_expression_arms_on_cpu() -> None:
    """The narrowed arms compute what NumPy does; the failed arm's read past the end faults."""
    n = 20
    a = rng().random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    f = _run1(compile_cpu(K.ifexp_arms), n, a, c)
    assert f.count == 1 and (f.index, f.length) == (n + 1, n)  # type: ignore[attr-defined]  # a[j + 2] at j = n - 1
    want = np.concatenate([a[1:], [0]]) + np.concatenate([[0], a[:-1]])
    np.testing.assert_allclose(c[:-1], want[:-1], rtol=1e-6)


def test_conditional_expression_tile_rows_on_cpu() -> None:
    rows, cols = 9, 7
    a = rng().random((rows, cols), dtype=np.float32)
    out = np.zeros((rows, cols), np.float32)
    f = run_cpu(compile_cpu(K.ifexp_tile_rows), (1, 1), (16, 16), a, out, rank=2)
    assert f.count == 0
    want = np.full((rows, cols), -1.0, np.float32)
    for i in range(rows):
        for j in range(cols):
            if 2 * i < rows and 0 <= j - 3:
                want[i, j] = a[2 * i, j - 3]
    np.testing.assert_array_equal(out, want)


# ---- the prover on its own -------------------------------------------------------------------


def test_prover_difference_constraints() -> None:
    x, n = ("var", "x"), ("len", "a", "0")

    def dom(a: tuple[str, ...]) -> tuple[int, int]:
        return (0, 2**63 - 1) if a[0] == "len" else (-(2**63), 2**63 - 1)

    p = Prover([(ZERO, x, -1), (x, n, -2)], dom)  # x >= 1, x <= n - 2
    assert p.le(Lin(ZERO, 0), Lin(x, -1))  # 0 <= x - 1
    assert p.le(Lin(x, 1), Lin(n, 0), -1)  # x + 1 <= n - 1
    assert not p.le(Lin(x, 2), Lin(n, 0), -1)  # x + 2 may be n
    assert p.bounds(Lin(x, 0)) == (1, 2**63 - 3)
    contradiction = Prover([(ZERO, x, -5), (x, ZERO, 3)], dom)  # x >= 5 and x <= 3
    assert not contradiction.le(Lin(x, 0), Lin(ZERO, 100))  # proves nothing


# ---- random kernels: a build with the proofs behaves like one that keeps every check -----------


def _load(src: str, path: Path, name: str) -> Kernel:
    import importlib.util

    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k  # type: ignore[no-any-return]


# seeds, and the checks the prover must remove over them (5 of the first 60 seeds remove one each)
@pytest.mark.parametrize("seeds,min_removed", quick_and_full((20, 2), (60, 5)))
def test_random_guards_are_sound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seeds: int, min_removed: int) -> None:
    import random

    import range_fuzz

    from anodize.language import ranges
    from anodize.language.front import kernel_of
    from anodize.language.typer import type_kernel

    removed = 0
    np_types = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64}
    proofs = [0]
    prove = ranges.RangeFacts.index_in_range

    def counted(self: Any, index: Any, extents: Any) -> bool:
        proven = prove(self, index, extents)
        proofs[0] += proven
        return proven

    for seed in range(seeds):
        src, T = range_fuzz.gen(seed)
        k = _load(src, tmp_path / f"rf_{seed}.py", f"rf_{seed}")
        proofs[0] = 0
        try:
            with monkeypatch.context() as m:
                m.setattr(ranges.RangeFacts, "index_in_range", counted)
                fast = compile_cpu(k)
        except CheckError:  # e.g. mixing i64 and u64: outside the language
            continue
        if not proofs[0]:  # nothing proven: the build that keeps every check is this very build
            continue
        with monkeypatch.context() as m:
            m.setattr(ranges.RangeFacts, "index_in_range", lambda self, index, extents: False)
            front, fdef = kernel_of(k.fn)  # a fresh typing (the front caches the first one)
            full = compile_cpu(type_kernel(front, fdef).ir)
        if full.bounds_checks == fast.bounds_checks:
            continue
        removed += full.bounds_checks - fast.bounds_checks
        lo, hi = range_fuzz.TYPES[T]
        r = random.Random(seed)
        n = r.choice([5, 8, 13])
        a = np.arange(n, dtype=np.float32) + 1
        values = [v for v in (0, 1, 2, 3, n - 2, n - 1, n, n + 1, lo, lo + 1, hi, hi - 1, hi // 2, -1, -2) if lo <= v <= hi]
        for _ in range(20):
            x, y = np_types[T](r.choice(values)), np_types[T](r.choice(values))
            got = []
            for ck in (fast, full):
                c = np.zeros(n, np.float32)
                f = run_cpu(ck, (1,), (32,), a, x, y, c)
                got.append((c.tolist(), f.count))
            assert got[0] == got[1], f"seed {seed}, x={x}, y={y}:\n{src}"
    assert removed >= min_removed  # the generator does exercise the prover
