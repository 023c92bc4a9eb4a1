"""The typed kernel IR: frozen dataclasses built by `typer.py`, lowered by `codegen/llvm/lower.py`.

Every expression carries its type (`ty`); every node carries the user's source
span (`span`) so that lowering can emit debug locations and fault sites.  Helper
calls (`Call`) hold the helper's own typed body, specialised for the argument
types of the call, and are inlined by the lowering.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any
from anodize.language.records import dataclass

from anodize.language.contract import Contract
from anodize.language.params import FaultSite, ParamSpec  # (re-exported: a kernel's parameters and fault sites)
from anodize.language.diagnostics import Span
from anodize.language.record_types import record_of_info
from anodize.language.types import BY_NAME, LocalArrayTy, ScalarTy, SharedTy, SliceTy, TupleTy, Ty, VoidTy, WitnessTy
from anodize.language.vocab import ScalarInfo, SliceKindInfo


# ---- expressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: int | float | bool
    ty: ScalarTy
    span: Span | None = None
    weak: bool = False  # an untyped literal: adopts the other operand's type


@dataclass(frozen=True)
class Local:
    """A local variable or a scalar / witness parameter."""

    name: str
    ty: Ty
    span: Span | None = None


@dataclass(frozen=True)
class SliceRef:
    """A slice parameter (of the kernel, or of a helper bound to the caller's slice)."""

    name: str
    ty: SliceTy
    span: Span | None = None


@dataclass(frozen=True)
class BinOp:
    op: str  # "+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^", "min", "max", "pow"
    left: Expr
    right: Expr
    ty: ScalarTy
    span: Span | None = None
    site: int = -1  # fault site of an integer `//` / `%` (division by zero)


@dataclass(frozen=True)
class UnaryOp:
    op: str  # "-", "~", "not", "abs"
    operand: Expr
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Compare:
    """A (possibly chained) comparison; operands of one link share a type."""

    ops: tuple[str, ...]  # "<", "<=", ">", ">=", "==", "!="
    operands: tuple[Expr, ...]
    ty: ScalarTy
    span: Span | None = None
    link_types: tuple[ScalarTy, ...] = ()  # the common type of each link's two operands


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or" (short-circuit; operands are bool)
    values: tuple[Expr, ...]
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class IfExp:
    cond: Expr
    then: Expr
    orelse: Expr
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Cast:
    value: Expr
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Bitcast:
    """`az.bitcast(x, T)`: the bits of `value` read as `ty` (both scalars of one size, not bool)."""

    value: Expr
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class RecordValue:
    """A record's value while it is typed (language/typer_records.py): one expression per
    scalar leaf, in layout order (`RecordTy.leaves`).  The typer spreads it into per-leaf
    locals, writes and arguments: it never reaches a statement of the typed model."""

    ty: Any  # record_types.RecordTy
    leaves: tuple[Expr, ...]
    span: Span | None = None


@dataclass(frozen=True)
class Len:
    slice: SliceRef
    axis: int  # 0 for len() / shape[0], 1 for shape[1]
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Read:
    """`a[j]`, `m[r, c]` or `m[w]`; `checked` is False when the index is proven in range."""

    slice: SliceRef
    index: tuple[Expr, ...]  # 1 or 2 i64 expressions, or one witness
    checked: bool
    site: int
    ty: ScalarTy
    span: Span | None = None
    offset: int = 0  # a record slice's field (`p[i].x`): its scalar's byte offset in the element


@dataclass(frozen=True)
class SharedRef:
    name: str
    ty: SharedTy
    span: Span | None = None


@dataclass(frozen=True)
class SharedRead:
    array: SharedRef
    index: tuple[Expr, ...]
    checked: bool
    site: int
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class TableRead:
    """`TABLE[i]` of a module-level constant table (read-only; `values` in source order)."""

    table: str
    values: tuple[int | float, ...]
    index: tuple[Expr, ...]
    checked: bool
    site: int
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class MakeWitness:
    """`thread.index_1d()` / `index_2d()` / `index_3d()`; `site` >= 0 when the launch rank is checked."""

    rank: int
    site: int
    ty: WitnessTy
    span: Span | None = None


@dataclass(frozen=True)
class TileAt:
    """`t.at(r, s)` of a tile `t` (`thread.tile_2d(TR, TC, GR, GC)`, shape = (TR, TC, GR, GC)):
    the Index2D (row0 + (r // GR) * BY * GR + r % GR, col0 + (s // GC) * BX * GC + s % GC), where
    (row0, col0) is the tile's value.  `check_r`/`check_s`: r in [0, TR) / s in [0, TC) is not
    proven, so it is tested at run time (a fault at `site` and a poisoned index otherwise).
    `block`: the contract's literal (BX, BY), else read from the launch.  `poisonable`: the tile
    came from a device-checked launch (no contract), and a poisoned tile gives a poisoned index."""

    tile: Expr
    r: Expr
    s: Expr
    shape: tuple[int, int, int, int]
    check_r: bool
    check_s: bool
    site: int
    block: tuple[int, int] | None
    poisonable: bool
    ty: WitnessTy
    span: Span | None = None


@dataclass(frozen=True)
class ThreadTileLoad:
    """`t.load(src, dst, fill)` of a tile `t` (shape = (TR, TC, GR, GC)): for every element (r, s)
    of the tile, dst[r, s] (dst[s] for a 1-D dst) = src[t.at(r, s)] where that element is inside
    `src`, else `fill`.  The lowering reads each run of consecutive columns 16 bytes at a time
    where the run is inside `src` and its address is 16-byte aligned, element by element
    otherwise (codegen/llvm/thread_tiles_io.py).  `block`, `poisonable`: as for `TileAt`."""

    tile: Expr
    src: SliceRef
    dst: LocalArrayRef
    fill: Expr
    shape: tuple[int, int, int, int]
    block: tuple[int, int] | None
    poisonable: bool
    ty: VoidTy
    span: Span | None = None


@dataclass(frozen=True)
class ThreadTileStore:
    """`t.store(dst, src)`: dst[t.at(r, s)] = src[r, s] (src[s] for a 1-D src) for every element
    (r, s) of the tile inside `dst` (an output this thread owns those elements of), 16 bytes at
    a time where a run of columns allows, as `ThreadTileLoad`."""

    tile: Expr
    dst: SliceRef
    src: LocalArrayRef
    shape: tuple[int, int, int, int]
    block: tuple[int, int] | None
    poisonable: bool
    ty: VoidTy
    span: Span | None = None


@dataclass(frozen=True)
class WitnessPart:
    witness: Expr
    part: str  # "get" | "layer" | "row" | "col" (vocab.WITNESS_PARTS)
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Contains:
    """`w in c`: the witness indexes an element of `c` (both axes for 2-D)."""

    witness: Expr
    slice: SliceRef
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Atomic:
    """An atomic operation on an `AtomicSlice` element; `ty` is the result (VOID for `store`).

    op: add | sub | min | max | exchange | and | or | xor | compare_exchange | load | store.
    `value` is None for `load`; `expected` is set for `compare_exchange` only."""

    op: str
    slice: SliceRef
    index: Expr
    value: Expr | None
    checked: bool
    site: int
    ty: Ty
    span: Span | None = None
    expected: Expr | None = None
    scope: str = "device"  # "device" | "system"
    order: str = "relaxed"  # "relaxed" | "acquire" | "release" | "acq_rel" | "seq_cst"


@dataclass(frozen=True)
class SharedAtomic:
    """An atomic operation on an element of a block-shared atomic array
    (`az.shared.atomic_array`): the ops, values and result of `Atomic`; `index` has one
    expression per axis of the array; scope "block" (the default), "device" or "system"."""

    op: str
    array: SharedRef
    index: tuple[Expr, ...]
    value: Expr | None
    checked: bool
    site: int
    ty: Ty
    span: Span | None = None
    expected: Expr | None = None
    scope: str = "block"
    order: str = "relaxed"


@dataclass(frozen=True)
class RawId:
    reg: str  # "tid", "ctaid", "ntid", "nctaid", "laneid"
    axis: str  # "x", "y", "z" or ""
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class MathCall:
    name: str  # a key of language/math_table.MATH
    args: tuple[Expr, ...]
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class ForeignCall:
    """A call of a foreign device function (`az.foreign.device_function`): `binding` is its
    module-level name, `symbol` its PTX name; the arguments are cast to its parameter types."""

    binding: str
    symbol: str
    args: tuple[Expr, ...]
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class WarpOp:
    op: str  # a member of checker.model.WARP_OPS
    args: tuple[Expr, ...]
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class Collective:
    """`s = az.warp.reduce(v, op)`, `az.block.reduce(v, op)`, `az.block.scan(v, op, inclusive=)`,
    `az.block.broadcast(v, src)`: only ever the whole value of an `Assign` (so every thread
    that reaches the statement evaluates it).  `threads` is the block's thread count from
    the contract (a multiple of 32); a block collective uses the compiler's scratch buffer
    (`vocab.COLLECTIVE_SCRATCH`) and ends with a barrier."""

    kind: str  # a key of vocab.COLLECTIVES
    op: str  # a member of vocab.COLLECTIVE_OPS ("" for broadcast)
    value: Expr
    threads: int
    ty: ScalarTy
    inclusive: bool = True  # block.scan
    src: int = 0  # block.broadcast: the source thread's linear index in the block
    span: Span | None = None


@dataclass(frozen=True)
class LocalArrayRef:
    """A per-thread local array (`az.local.array`): of this function, or a helper's parameter
    bound to the caller's array (by reference)."""

    name: str
    ty: LocalArrayTy
    span: Span | None = None


@dataclass(frozen=True)
class LocalArrayRead:
    """`a[i]` / `a[i, j]` of a local array; `checked` is False when the index is proven in range."""

    array: LocalArrayRef
    index: tuple[Expr, ...]  # one i64 expression per axis
    checked: bool
    site: int
    ty: ScalarTy
    span: Span | None = None


@dataclass(frozen=True)
class MakeTuple:
    """`(a, b)`: the value of `return a, b` or of the right side of `x, y = a, b` (every
    element evaluated, left to right, before anything is assigned)."""

    values: tuple[Expr, ...]
    ty: TupleTy
    span: Span | None = None


@dataclass(frozen=True)
class Call:
    """A call of an `@az.func` helper, inlined at lowering."""

    func: FuncIR
    args: tuple[Expr, ...]  # SliceRef for slice parameters
    ty: Ty
    span: Span | None = None


Expr = (
    Const | Local | SliceRef | BinOp | UnaryOp | Compare | BoolOp | IfExp | Cast | Bitcast | Len | Read | SharedRef
    | SharedRead | TableRead | MakeWitness | TileAt | ThreadTileLoad | ThreadTileStore | WitnessPart | Contains | Atomic | RawId | MathCall | ForeignCall | WarpOp | Collective
    | Call | LocalArrayRef | LocalArrayRead | MakeTuple | SharedAtomic
)

# ---- statements ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr
    span: Span | None = None


@dataclass(frozen=True)
class Write:
    slice: SliceRef
    index: tuple[Expr, ...]
    value: Expr
    checked: bool
    site: int
    span: Span | None = None
    offset: int = 0  # a record slice's field (`out[i].x = v`): its scalar's byte offset in the element


@dataclass(frozen=True)
class SharedWrite:
    array: SharedRef
    index: tuple[Expr, ...]
    value: Expr
    checked: bool
    site: int
    span: Span | None = None


@dataclass(frozen=True)
class ExprStmt:
    value: Expr
    span: Span | None = None


@dataclass(frozen=True)
class If:
    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]
    span: Span | None = None


