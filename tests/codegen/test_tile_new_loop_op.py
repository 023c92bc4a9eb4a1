"""The dry run of docs/architecture.md's "How to add X" for a tile op whose node has a loop of
its own (element e of it reads other elements of its operand, so it is not element-wise):
`tile.cumsum(x, axis=k)` (the inclusive running sum along axis k, the last by default) is
declared here, at test time, as a new op is in its files:

1. language/tile_ops.py: its node (`Cumsum`, with `temporaries(threads)`: the tiles its loop
   allocates, which language/tile_storage.py counts) beside its typing row (`@declare`);
2. codegen/tile/ops.py: its loop lowering (`@computes(Cumsum)`), which plain.py's `prep`
   calls with the arrays of the tiles the node declares;
3. anodize/tile.py: its public stub (here set on the module for the test's run);
4. this test.

Nothing else changes: `anodize check` types it and holds its temporary to the on-chip bound,
the CPU backend and the debug device run it (the tile compiler's plain IR for one thread)
against NumPy, partial tiles included, and the GPU lowering gives PTX that ptxas accepts --
through the generic lowering, since the register layouts leave a node they do not know to it."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.codegen.tile.ops import COMPUTES, computes
from anodize.codegen.tile.rows_plan import row_plan
from anodize.language import ir
from anodize.language.diagnostics import Span
from anodize.language.front import front_for_source
from anodize.language.ir_walk import walk
from anodize.language.records import dataclass
from anodize.language.tile_ir import TileTy
from anodize.language.tile_ops import declare
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, tile_storage_bound
from anodize.language.types import I64
from checker.api import check_source
from tile_dry_run import declared_op


# ---- the op, as its files would declare it ------------------------------------------------------


@dataclass(frozen=True)
class Cumsum:  # (1) language/tile_ops.py
    """`tile.cumsum(x, axis=k)`: the inclusive running sum of `x` along axis `k`."""

    value: ir.Expr
    axis: int
    ty: TileTy
    span: Span | None = None

    def temporaries(self, threads: int) -> tuple[TileTy, ...]:
        """The tiles its loop allocates: its result."""
        return (self.ty,)


def _declare_the_op() -> None:
    @declare()  # (1) language/tile_ops.py: its row
    def cumsum(t: Any, node: ast.Call, x: ast.expr, *, axis: ast.expr | None = None) -> ir.Expr:
        v = t.tile_arg(x, "tile.cumsum")
        rank = v.ty.rank
        return Cumsum(v, rank - 1 if axis is None else t.axis_value(axis, rank), v.ty, t.st.span(node))

    @computes(Cumsum)  # (2) codegen/tile/ops.py
    def lower_cumsum(low: Any, node: Cumsum, args: list[Any], temps: list[Any], out: list[ir.Stmt]) -> Any:
        (src,), (dest,) = args, temps
        shape, a, elem = node.ty.shape, node.axis, node.ty.elem
        strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
        k = lambda v: ir.Const(v, I64)  # noqa: E731

        def line(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:  # one thread per line along the axis
            acc, j = low.local(elem, "acc"), low.local(I64, "j")
            at = [j if i == a else c for i, c in enumerate(coords)]
            flat = at[0] if len(at) == 1 else ir.BinOp("+", ir.BinOp("*", at[0], k(strides[0]), I64), at[1], I64)
            step: list[ir.Stmt] = []
            v = low.ev(src, at, step)
            low.note(dest.ref.name, True, False)
            step += [ir.Assign(acc.name, ir.BinOp("+", acc, v, elem)), ir.SharedWrite(dest.ref, (flat,), acc, False, -1)]
            zero = ir.Const(0.0 if elem.is_float else 0, elem)
            return [ir.Assign(acc.name, zero), ir.ForRange(j.name, k(0), k(shape[a]), k(1), tuple(step))]

        out += low.loop(TileTy(elem, shape[:a] + (1,) + shape[a + 1:]), line)
        return dest


def cumsum_stub(x: Any, *, axis: int | None = None) -> Any:  # (3) anodize/tile.py
    """The inclusive running sum of `x` along `axis` (the last by default)."""
    raise RuntimeError("tile.cumsum runs only inside a tile kernel")


@pytest.fixture
def cumsum() -> Iterator[None]:
    """Declare the op; afterwards the rows, the tables read from them and the stubs are restored."""
    with declared_op("cumsum", cumsum_stub, _declare_the_op, COMPUTES):
        yield


SOURCE = '''
import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, i32, tile


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=2)
def rows(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    tile.store(y, pid, tile.cumsum(tile.load(x, (pid.row * 8, pid.col * 32), (8, 32)) * 2.0, axis=1))


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def columns(x: Slice2D[i32], y: DisjointSlice2D[i32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, (pid.col * 16, pid.row * 16), (16, 16))
    t = tile.cumsum(t.T, axis=0)
    tile.store(y, pid, t - tile.max(t, axis=1, keepdims=True))


@az.launch_contract(domain=1)
@az.tile_kernel(num_warps=4)
def flat(x: Slice[f32], y: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(y, pid, tile.cumsum(tile.load(x, pid.get() * 256, 256)))


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=4)
def too_large(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, (pid.row * 64, pid.col * 128), (64, 128))
    tile.store(y, pid, tile.cumsum(t, axis=1))
'''

KERNELS = ("rows", "columns", "flat")


def _module(tmp_path: Path) -> Any:
    p = tmp_path / "cumsum_kernels.py"
    p.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _typed(name: str) -> Any:
    front = front_for_source(SOURCE, "<tile new-loop op dry run>")
    return front.typed(next(f for f in front.kernels() if f.name == name))


def _blocks(a: np.ndarray, tile: tuple[int, int], fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`fn` of each tile of `a` (a partial one padded with zeros, as `tile.load`'s `other`)."""
    out = np.zeros_like(a)
    for r in range(0, a.shape[0], tile[0]):
        for c in range(0, a.shape[1], tile[1]):
            src = a[r:r + tile[0], c:c + tile[1]]
            blk = np.zeros(tile, a.dtype)
            blk[:src.shape[0], :src.shape[1]] = src
            out[r:r + tile[0], c:c + tile[1]] = fn(blk)[:src.shape[0], :src.shape[1]]
    return out


