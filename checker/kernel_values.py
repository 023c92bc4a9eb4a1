"""The kernel model's abstract values and records: `Val` (a witness, a slice parameter, a shared
array, a scalar that may or may not differ between threads) and its join, the per-function
records (`FunctionInfo`, `ParamInfo`, `ContractInfo`, `Ctx`, `Callee`, `KernelSummary`), and
the literal readings of syntax the model and the rules share (`dotted`, `literal_int`,
`literal_dims`, `index_elements`).  See checker/kernel_model.py."""

from __future__ import annotations

from dataclasses import field, replace
from anodize.language.records import dataclass

import ast

from anodize.language.diagnostics import Span
from anodize.language.intrinsics import Intrinsic
from anodize.language.vocab import SLICE_KINDS, SliceKindInfo

VIEW_METHODS = {"view", "reshape", "ravel", "flatten", "transpose", "squeeze", "T", "real", "imag", "base"}
MAX_FIXPOINT = 8


def record_root(target: ast.expr, values: dict[ast.AST, Val]) -> ast.expr:
    """The element a store into a record's part writes (`out[i]` of `out[i].v[2] = x`), or
    `target` itself when it is not a part of a record element."""
    node = target
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        v = values.get(node.value)
        if isinstance(node, ast.Subscript) and v is not None and v.kind == "slice":
            return node
        if v is None or v.kind != "record":
            return target
        node = node.value
    return target


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


# ---- abstract values -----------------------------------------------------------------------


@dataclass(frozen=True)
class Space:
    """Where a witness comes from: the thread-to-element mapping it is an index of.

    kind: `index_1d` / `index_2d` (one global mapping each, wherever the maker is called);
    `grid_stride` (one loop, `node` its `thread.grid_stride(...)` call, `over` the slice
    parameter it iterates, `binding` what each slice parameter of its function is bound to:
    codegen picks each loop's mapping, scalar or vector chunks, from its body, its slice's
    length and the alignment of every slice the body touches, so the same loop of a helper
    called with other slices is another space); `param` (a helper's witness parameter
    `param`, replaced by the argument's spaces at each call)."""

    kind: str
    node: ast.AST | None = None
    over: frozenset[str] = frozenset()
    param: str = ""
    binding: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Val:
    """An abstract value.  kind: witness | local_witness | slice | shared | scalar | record (a record's
    value or a part of one: language/typer_records.py) | global | none | unknown."""

    kind: str
    domain: int = 0  # witness: its index space (1 or 2)
    tdep: bool = False  # may differ between the threads of a block
    params: frozenset[str] = frozenset()  # slice: the parameters it may be
    origin: ast.AST | None = field(default=None, compare=False)
    spaces: frozenset[Space] = frozenset()  # witness: the mappings it may come from
    # the finer lattice for warp operations: uniform (not tdep) < warp-uniform (tdep and wu:
    # equal on the lanes of one warp) < lane-varying (tdep, not wu)
    wu: bool = False
    tid_x: bool = False  # exactly `thread.tid_x()` (so `t // 32` is the warp's index)

    @property
    def lane(self) -> bool:
        """May differ between the lanes of one warp."""
        return self.tdep and not self.wu

    def tainted(self, lane: bool = True) -> Val:
        """This value, assigned under thread-dependent control (`lane`: control that may differ
        between the lanes of a warp; otherwise it differs only between warps)."""
        if self.tdep and (not self.wu or not lane):
            return self
        if self.origin is None and self.kind == "scalar" and not self.tid_x:
            return VARYING if lane else WARP_UNIFORM
        return replace(self, tdep=True, wu=not lane)


UNIFORM = Val("scalar")
VARYING = Val("scalar", tdep=True)
WARP_UNIFORM = Val("scalar", tdep=True, wu=True)
TID_X = Val("scalar", tdep=True, tid_x=True)
UNKNOWN = Val("unknown", tdep=True)
# a per-thread local array (`az.local.array`, or a helper's `LocalArray[T]` parameter): not
# shared state (no race rule looks at it); an element read from it is a plain scalar that
# may differ between threads, never a witness
LOCAL_ARRAY = Val("local", tdep=True)
TILE = Val("tile")  # a tile value of a tile kernel (checker/tile_model.py)
NONE = Val("none")