@dataclass(frozen=True)
class While:
    cond: Expr
    body: tuple[Stmt, ...]
    span: Span | None = None


@dataclass(frozen=True)
class ForRange:
    var: str
    start: Expr
    stop: Expr
    step: Expr  # all three share the loop variable's int type
    body: tuple[Stmt, ...]
    span: Span | None = None


@dataclass(frozen=True)
class GridStride:
    var: str  # bound to an Index1D
    slice: SliceRef
    site: int  # rank-check site (-1 with a contract)
    body: tuple[Stmt, ...]
    span: Span | None = None


@dataclass(frozen=True)
class Break:
    span: Span | None = None


@dataclass(frozen=True)
class Continue:
    span: Span | None = None


@dataclass(frozen=True)
class Return:
    value: Expr | None = None
    span: Span | None = None


@dataclass(frozen=True)
class Barrier:
    span: Span | None = None
    grid: bool = False  # `az.grid.sync()`: every thread of the (cooperative) grid, a block barrier too


@dataclass(frozen=True)
class Fence:
    kind: str  # "threadfence" (az.threadfence()) or "warp_sync" (az.warp.sync()): vocab.FENCE_QUALNAMES
    span: Span | None = None


@dataclass(frozen=True)
class Print:
    """`print(...)`: string literals and scalars, separated by spaces, then a newline."""

    parts: tuple[str | Expr, ...]
    span: Span | None = None


