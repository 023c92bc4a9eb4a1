"""The dry run of docs/architecture.md's "How to add X" for a tile op with an IR node of its
own: `tile.clamp01(x)` (each element clamped to [0, 1]) is declared here, at test time, as a
new op is in its files:

1. language/tile_ops.py: its node (`Clamp01`) beside its typing row (`@declare`);
2. codegen/tile/ops.py: its element lowering (`@elementwise(Clamp01)`);
3. anodize/tile.py: its public stub (here set on the module for the test's run);
4. this test.

Nothing else changes: `anodize check` types it (the symbol table and the typer read the row),
the CPU backend runs it (the tile compiler's plain IR for one thread) against NumPy, and the
GPU lowering gives PTX that ptxas accepts -- through the generic lowering, since the register
layouts leave a node they do not know to it."""

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
from anodize.codegen.tile.ops import COMPUTES, ELEMENTWISE, elementwise
from anodize.codegen.tile.rows_plan import row_plan
from anodize.language import ir
from anodize.language.diagnostics import Span
from anodize.language.front import front_for_source
from anodize.language.ir_walk import walk
from anodize.language.records import dataclass
from anodize.language.tile_ir import TileTy
from anodize.language.tile_ops import declare
from checker.api import check_source
from tile_dry_run import declared_op


# ---- the op, as its files would declare it ------------------------------------------------------


@dataclass(frozen=True)
class Clamp01:  # (1) language/tile_ops.py
    """`tile.clamp01(x)`: each element of `x` clamped to [0, 1]."""

    value: ir.Expr
    ty: TileTy
    span: Span | None = None


def _declare_the_op() -> None:
    @declare()  # (1) language/tile_ops.py: its row
    def clamp01(t: Any, node: ast.Call, x: ast.expr) -> ir.Expr:
        v = t.tile_arg(x, "tile.clamp01")
        return Clamp01(v, v.ty, t.st.span(node))

    @elementwise(Clamp01)  # (2) codegen/tile/ops.py
    def lower_clamp01(node: Clamp01, args: list[ir.Expr]) -> ir.Expr:
        (x,) = args
        ty = node.ty.elem
        zero, one = (ir.Const(v, ty) for v in ((0.0, 1.0) if ty.is_float else (0, 1)))
        return ir.BinOp("min", ir.BinOp("max", x, zero, ty), one, ty)


def clamp01_stub(x: Any) -> Any:  # (3) anodize/tile.py
    """Each element of `x` clamped to [0, 1]."""
    raise RuntimeError("tile.clamp01 runs only inside a tile kernel")


@pytest.fixture
def clamp01() -> Iterator[None]:
    """Declare the op; afterwards the rows, the tables read from them and the stubs are restored."""
    with declared_op("clamp01", clamp01_stub, _declare_the_op, ELEMENTWISE):
        yield


SOURCE = '''
import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, tile


@az.launch_contract(domain=1)
@az.tile_kernel(num_warps=4)
def scaled(x: Slice[f32], y: DisjointSlice[f32], a: f32) -> None:
    pid = tile.program_id_1d()
    tile.store(y, pid, tile.clamp01(tile.load(x, pid.get() * 256 + 16, 256) * a - 0.5) + 1.0)


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=2)
def flipped(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, (pid.col * 16, pid.row * 8), (16, 8))
    c = tile.clamp01(t.T)
    tile.store(y, pid, c - tile.sum(c, axis=1, keepdims=True))


@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=1)
def in_place(x: Slice2D[f32], y: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    t = tile.load(x, (pid.col * 16, pid.row * 16), (16, 16))
    t = tile.clamp01(t.T)
    tile.store(y, pid, t)
'''


def _module(tmp_path: Path) -> Any:
    p = tmp_path / "clamp_kernels.py"
    p.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _typed(name: str) -> Any:
    front = front_for_source(SOURCE, "<tile new-node op dry run>")
    return front.typed(next(f for f in front.kernels() if f.name == name))


def test_without_the_op_check_rejects_the_call() -> None:
    diags = check_source(SOURCE, "<tile new-node op: undeclared>")
    assert diags and all("clamp01" in d.message for d in diags if d.severity == "error"), diags


