"""The methods of kernel values (`a.add(j, v)`, `w.get()`, `t.at(r, s)`, `s.write_unchecked(i, v)`)
are declared once each, in anodize/language/intrinsics.py (`METHODS`, by the kind of value
they are called on and their name): the checker's resolver and the typer classify a method by
its declaration alone, so adding one is its row and its typing (docs/architecture.md, "How to
add X": the dry run below), and no module of checker/ spells a method's name."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anodize.language import intrinsics, ir
from anodize.language.front import front_for_source
from anodize.language.ir_walk import walk
from checker.engine import analyze_source

ROOT = Path(__file__).resolve().parents[2]


def test_every_method_is_declared_by_receiver_and_name() -> None:
    m = intrinsics.METHODS
    atomics = ("add", "sub", "min", "max", "exchange", "and_", "or_", "xor", "compare_exchange", "load", "store")
    assert intrinsics.ATOMIC_METHOD_NAMES == atomics
    for n in atomics:
        for receiver, kind in (("atomic_slice", "atomic_op"), ("shared_atomic", "shared_atomic")):
            d = m[receiver, n]
            assert d.tag == (kind, n) and d.receiver == receiver and d.keywords == {"scope", "order"}
            assert d.mutates == (n != "load") and d.thread_dependent and d.varies == "lane"
    assert m["atomic_slice", "compare_exchange"].arity == (3, 3) and m["atomic_slice", "load"].arity == (1, 1)
    assert intrinsics.WRITE_UNCHECKED is m["slice", "write_unchecked"]
    assert intrinsics.WRITE_UNCHECKED.tag == ("unchecked_write",) and intrinsics.WRITE_UNCHECKED.unsafe and intrinsics.WRITE_UNCHECKED.mutates and intrinsics.WRITE_UNCHECKED.arity == (2, 2)
    assert {(r, n) for (r, n), d in m.items() if d.kind == "witness_get"} == {("witness", "get"), ("local_witness", "get")}
    assert {n: d.kind for (r, n), d in m.items() if r == "thread_tile"} == {"at": "tile_at", "load": "tile_io", "store": "tile_io"}
    assert {n: d.arity for (r, n), d in m.items() if r == "thread_tile"} == {"at": (2, 2), "load": (3, 3), "store": (2, 2)}
    assert {(r, n) for (r, n) in m if r.startswith("tile")} >= {("tile_id", "get"), ("tile", "reshape"), ("tile", "astype")}
    assert intrinsics.method("slice", "add") is None and intrinsics.method("witness", "at") is None
    for (r, n), d in m.items():
        assert d.name == f"{r}.{n}" and d.arity is not None, (r, n)


SOURCE = """
from anodize import AtomicSlice, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256)
@kernel
def bump(a: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    a.{call}
"""


@pytest.fixture
def declared() -> Iterator[None]:
    """Restore the method rows a test declares one into."""
    saved = dict(intrinsics._ATOMICS), dict(intrinsics.METHODS)
    try:
        yield
    finally:
        intrinsics._ATOMICS.clear()
        intrinsics._ATOMICS.update(saved[0])
        intrinsics.METHODS.clear()
        intrinsics.METHODS.update(saved[1])


def _check(stage: str, call: str) -> tuple[Any, list[Any]]:
    """The checker's callee of the method call, and the diagnostics of the module."""
    path = f"<value method dry run: {stage}>"  # a path per stage: fronts are cached by source and path
    got = analyze_source(SOURCE.replace("{call}", call), path)
    assert got.model is not None
    calls = [(c, k) for c, k in got.model.callees.items() if isinstance(c.func, ast.Attribute) and c.func.attr == "inc"]
    assert len(calls) == 1
    return calls[0][1], got.diagnostics


def _typed(stage: str, call: str) -> Any:
    front = front_for_source(SOURCE.replace("{call}", call), f"<value method typed: {stage}>")
    fdef = next(f for f in front.kernels() if f.name == "bump")
    return front.typed(fdef)


def _atomics(tree: object) -> list[ir.Atomic]:
    return [n for n in walk(tree) if isinstance(n, ir.Atomic)]


def test_a_declared_method_is_classified_and_typed(declared: None) -> None:
    """The dry run: a new atomic read-modify-write `a.inc(j, v)` is one row of the atomics'
    declarations (`_ATOMICS`, which declares it for an `AtomicSlice` and a block-shared atomic
    array).  The checker's resolver and the typer take it from the row alone; its lowering (an
    `ir.Atomic` op) is the backends' part and not run here."""
    callee, diags = _check("before", "inc(i, 1)")
    assert callee.kind == "method" and callee.decl is None  # not a method yet: rejected
    assert {d.code for d in diags} == {"az-unsupported"} and "method `inc` of a slice" in diags[0].message, diags
    assert _typed("before", "inc(i, 1)").ir is None

    intrinsics._ATOMICS["inc"] = 2  # the row
    intrinsics.METHODS.update(intrinsics._declare_methods())  # as when intrinsics.py loads
    callee, diags = _check("declared", "inc(i, 1)")
    assert callee.kind == "atomic_op" and callee.decl is intrinsics.METHODS["atomic_slice", "inc"]
    assert diags == [], diags
    assert intrinsics.METHODS["shared_atomic", "inc"].kind == "shared_atomic"
    typed = _typed("declared", "inc(i, 1)")
    assert typed.ir is not None, typed.diagnostics
    (atomic,) = _atomics(typed.ir.body)
    assert atomic.op == "inc" and atomic.scope == "device" and atomic.order == "relaxed"
    # the row's arity and keywords are what the typer checks
    bad = _typed("declared", "inc(i)")
    assert bad.ir is None and [d.code for d in bad.diagnostics] == ["az-type"], bad.diagnostics
    assert bad.diagnostics[0].message == "`a.inc` takes `(j, v)`, got 1 argument"
    scoped = _typed("declared", 'inc(i, 1, order="acq_rel")')
    assert scoped.ir is not None and _atomics(scoped.ir.body)[0].order == "acq_rel", scoped.diagnostics


# the spelled method names the checker once classified calls by (vocab's ATOMIC_METHODS,
# TILE_AT, TILE_IO; "get", "write_unchecked"): the declarations say them now
_METHOD_WORDS = ("add", "sub", "min", "max", "exchange", "and_", "or_", "xor", "compare_exchange",
                 "load", "store", "write_unchecked", "get", "at", "reshape", "astype")  # fmt: skip
_COMPARED = re.compile(
    r"""(?:==|!=|\bin\b|\bnot\s+in\b)\s*\(?[^#\n]*?["'](?:%s)["']|["'](?:%s)["']\s*(?:==|!=|\bin\b)""" % ("|".join(_METHOD_WORDS), "|".join(_METHOD_WORDS))
)
_VOCAB = re.compile(r"\b(?:ATOMIC_METHODS|ATOMIC_RMW|TILE_AT|TILE_IO|TILE_METHODS|UNSAFE_METHODS)\b")


def test_the_checker_spells_no_method_name() -> None:
    """No module of checker/ compares a name with a method's spelling or reads a vocabulary
    table of method names: a method is what its declaration (intrinsics.METHODS) says."""
    found = []
    for path in sorted((ROOT / "checker").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _COMPARED.search(code) or _VOCAB.search(code):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_grep_sees_a_spelled_method() -> None:
    """The pattern above finds the spellings it forbids (so its silence means something)."""
    for line in ('if attr == "get":', 'x = callee.name != "load"', 'if attr in ("load", "store"):', 'elif "write_unchecked" == a:',
                 "from anodize.language.vocab import ATOMIC_METHODS"):  # fmt: skip
        assert _COMPARED.search(line) or _VOCAB.search(line), line
    for line in ('if base.kind == "witness":', 'return Callee("unknown", attr)', 'if k in ("tile", "tile_method"):'):
        assert not (_COMPARED.search(line) or _VOCAB.search(line)), line


def test_the_stubs_agree_with_the_declarations() -> None:
    """Each declared method of a value with a public class (the stubs mypy reads) is a method of
    that class with the declared positional arity, its keywords the stub's keyword-only ones;
    a block-shared atomic array's stub is `Any` (its methods are an `AtomicSlice`'s)."""
    import inspect

    import anodize.tile as az_tile
    from anodize import types as az_types
    from anodize import witnesses

    stubs: dict[str, tuple[type, ...]] = {
        "atomic_slice": (az_types.AtomicSlice,),
        "slice": (az_types.DisjointSlice, az_types.DisjointSlice2D, az_types.DisjointSlice3D),
        "witness": (witnesses.Index1D, witnesses.BlockWitness1D),
        "local_witness": (witnesses.LocalIndex,),
        "thread_tile": (witnesses.Tile2D,),
        "tile_id": (az_tile.TileId1D,),
        "tile": (az_tile.Tile,),
    }
    assert {r for r, _ in intrinsics.METHODS} == set(stubs) | {"shared_atomic"}
    for (r, n), d in intrinsics.METHODS.items():
        for cls in stubs.get(r, ()):
            params = list(inspect.signature(getattr(cls, n)).parameters.values())[1:]
            positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
            assert (len(positional), len(positional)) == d.arity, (cls, n)
            assert {p.name for p in params if p.kind is p.KEYWORD_ONLY} == d.keywords, (cls, n)
    assert {n for r, n in intrinsics.METHODS if r == "shared_atomic"} == {n for r, n in intrinsics.METHODS if r == "atomic_slice"}