@dataclass(frozen=True)
class Assert:
    """`assert cond, "message"`: a false `cond` records a fault at `site`; the thread goes on."""

    cond: Expr
    site: int
    span: Span | None = None


@dataclass(frozen=True)
class Breakpoint:
    """`breakpoint()`: nothing on the GPU and CPU backends; a real `breakpoint()` (pdb, with the
    kernel's variables as locals) on the debug device (`az.device("debug")`)."""

    span: Span | None = None


@dataclass(frozen=True)
class SharedDecl:
    name: str
    ty: SharedTy
    span: Span | None = None


@dataclass(frozen=True)
class LocalArrayDecl:
    """`a = az.local.array(shape, T)`: the array's storage (one per function instance, in the
    entry block), zeroed each time the statement runs."""

    name: str
    ty: LocalArrayTy
    span: Span | None = None


@dataclass(frozen=True)
class LocalArrayWrite:
    array: LocalArrayRef
    index: tuple[Expr, ...]
    value: Expr
    checked: bool
    site: int
    span: Span | None = None


@dataclass(frozen=True)
class Unpack:
    """`a, b = value` with `value` of a `TupleTy` (a `MakeTuple` or a helper's call): element k
    converted to the type of `names[k]` and stored, in order, after the whole value is computed."""

    names: tuple[str, ...]
    value: Expr
    span: Span | None = None