def _scalar(tdep: bool) -> Val:
    """`Val("scalar", tdep=tdep)`, without building a new one (the interpreter asks for ~20,000)."""
    return VARYING if tdep else UNIFORM


def _scalar3(tdep: bool, lane: bool) -> Val:
    """A scalar: uniform, warp-uniform (`tdep`, not `lane`) or lane-varying."""
    return UNIFORM if not tdep else VARYING if lane else WARP_UNIFORM


def join(a: Val | None, b: Val | None) -> Val | None:
    if a is None:
        return b
    if b is None or a is b or a == b:
        return a
    if a.kind == b.kind == "witness" and a.domain == b.domain:
        return a if b.spaces <= a.spaces else replace(a, spaces=a.spaces | b.spaces)
    if a.kind == b.kind == "slice":
        return Val("slice", params=a.params | b.params, tdep=a.tdep or b.tdep, origin=a.origin)
    if a.kind == b.kind == "scalar":
        return _scalar3(a.tdep or b.tdep, a.lane or b.lane)
    if a.kind == b.kind == "record":
        return Val("record", tdep=a.tdep or b.tdep, wu=(a.tdep or b.tdep) and not (a.lane or b.lane))
    if a.kind == b.kind and a.kind in ("shared", "global", "none"):
        return Val(a.kind, tdep=a.tdep or b.tdep)
    if {a.kind, b.kind} <= {"witness", "scalar"}:
        return VARYING  # a witness on one path and an int on the other is an int
    return UNKNOWN


Env = dict[str, Val]


_WITNESS_KINDS = ("witness", "thread_tile", "local_witness")  # values that name this thread's elements


def join_env(a: Env | None, b: Env | None) -> Env | None:
    if a is None:
        return None if b is None else dict(b)
    if b is None:
        return dict(a)
    out: Env = {}
    for k, va in a.items():
        vb = b.get(k)
        if vb is not None:
            out[k] = join(va, vb)  # type: ignore[assignment]
        else:
            # bound on one path only: on the other it holds zeros (every such thread the same
            # index); keep the known value but never as a witness (a block-local one included)
            out[k] = VARYING if va.kind in _WITNESS_KINDS else va
    for k, vb in b.items():
        if k not in a:
            out[k] = VARYING if vb.kind in _WITNESS_KINDS else vb
    return out


# ---- the model -----------------------------------------------------------------------------


@dataclass
class ParamInfo:
    name: str
    node: ast.arg
    kind: str  # "slice" | "scalar" | "witness" | "local" (a helper's `LocalArray[T]`) | "bad"
    slice_kind: SliceKindInfo | None = None
    scalar: str | None = None
    domain: int = 0  # witness params (helpers only)


@dataclass
class ContractInfo:
    decorator: ast.expr  # the decorator expression (its span: `model.src.decorator_span`)
    call: ast.Call | None
    args: dict[str, ast.keyword]
    domain: int | None  # the literal domain when it is 1 or 2
    block: tuple[int, ...] | None  # the literal block, CUDA order


@dataclass(frozen=True)
class Ctx:
    fn: FunctionInfo
    unsafe: bool
    divergent: ast.AST | None  # what makes control thread-dependent here
    lane_divergent: ast.AST | None = None  # what makes it differ between the lanes of a warp


