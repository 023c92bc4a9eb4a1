"""On-chip memory a kernel may take, decided on the typed model so `anodize check` reports
what ptxas would refuse.

A block has at most `STATIC_SHARED_MAX_BYTES` (48 KiB) of static shared memory on every
architecture anodize targets.  A SIMT kernel's static arrays (`az.shared.array`,
`az.shared.atomic_array`, the scratch buffer of `az.block.*`) are counted exactly.  A tile
kernel's tiles live in shared memory the compiler allocates (codegen/tile_lower.py); the
language counts an upper bound of that allocation, which the lowering must never exceed:

- every tile local, once, at its type;
- every reduction and matmul node, at its result's size (a temporary, when not computed in
  place), its operands' sizes (staged when they are not tile locals) and a reduction's
  cross-warp scratch (one 8-byte slot per warp);
- one temporary per distinct tile type of an assignment that reads its own target (it may
  read it at another element, so it goes through one); `acc = tile.matmul(x, y, acc)` is
  computed in place.

Tensor-core GEMM staging is not counted: the lowering takes that path only where its
staging fits beside the rest (else the generic path runs).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import TileMatmul, TileReduce, TileTy

__all__ = ["STATIC_SHARED_MAX_BYTES", "static_shared_bytes", "tile_storage_bound"]

STATIC_SHARED_MAX_BYTES = 48 * 1024


def _bytes(ty: Any) -> int:
    return int(ty.size) * (ty.elem.info.mem_bits // 8)


def static_shared_bytes(shared: Any) -> int:
    """The static shared memory of a kernel's arrays (`name -> SharedTy`, dynamic ones excluded)."""
    return sum(_bytes(t) for t in shared.values() if not t.dynamic)


def _mentions(node: Any, name: str) -> bool:
    if isinstance(node, ir.Local):
        return node.name == name
    if isinstance(node, (tuple, list)):
        return any(_mentions(x, name) for x in node)
    if is_dataclass(node) and not isinstance(node, type):
        return any(_mentions(getattr(node, f.name), name) for f in fields(node) if f.name not in ("ty", "span"))
    return False


def _in_place(s: ir.Assign) -> bool:
    """`acc = tile.matmul(x, y, acc)` with `x` and `y` not reading `acc`: computed into `acc`."""
    v = s.value
    return (isinstance(v, TileMatmul) and not _mentions((v.x, v.y), s.name)
            and (v.acc is None or isinstance(v.acc, ir.Local) or not _mentions(v.acc, s.name)))


def tile_storage_bound(k: ir.KernelIR) -> int:
    """An upper bound of the shared memory the tile lowering allocates for `k`'s tiles."""
    total = sum(_bytes(t) for _, t in k.locals if isinstance(t, TileTy))
    assigned: set[tuple[str, int]] = set()
    warps = max(k.tile_warps, 1)

    def visit(node: Any, in_place: Any = None) -> None:
        nonlocal total
        if isinstance(node, (TileReduce, TileMatmul)):
            total += 0 if node is in_place else _bytes(node.ty)
            if isinstance(node, TileReduce):
                # the operand, staged at the wider of its and the result's element type (an
                # f16 sum accumulates in f32)
                width = max(node.value.ty.elem.info.mem_bits, node.ty.elem.info.mem_bits) // 8
                total += 8 * warps + node.value.ty.size * width
            else:
                total += _bytes(node.x.ty) + _bytes(node.y.ty)
        if isinstance(node, ir.Assign) and isinstance(node.value.ty, TileTy):
            if _in_place(node):
                in_place = node.value
            elif _mentions(node.value, node.name):  # may read its target at another element
                key = (node.value.ty.elem.name, node.value.ty.size)
                if key not in assigned:
                    assigned.add(key)
                    total += _bytes(node.value.ty)
        if isinstance(node, (tuple, list)):
            for x in node:
                visit(x)
        elif is_dataclass(node) and not isinstance(node, type):
            for f in fields(node):
                if f.name not in ("ty", "span"):
                    visit(getattr(node, f.name), in_place if f.name == "value" else None)

    visit(k.body)
    return total
