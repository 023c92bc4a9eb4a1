"""Each intrinsic is declared once (anodize/language/intrinsics.py): the symbol table's tags,
the public stubs and the checker's abstract interpreter all read that declaration."""

from __future__ import annotations

import importlib

from anodize.checker.kernel_interp import _HANDLERS
from anodize.language.intrinsics import INTRINSICS, canonical
from anodize.language.symbols import intrinsic
from anodize.language.vocab import BLOCK_COLLECTIVES, RAW_IDS, WARP_OPS

_STUB_MODULES = {"thread": "anodize.thread", "warp": "anodize.warp", "block": "anodize.block", "shared": "anodize.shared",
                 "local": "anodize.local", "math": "anodize.math", "tile": "anodize.tile", "az": "anodize"}  # fmt: skip


def test_the_symbol_table_reads_the_declarations() -> None:
    assert INTRINSICS and all(intrinsic(name) == d.tag and d.name == name for name, d in INTRINSICS.items())
    assert canonical("anodize.thread.index_1d") == "thread.index_1d" and canonical("anodize.types.f32") == "az.f32"


def test_every_intrinsic_of_anodize_has_its_stub() -> None:
    for name in INTRINSICS:
        module, _, attr = name.partition(".")
        if module in _STUB_MODULES:
            assert hasattr(importlib.import_module(_STUB_MODULES[module]), attr), name


def test_every_public_name_of_the_kernel_modules_is_declared() -> None:
    """The other way: a stub of `anodize.thread` (..., `anodize.tile`) that no declaration names
    would be a function the language does not know."""
    types = {"tile.Tile", "tile.TileId1D", "tile.TileId2D", "tile.TileId3D"}  # the tile model's value types
    for short in ("thread", "warp", "block", "shared", "local", "math", "tile"):
        module = importlib.import_module(_STUB_MODULES[short])
        undeclared = {f"{short}.{n}" for n in module.__all__} - set(INTRINSICS) - types
        assert not undeclared, undeclared


def test_the_declared_effects() -> None:
    unsafe = {n for n, d in INTRINSICS.items() if d.unsafe}
    assert unsafe == {f"thread.{n}" for n in RAW_IDS} | {f"warp.{n}" for n in WARP_OPS}
    assert {n for n, d in INTRINSICS.items() if d.barrier} == {"az.syncthreads", "grid.sync", *BLOCK_COLLECTIVES}
    assert {n for n, d in INTRINSICS.items() if d.loop_only} == {"thread.grid_stride", "builtins.range"}
    assert INTRINSICS["warp.ballot"].varies == "warp" and INTRINSICS["warp.shfl_down"].varies == "lane"
    assert INTRINSICS["thread.block_idx_x"].varies == "uniform" and INTRINSICS["thread.tid_y"].varies == "lane"
    assert INTRINSICS["thread.index_2d"].witness == 2 and INTRINSICS["math.fma"].arity == (3, 3)


def test_the_checker_dispatches_every_callable_intrinsic() -> None:
    """A callable intrinsic's kind has a handler in the abstract interpreter, or is one of the
    kinds whose call has no value the rules follow (constructing a witness, which
    az-index-forge reports)."""
    no_value = {"witness_type", "block_witness_type"}
    kinds = {d.kind for d in INTRINSICS.values() if d.callable}
    assert kinds - set(_HANDLERS) == no_value