@dataclass(frozen=True)
class Callee:
    """What a call calls.  An intrinsic's kind is its tag's kind (`decl`, its declaration in
    language/intrinsics.py: "witness", "raw", "warp", "collective", "barrier", "math", ...);
    a method of a value, its declaration's kind (language/intrinsics.py `METHODS`): tile_method |
    tile_id_get | tile_at | tile_io | witness_get | shared_atomic | atomic_op | unchecked_write,
    else forge (a private attribute of a witness) | method (a slice's undeclared one); a name of
    the module: helper | kernel | function | record | typevar (a cast to it) | foreign (a foreign
    device function); else unknown."""

    kind: str
    name: str
    fn: FunctionInfo | None = None
    decl: Intrinsic | None = None

    @property
    def tag(self) -> tuple[str, ...]:
        """The intrinsic's tag (`("builtin", "range")`), `()` for anything else."""
        return self.decl.tag if self.decl is not None else ()


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: ast.FunctionDef
    kind: str  # "kernel" | "func" | "plain"
    params: dict[str, ParamInfo]
    contract: ContractInfo | None
    kernel_decorator: ast.expr | None
    locals: frozenset[str] = frozenset()
    globals_declared: frozenset[str] = frozenset()
    top: int | None = None  # index of the module's top-level statement that holds it
    # analysis summary
    analyzed: bool = False
    in_progress: bool = False
    witness_uses: list[tuple[ast.Call, int]] = field(default_factory=list)  # makers called directly
    helper_calls: list[tuple[ast.Call, FunctionInfo]] = field(default_factory=list)
    writes: set[str] = field(default_factory=set)  # slice parameters written (also through helpers)
    has_barrier: bool = False  # reaches a barrier (also through helpers)
    warp_op: ast.Call | None = None  # a full-warp operation it reaches (also through helpers)
    thread_dependent: bool = False  # results may differ between threads
    returns: Val | None = None

    @property
    def is_device(self) -> bool:
        return self.kind in ("kernel", "func")

    @property
    def domain(self) -> int | None:
        return self.contract.domain if self.contract else None

    def domains_used(self) -> dict[int, ast.AST]:
        """Index spaces this function's witnesses come from (also through helpers)."""
        out: dict[int, ast.AST] = {}
        seen: set[int] = set()

        def walk(f: FunctionInfo, via: ast.AST | None) -> None:
            if id(f) in seen:
                return
            seen.add(id(f))
            for call, d in f.witness_uses:
                out.setdefault(d, via or call)
            for call, g in f.helper_calls:
                walk(g, via or call)

        walk(self, None)
        return out


@dataclass(frozen=True)
class KernelSummary:
    """What a launch site needs to know about a kernel, possibly from another module."""

    name: str
    path: str
    params: tuple[tuple[str, str], ...]  # (name, kind name: "Slice"... or a scalar or "?")
    has_contract: bool
    domain: int | None
    block: tuple[int, ...] | None
    span: Span
    # a kernel with a bundle parameter (whose `params` are left empty: one argument at the launch
    # site, several parameters here): its signature as launched, each parameter (name, kind, and
    # for a bundle its class's name and its fields as (parameter name, kind)); () otherwise
    launch_params: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()

    def is_output(self, index: int) -> bool:
        k = SLICE_KINDS.get(self.params[index][1])
        return bool(k and k.output)


def literal_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = literal_int(node.operand)
        return None if v is None else -v
    return None


def literal_dims(node: ast.AST) -> tuple[int, ...] | None:
    """An int or a tuple of int literals, as a tuple; None when not literal."""
    v = literal_int(node)
    if v is not None:
        return (v,)
    if isinstance(node, ast.Tuple):
        out = []
        for e in node.elts:
            x = literal_int(e)
            if x is None:
                return None
            out.append(x)
        return tuple(out)
    return None


def index_elements(node: ast.Subscript) -> list[ast.expr] | None:
    """The index expressions of `x[a]` / `x[a, b]` / `x[(a, b)]`; None when one is a slice `a:b`."""
    sl = node.slice
    if isinstance(sl, ast.Slice):
        return None
    if isinstance(sl, ast.Tuple):
        if any(isinstance(e, ast.Slice) for e in sl.elts):
            return None
        if any(isinstance(e, ast.Starred) for e in sl.elts):
            return [sl]
        return list(sl.elts)
    return [sl]