Stmt = (
    Assign | Write | SharedWrite | ExprStmt | If | While | ForRange | GridStride | Break | Continue | Return
    | Barrier | Fence | SharedDecl | Print | Assert | Breakpoint | LocalArrayDecl | LocalArrayWrite | Unpack
)

# ---- functions -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FuncIR:
    """A helper specialised for one tuple of argument types."""

    name: str
    params: tuple[tuple[str, Ty], ...]
    locals: tuple[tuple[str, Ty], ...]
    body: tuple[Stmt, ...]
    ret: Ty
    span: Span | None = None


@dataclass(frozen=True, eq=False)
class KernelIR:
    name: str
    params: tuple[ParamSpec, ...]
    locals: tuple[tuple[str, Ty], ...]
    body: tuple[Stmt, ...]
    contract: Contract | None
    domain: int
    fault_sites: tuple[FaultSite, ...]
    path: str
    line: int
    uses_barrier: bool = False
    uses_warp: bool = False
    uses_shared: bool = False
    # an `unsafe` loop waits on memory other threads write (liveness.py): the CPU backend runs
    # the block's threads as host threads, so the writer runs while the waiter spins
    waits: bool = False
    # `az.grid.sync()` (a cooperative kernel): the CPU backend and the debug device run every
    # block of the grid at once, the GPU launch is cooperative
    grid_sync: bool = False
    shared: tuple[tuple[str, SharedTy], ...] = field(default=())
    tile_warps: int = 0  # a tile kernel (`@az.tile_kernel`, language/tile_ir.py): its num_warps; 0 for SIMT
    tile_stages: int = 0  # the most pipeline stages its loops may take (an autotuning config's `num_stages`); 0: the compiler's choice

    @property
    def param_types(self) -> dict[str, Ty]:
        out: dict[str, Ty] = {}
        for p in self.params:
            if p.scalar.kind == "r":  # a record slice's element (language/record_types.py)
                out[p.name] = SliceTy(p.slice_kind, record_of_info(p.scalar))  # type: ignore[arg-type]
                continue
            elem = BY_NAME[p.scalar.name]
            out[p.name] = SliceTy(p.slice_kind, elem) if p.slice_kind else elem
        return out


def walk_stmts(body: tuple[Stmt, ...]) -> list[Stmt]:
    """Every statement of a body, nested ones included (helper bodies excluded)."""
    out: list[Stmt] = []
    for s in body:
        out.append(s)
        if isinstance(s, If):
            out.extend(walk_stmts(s.body))
            out.extend(walk_stmts(s.orelse))
        elif isinstance(s, (While, ForRange, GridStride)):
            out.extend(walk_stmts(s.body))
    return out