def test_check_types_the_new_node(clamp01: None) -> None:
    assert [d for d in check_source(SOURCE, "<tile new-node op: declared>") if d.severity == "error"] == []
    for name, shape in (("scaled", (256,)), ("flipped", (8, 16)), ("in_place", (16, 16))):
        k = _typed(name).ir
        assert k is not None
        nodes = [n for n in walk(k.body) if isinstance(n, Clamp01)]
        assert len(nodes) == 1 and nodes[0].ty == TileTy(nodes[0].ty.elem, shape)


@pytest.mark.parametrize("device", ["cpu", "debug"])
def test_the_host_devices_run_it(clamp01: None, tmp_path: Path, device: str) -> None:
    mod = _module(tmp_path)
    dev = az.device(device)
    n = 1024  # the last program's store is inside, its load (16 further) not: masked through the new node
    x = np.linspace(-1.0, 2.0, n, dtype=np.float32)
    y = dev.zeros((n,), az.f32)
    mod.scaled[az.LaunchConfig.for_tiles((n,), (256,))](dev.to_device(x), y, 1.5)
    shifted = np.concatenate([x[16:], np.zeros(16, np.float32)])  # `other`: 0 past the end
    np.testing.assert_allclose(y.to_host(), np.clip(shifted * np.float32(1.5) - np.float32(0.5), 0, 1) + 1, rtol=1e-6)
    if device == "debug":
        return  # (the debug device interprets the same plain IR: one kernel is enough there)
    # an operand read transposed (another element than the one computed: the node's operand is staged)
    x2 = np.random.default_rng(0).uniform(-0.5, 1.5, (37, 29)).astype(np.float32)
    y2 = dev.zeros((29, 37), az.f32)
    mod.flipped[az.LaunchConfig.for_tiles((29, 37), (8, 16))](dev.to_device(x2), y2)
    want = np.zeros((29, 37), np.float32)
    c = np.clip(x2.T, 0, 1)
    for r in range(0, 29, 8):
        for s in range(0, 37, 16):
            blk = np.zeros((8, 16), np.float32)
            src = c[r:r + 8, s:s + 16]
            blk[:src.shape[0], :src.shape[1]] = src
            got = blk - blk.sum(axis=1, keepdims=True)
            want[r:r + 8, s:s + 16] = got[:src.shape[0], :src.shape[1]]
    np.testing.assert_allclose(y2.to_host(), want, rtol=1e-5, atol=1e-5)
    # the new node reads the variable it is assigned to at other elements: staged, not overwritten
    y3 = dev.zeros((29, 37), az.f32)
    mod.in_place[az.LaunchConfig.for_tiles((29, 37), (16, 16))](dev.to_device(x2), y3)
    np.testing.assert_allclose(y3.to_host(), c, rtol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_gpu_lowering_assembles(clamp01: None, arch: str, tmp_path: Path, ptxas_ok: Callable[[str, str], None]) -> None:
    mod = _module(tmp_path)
    for kern, name in ((mod.scaled, "scaled"), (mod.flipped, "flipped"), (mod.in_place, "in_place")):
        k = _typed(name).ir
        assert row_plan(k, 32 * k.tile_warps) is None  # not a row node: the generic lowering
        plain = lower_tiles(k, 32 * k.tile_warps)
        assert not any(isinstance(n, Clamp01) for n in walk(plain.body))
        ptx = compile_gpu(kern, arch, ptxas=False).ptx
        assert "max.f32" in ptx and "min.f32" in ptx
        ptxas_ok(ptx, arch)


def test_every_node_declared_with_an_op_has_a_lowering() -> None:
    """A node declared in language/tile_ops.py (a dataclass with a `ty`) without its lowering in
    codegen/tile/ops.py (`@elementwise`, or `@computes` for a loop of its own: the dry run
    tests/codegen/test_tile_new_loop_op.py) would reach the tile compiler as an internal error:
    found here instead."""
    import anodize.language.tile_ops as declared_ops
    import anodize.codegen.tile.plain  # noqa: F401  (the tile compiler, which loads ops.py's lowerings)

    nodes = [c for c in vars(declared_ops).values()
             if isinstance(c, type) and c.__module__ == declared_ops.__name__ and "ty" in getattr(c, "__dataclass_fields__", {})]
    assert [c.__name__ for c in nodes if c not in ELEMENTWISE and c not in COMPUTES] == []
