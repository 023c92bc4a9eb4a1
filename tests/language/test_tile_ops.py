"""The tile ops are declared once each (anodize/language/tile_ops.py): an op's typing function
with its `@declare` row (arity and keywords from its signature).  The vocabulary, the symbol
table and the typer read the rows; the public stubs (anodize/tile.py) agree with them; and a
new op goes through the declaration path alone (the dry run of docs/architecture.md's "How to
add X": its stub, its declared typing; an op with a node of its own adds the node and its
element lowering: tests/codegen/test_tile_new_node_op.py)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

import anodize.tile as az_tile
from anodize.language import intrinsics, symbols
from anodize.language.front import front_for_source
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import TileFull
from anodize.language.tile_ops import TILE_OPS, declare
from anodize.language.tile_vocab import TILE_FUNCS, TILE_KEYWORDS


def test_the_vocabulary_reads_the_declarations() -> None:
    assert TILE_FUNCS == {n: op.arity for n, op in TILE_OPS.items()}
    assert TILE_FUNCS["load"] == (3, 3) and TILE_FUNCS["matmul"] == (2, 3) and TILE_FUNCS["program_id_2d"] == (0, 0)
    assert TILE_KEYWORDS == {"load": {"other"}, "sum": {"axis", "keepdims"}, "max": {"axis", "keepdims"},
                             "min": {"axis", "keepdims"}, "matmul": {"allow_tf32"}}
    assert {n for n, op in TILE_OPS.items() if op.writes is not None} == {"store"}
    for n, op in TILE_OPS.items():
        decl = intrinsics.INTRINSICS[f"tile.{n}"]
        assert (decl.arity, decl.keywords, decl.writes) == (op.arity, op.keywords, op.writes), n


def test_the_stubs_agree_with_the_declarations() -> None:
    """Every function of `az.tile` is a declared op and every op a public stub, with the same
    positional arity (its keywords are the stub's defaulted parameters of those names)."""
    funcs = {n for n in az_tile.__all__ if inspect.isfunction(getattr(az_tile, n))}
    assert funcs == set(TILE_OPS)
    for n, op in TILE_OPS.items():
        params = inspect.signature(getattr(az_tile, n)).parameters
        assert op.keywords <= {p for p, v in params.items() if v.default is not inspect.Parameter.empty}, n
        positional = [v for p, v in params.items() if p not in op.keywords]
        lo = sum(1 for v in positional if v.default is inspect.Parameter.empty)
        assert (lo, len(positional)) == op.arity, n
        assert getattr(az_tile, n).__doc__, n


@pytest.fixture
def declared() -> Iterator[None]:
    """Restore the rows and the tables read from them, which a test declares an op into."""
    saved = [(t, dict(t)) for t in (TILE_OPS, intrinsics.INTRINSICS, symbols._TABLE)]
    try:
        yield
    finally:
        for t, rows in saved:
            t.clear()
            t.update(rows)


SOURCE = """
import anodize as az
from anodize import DisjointSlice, f32, tile


@az.tile_kernel
@az.launch_contract(domain=1)
def fill_ones(out: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(out, pid, tile.ones(128, f32{extra}))
"""


def _typed(stage: str, extra: str = "") -> Any:
    front = front_for_source(SOURCE.replace("{extra}", extra), f"<tile op dry run: {stage}>")  # (a front per stage: fronts are cached)
    fdef = next(f for f in front.kernels() if f.name == "fill_ones")
    return front.typed(fdef)


def test_a_declared_op_is_typed(declared: None) -> None:
    """The dry run: `tile.ones(shape, T)` declared here (on the stub's side it is one `def` in
    anodize/tile.py), built from an existing node (`TileFull`).  The symbol table and the typer
    take it from its row alone; no other module changes."""
    assert _typed("before").ir is None  # not an op yet: rejected

    @declare()
    def ones(t, node, shape, dtype, *, exact=None):  # type: ignore[no-untyped-def]
        return t.tile_full(node, shape, ast.copy_location(ast.Constant(1), node), dtype)

    assert TILE_OPS["ones"].arity == (2, 2) and TILE_OPS["ones"].keywords == {"exact"}
    # the tables read from the rows when language/intrinsics.py and symbols.py load (as a new op's would be)
    intrinsics.INTRINSICS.update(intrinsics._declare())
    symbols._TABLE.update({n: d.tag for n, d in intrinsics.INTRINSICS.items()})
    typed = _typed("declared")
    assert typed.ir is not None, typed.diagnostics
    fulls = [n for n in walk(typed.ir.body) if isinstance(n, TileFull)]
    assert len(fulls) == 1 and fulls[0].value.value == 1 and fulls[0].ty.shape == (128,)  # type: ignore[attr-defined]
    # the row's arity and keywords are what the typer checks
    bad = _typed("declared", ", 1")
    assert bad.ir is None and [d.code for d in bad.diagnostics] == ["az-type"], bad.diagnostics
    assert bad.diagnostics[0].message == "`tile.ones` takes 2 positional arguments, got 3"
