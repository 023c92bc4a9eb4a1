"""On-chip memory a kernel may take, decided on the typed model so `anodize check` reports
what ptxas would refuse.

A block has at most `STATIC_SHARED_MAX_BYTES` (48 KiB) of static shared memory on every
architecture anodize targets.  A SIMT kernel's static arrays (`az.shared.array`,
`az.shared.atomic_array`, the scratch buffer of `az.block.*`) are counted exactly.  A tile
kernel's tiles live in shared memory the compiler allocates (codegen/tile/plain.py); the
language counts an upper bound of that allocation, which the lowering must never exceed:

- every tile local, once, at its type;
- every reduction and matmul node, at its result's size (a temporary, when not computed in
  place), a matmul's operands' sizes (staged when they are not tile locals or fills) and a
  reduction's partials (one element per thread at most);
- every node of an op computed by a loop of its own (declared in language/tile_ops.py with a
  `temporaries(threads)` method; its loop is codegen/tile/ops.py's `@computes`), at the sizes
  of the tiles it declares: the lowering allocates exactly those, so the two cannot disagree;
- one temporary per distinct tile type of an assignment that reads its own target at another
  element (transposed or broadcast), so goes through one; `acc = tile.matmul(x, y, acc)` is
  computed in place;
- a store whose value loads the output it stores to, at the value's size (the tile is read
  whole into a temporary first).

The attention form (language/tile_forms.py) is not checked against the bound at all: on a
GPU with tensor cores its tiles live in registers.  The register tiles and tensor-core
matmuls of the layout plan (language/tile_plan.py, which holds every target-independent
condition of that lowering, so what it names is on tensor cores on every GPU that has them)
are not counted: there (sm_80 and later) those tiles live in registers and the matmuls stage
their operands in shared memory of their own.  A compile for a GPU without tensor cores
counts them (`storage_error_without_tensor_cores`).  On the CPU backend a tile kernel's
"shared memory" is host memory, without the 48 KiB limit.
"""

from __future__ import annotations

from typing import Any

from anodize.language import ir, messages
from anodize.language.diagnostics import Span
from anodize.language.ir_walk import children, node_fields, walk
from anodize.language.tile_forms import match_attention
from anodize.language.tile_ir import TileFull, TileLoad, TileMatmul, TileReduce, TileReshape, TileStore, TileTrans, TileTy, is_tile

__all__ = ["STATIC_SHARED_MAX_BYTES", "static_shared_bytes", "tile_storage_bound"]

STATIC_SHARED_MAX_BYTES = 48 * 1024


