"""Shared helpers of the Tile model's tests (test_tiles.py, test_tile_threads.py): typing a
tile kernel from source, and the example tile kernels' typed IR."""

from __future__ import annotations

import textwrap
from pathlib import Path

from anodize.language import ir
from anodize.language.front import front_for_source

ROOT = Path(__file__).resolve().parents[2]
TILE_EXAMPLES = ["tile_add", "tile_gemm", "tile_softmax", "tile_layernorm", "tile_attention"]

HEAD = """
import math
import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f16, f32, i64, tile
"""


def typed(src: str, name: str, spec: tuple = ()):  # type: ignore[no-untyped-def]
    text = HEAD + textwrap.dedent(src)
    front = front_for_source(text, f"<tiles-{abs(hash(text))}>")
    fdef = next(f for f in front.kernels() if f.name == name)
    return front.typed(fdef, spec)


def kernel_ir(src: str, name: str, spec: tuple = ()) -> ir.KernelIR:
    t = typed(src, name, spec)
    assert t.ir is not None, [d.message for d in t.diagnostics]
    return t.ir


def walk(body) -> list:  # type: ignore[no-untyped-def]
    return ir.walk_stmts(tuple(body))


def _example_kernels() -> list[ir.KernelIR]:
    out = []
    for name in TILE_EXAMPLES:
        path = ROOT / "examples" / f"{name}.py"
        front = front_for_source(path.read_text(), str(path))
        for fdef in front.kernels():
            spec: tuple = ()
            if fdef.name == "gemm":
                spec = (("T", "f16"), ("BM", 128), ("BN", 256), ("BK", 64))  # tile_gemm.tiles_for a GPU
            elif fdef.name in ("softmax", "layer_norm"):
                spec = (("cols", 256),)
            elif fdef.name == "attention":
                spec = (("BM", 32), ("BN", 32), ("D", 64))
            t = front.typed(fdef, spec)
            assert t.ir is not None, (name, [d.message for d in t.diagnostics])
            out.append(t.ir)
    return out
