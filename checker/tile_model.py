"""The Tile model in the checker's kernel model: what `az.tile` calls evaluate to.

A program id (`tile.program_id_1d/2d()`) is the abstract value `tile_id` (its domain the
launch rank; the same on every thread of a program); a tile value is `tile` (uniform: every
thread of a program holds the same logical tile); `tile.store(dst, ...)` writes `dst`.  The
ownership rules themselves are `rules/disjoint_index.py`'s: a tile store or load of an output
is an access through the index space `Space("tile")`, so mixing it with SIMT witnesses on
one output is reported like any other mix, and the store's id must be a `tile_id`."""

from __future__ import annotations

import ast
from typing import Any

from anodize.language.tile_vocab import PROGRAM_IDS

from .kernel_values import NONE, TILE, Space, Val

TILE_SPACE = Space("tile")


def tile_call(interp: Any, node: ast.Call, callee: Any, env: Any) -> Val:
    name = callee.name.split(".")[-1]
    if callee.kind == "tile_method":  # `x.reshape(...)`, `x.astype(T)`: a tile
        return TILE
    if name in PROGRAM_IDS:
        d = PROGRAM_IDS[name]
        interp.fn.witness_uses.append((node, d))
        return Val("tile_id", domain=d, origin=node, spaces=frozenset([TILE_SPACE]))
    written = callee.decl.writes
    if written is not None:  # tile.store(dst, pid, value): writes `dst`, no value
        if len(node.args) > written:
            interp.exprs.mark_write(node.args[written], env)
        return NONE
    return TILE