def test_without_the_op_check_rejects_the_call() -> None:
    diags = check_source(SOURCE, "<tile new-loop op: undeclared>")
    lines = SOURCE.splitlines()
    errors = [d for d in diags if d.severity == "error"]
    assert errors and all("tile.cumsum(" in lines[d.span.line - 1] for d in errors), diags
    assert any("`tile.cumsum`" in d.message for d in errors)


def test_check_types_it_and_counts_its_temporary(cumsum: None) -> None:
    errors = [d for d in check_source(SOURCE, "<tile new-loop op: declared>") if d.severity == "error"]
    # the only error: `too_large`, whose 32 KiB tile local fits alone but not with its cumsum's 32 KiB temporary
    assert [d.code for d in errors] == ["az-type"], errors
    assert "65536 bytes" in errors[0].message and errors[0].span.line == SOURCE.splitlines().index("def too_large(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:") + 1
    for name, shape, axis in (("rows", (8, 32), 1), ("columns", (16, 16), 0), ("flat", (256,), 0)):
        k = _typed(name).ir
        assert k is not None
        nodes = [n for n in walk(k.body) if isinstance(n, Cumsum)]
        assert len(nodes) == 1 and nodes[0].ty.shape == shape and nodes[0].axis == axis
        # the bound counts the node's declared temporary, and the lowering allocates no more than the bound
        plain = lower_tiles(k, 32 * k.tile_warps)
        allocated = sum(int(np.prod(t.shape)) * t.elem.info.mem_bits // 8 for _, t in plain.shared)
        assert nodes[0].ty.size * 4 <= tile_storage_bound(k) <= STATIC_SHARED_MAX_BYTES
        assert 0 < allocated <= tile_storage_bound(k)


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_the_host_devices_run_it(cumsum: None, tmp_path: Path, device: str) -> None:
    mod = _module(tmp_path)
    dev = az.device(device)
    rng = np.random.default_rng(1)
    # partial tiles on both axes: the masked elements load 0, so each row's sum is the row's own
    x = rng.uniform(-1.0, 1.0, (21, 45)).astype(np.float32)
    y = dev.zeros((21, 45), az.f32)
    mod.rows[az.LaunchConfig.for_tiles((21, 45), (8, 32))](dev.to_device(x), y)
    want = _blocks(x * np.float32(2.0), (8, 32), lambda b: np.cumsum(b, axis=1, dtype=np.float32))
    np.testing.assert_allclose(y.to_host(), want, rtol=1e-5, atol=1e-5)
    # a transposed operand, the result assigned to the variable it reads, then reduced
    xi = rng.integers(-50, 50, (29, 23)).astype(np.int32)
    yi = dev.zeros((23, 29), az.i32)
    mod.columns[az.LaunchConfig.for_tiles((23, 29), (16, 16))](dev.to_device(xi), yi)

    def col(b: np.ndarray) -> np.ndarray:
        c = np.cumsum(b, axis=0, dtype=np.int32)
        return c - c.max(axis=1, keepdims=True)

    np.testing.assert_array_equal(yi.to_host(), _blocks(xi.T.copy(), (16, 16), col))
    # 1-D, the axis by default, the last program's tile partial
    n = 600
    xf = rng.uniform(0.0, 1.0, n).astype(np.float32)
    yf = dev.zeros((n,), az.f32)
    mod.flat[az.LaunchConfig.for_tiles((n,), (256,))](dev.to_device(xf), yf)
    want_f = np.concatenate([np.cumsum(xf[i:i + 256], dtype=np.float32) for i in range(0, n, 256)])
    np.testing.assert_allclose(yf.to_host(), want_f, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_gpu_lowering_assembles(cumsum: None, arch: str, tmp_path: Path, ptxas_ok: Callable[[str, str], None]) -> None:
    mod = _module(tmp_path)
    for name in KERNELS:
        k = _typed(name).ir
        assert row_plan(k, 32 * k.tile_warps) is None  # not a row node: the generic lowering
        plain = lower_tiles(k, 32 * k.tile_warps)
        assert not any(isinstance(n, Cumsum) for n in walk(plain.body))
        ptx = compile_gpu(getattr(mod, name), arch, ptxas=False).ptx
        assert "bar.sync" in ptx  # the cumsum's loop and the store that reads its array: a barrier between
        ptxas_ok(ptx, arch)


def test_a_loop_node_must_declare_its_temporaries() -> None:
    @dataclass(frozen=True)
    class NoTemps:
        value: ir.Expr
        ty: TileTy

    with pytest.raises(TypeError, match="temporaries"):
        computes(NoTemps)