def _bytes(ty: Any) -> int:
    return int(ty.size) * (ty.elem.info.mem_bits // 8)


def static_shared_bytes(shared: Any) -> int:
    """The static shared memory of a kernel's arrays (`name -> SharedTy`, dynamic ones excluded)."""
    return sum(_bytes(t) for t in shared.values() if not t.dynamic)


def _any(node: Any, hit: Any) -> bool:
    """Does `hit` hold for `node` or any node under it?"""
    return any(hit(n) for n in walk(node))


def _mentions(node: Any, name: str) -> bool:
    return _any(node, lambda n: isinstance(n, ir.Local) and n.name == name)


def _loads(node: Any, name: str) -> bool:
    return _any(node, lambda n: isinstance(n, TileLoad) and n.slice.name == name)


def _moved(node: Any, name: str, shape: tuple[int, ...]) -> bool:
    """Does tile tree `node` read local `name` at an element other than the one computed (under
    a transpose, or broadcast from another shape)?  Reductions and matmuls are computed whole
    before, so reading it inside them is not."""
    if isinstance(node, ir.Local):
        return node.name == name and getattr(node.ty, "shape", shape) != shape
    if isinstance(node, (TileTrans, TileReshape)):
        return _mentions(node.value, name)
    if isinstance(node, (TileReduce, TileMatmul)) or _computed(node):
        return False
    # element-wise (a `TileElem`, an op's own node: codegen/tile/ops.py): element e of each tile operand
    return any((v.ty.shape != shape and _mentions(v, name)) or _moved(v, name, shape) for v in children(node) if is_tile(v))


def _computed(node: Any) -> bool:
    """Is `node` an op's own node computed whole by a loop of its own (it declares the tiles
    that loop allocates: `temporaries(threads)`)?"""
    return callable(getattr(node, "temporaries", None)) and is_tile(node)


def _in_place(s: ir.Assign) -> bool:
    """`acc = tile.matmul(x, y, acc * alpha)` with `x` and `y` not reading `acc`: computed into `acc`."""
    v = s.value
    return isinstance(v, TileMatmul) and not _mentions((v.x, v.y), s.name) and not (
        v.acc is not None and _moved(v.acc, s.name, v.ty.shape))


def _staged(x: Any) -> int:
    """A matmul operand's staging: none for a tile local or a fill (transposed or not)."""
    t = x
    while isinstance(t, TileTrans):
        t = t.value
    return 0 if isinstance(t, (ir.Local, TileFull)) else _bytes(x.ty)


def _tile_modules() -> tuple[Any, Any]:
    """language/attention_config.py and tile_plan.py, loaded by the first tile kernel (a SIMT
    kernel's compile does not pay for them)."""
    from anodize.language import attention_config, tile_plan

    return attention_config, tile_plan


def attention_tiles_in_registers(k: ir.KernelIR) -> bool:
    """Is `k` the attention form (language/tile_forms.py) with a tile the tensor-core routine
    takes on every GPU that has tensor cores (language/attention_config.py, at the least shared
    memory such a GPU gives a block)?  Then its tiles live in registers there and the typer does
    not hold them to the bound; the lowering must take it (codegen/tile/attention.py)."""
    form = match_attention(k)
    if form is None:
        return False
    attention_config, tile_plan = _tile_modules()
    return bool(attention_config.attention_on_tensor_cores(form.tile, max(k.tile_warps, 1), tile_plan.STAGING_LIMIT))


def tile_storage_bound(k: ir.KernelIR) -> int:
    """An upper bound of the shared memory the tile lowering allocates for `k`'s tiles on a GPU
    with tensor cores: the register tiles and the tensor-core matmuls of the layout plan
    (language/tile_plan.py) aside."""
    if not getattr(k, "tile_warps", 0):
        return _bound(k, set(), set())
    plan = _tile_modules()[1].plan_tiles(k)
    return _bound(plan.kernel, set(plan.registers) | set(plan.staged), set(plan.sites))


def matmuls_off_tensor_cores(k: ir.KernelIR) -> tuple[tuple[Any, str], ...]:
    """(span, why) of each `tile.matmul` of tile kernel `k` that the layout plan leaves off the
    tensor cores (its tiles then count toward the on-chip bound), in source order."""
    plan = _tile_modules()[1].plan_tiles(k)
    return tuple(sorted(((s, why) for s, why in plan.generic if s is not None), key=lambda x: (x[0].line, x[0].col)))


def storage_error_without_tensor_cores(k: ir.KernelIR) -> Any:
    """The located error (a Diagnostic) of a tile kernel whose tiles exceed the static limit on a
    GPU without tensor cores (below sm_80), where the layout plan's register tiles and matmul operands are
    tiles like any other; None when they fit.  The compile for such a target raises it
    (codegen/driver.py); `anodize check`, which knows no target, checks the tensor-core bound."""
    if not getattr(k, "tile_warps", 0):
        return None
    nbytes = _bound(k, set(), set())
    if nbytes <= STATIC_SHARED_MAX_BYTES:
        return None
    return messages.type_error(Span.point(k.path, k.line, 0), "tile-storage-too-large-no-tc", help="tile-storage-too-large",
                               nbytes=nbytes, limit=STATIC_SHARED_MAX_BYTES)


def _bound(k: ir.KernelIR, accs: set[str], sites: set[int]) -> int:
    """The bound with the tiles of `accs` (register tiles) and the matmuls `sites` (ids of their
    assignments: on tensor cores, their operands staged in the routine's own memory) not counted."""
    total = sum(_bytes(t) for n, t in k.locals if isinstance(t, TileTy) and n not in accs)
    assigned: set[tuple[str, int]] = set()
    warps = max(k.tile_warps, 1)

    def visit(node: Any, in_place: Any = None) -> None:
        nonlocal total
        if id(node) in sites:
            return  # on tensor cores: its operands are staged by the routine, in its own memory
        if isinstance(node, (TileReduce, TileMatmul)):
            total += 0 if node is in_place else _bytes(node.ty)
            if isinstance(node, TileReduce):  # the partials: at most one per thread
                total += 32 * warps * (node.ty.elem.info.mem_bits // 8)
            else:
                total += _staged(node.x) + _staged(node.y)
        if _computed(node):
            total += sum(_bytes(t) for t in node.temporaries(32 * warps))
        if isinstance(node, TileStore) and _loads(node.value, node.slice.name):
            total += _bytes(node.value.ty)  # read the output's own tile whole before storing it
        if isinstance(node, ir.Assign) and isinstance(node.value.ty, TileTy):
            if _in_place(node):
                in_place = node.value
            elif _moved(node.value, node.name, node.value.ty.shape):  # reads its target at another element
                key = (node.value.ty.elem.name, node.value.ty.size)
                if key not in assigned:
                    assigned.add(key)
                    total += _bytes(node.value.ty)
        if isinstance(node, (tuple, list)):
            for x in node:
                visit(x)
        else:
            for field in node_fields(node.__class__):
                visit(getattr(node, field), in_place if field == "value" else None)

    visit(k.body)
    return total
