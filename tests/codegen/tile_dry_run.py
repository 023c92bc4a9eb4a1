"""A tile op declared at test time as its files would declare it when they load: the dry runs
of docs/architecture.md's "How to add X" (test_tile_new_node_op.py, test_tile_new_loop_op.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anodize.tile as az_tile
from anodize.language import intrinsics, symbols
from anodize.language.tile_ops import TILE_OPS


@contextmanager
def declared_op(name: str, stub: Callable[..., Any], declare: Callable[[], None], lowerings: dict[Any, Any]) -> Iterator[None]:
    """`declare()` the op (its row in language/tile_ops.py and its lowering in `lowerings`, a
    registry of codegen/tile/ops.py), refresh the tables read from the rows when
    language/intrinsics.py and symbols.py load, and make the stub `tile.<name>`; afterwards the
    rows, the tables, the registry and anodize.tile are as they were."""
    saved = [(t, dict(t)) for t in (TILE_OPS, intrinsics.INTRINSICS, symbols._TABLE, lowerings)]
    try:
        declare()
        intrinsics.INTRINSICS.update(intrinsics._declare())
        symbols._TABLE.update({n: d.tag for n, d in intrinsics.INTRINSICS.items()})
        setattr(az_tile, name, stub)
        yield
    finally:
        for t, rows in saved:
            t.clear()
            t.update(rows)  # type: ignore[attr-defined]
        if hasattr(az_tile, name):
            delattr(az_tile, name)
