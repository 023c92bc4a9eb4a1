"""The per-module kernel model: computed once, read by every rule.

For one parsed module it records which top-level functions are kernels and
`@az.func` helpers, their parameters (slice kinds, scalars, witnesses, from
`anodize/language/vocab.py`), their launch contracts, and a flow-sensitive abstract
interpretation of each body:

- every evaluated expression node gets a `Val` (a witness of index space 1 or
  2, a slice that is one of the parameters, a shared array, or a scalar that
  may or may not differ between the threads of a block);
- every call, subscript and attribute gets the `Ctx` it runs in (which
  function, inside `with az.unsafe():` or not, and the node that made control
  thread-dependent, if any);
- every call gets its resolved `Callee`.

The interpretation is sound for the questions the rules ask: at a merge of
control flow a value that is a witness on one path and an int on the other is
an int; loops are iterated to a fixed point; an assignment under
thread-dependent control is thread-dependent; a `return`/`break` under
thread-dependent control makes every later barrier (in the function, or in the
rest of the loop) divergent.  The model decides nothing itself: the rules in
`checker/rules/` read these facts and report.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import ast

from anodize.language.diagnostics import Span
from anodize.language.vocab import ATOMIC_METHODS, BLOCK_COLLECTIVES, BLOCK_LEADER, BLOCK_WITNESS_MAKER, COLLECTIVES, DEBUG_BUILTINS, MATH_FUNCS, RAW_IDS, SCALARS, SLICE_KINDS, TILE_AT, TILE_IO, TILE_MAKER, WARP_OPS, WITNESS_MAKERS, WITNESS_TYPES, SliceKindInfo
from anodize.language.front import ModuleFront, front_for_source
from anodize.language.symbols import annotation_kind, canonical, decorator_kind
from anodize.language.tile_vocab import TILE_FUNCS

# Raw ids that differ between the threads of one block (the rest are block-uniform).
THREAD_VARYING_IDS = {"tid_x", "tid_y", "tid_z", "lane_id"}
VIEW_METHODS = {"view", "reshape", "ravel", "flatten", "transpose", "squeeze", "T", "real", "imag", "base"}
MAX_FIXPOINT = 8


# ---- names ---------------------------------------------------------------------------------


_MISSING = object()  # a cache's "not there yet" (None is a cached answer)


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
    """An abstract value.  kind: witness | local_witness | slice | shared | scalar | global | none | unknown."""

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
    if a.kind == b.kind and a.kind in ("shared", "global", "none"):
        return Val(a.kind, tdep=a.tdep or b.tdep)
    if {a.kind, b.kind} <= {"witness", "scalar"}:
        return VARYING  # a witness on one path and an int on the other is an int
    return UNKNOWN


Env = dict[str, Val]


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
            # bound on one path only: using it on the other is an error at run time; keep the
            # known value but never as a witness
            out[k] = VARYING if va.kind in ("witness", "thread_tile") else va
    for k, vb in b.items():
        if k not in a:
            out[k] = VARYING if vb.kind in ("witness", "thread_tile") else vb
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
    """kind: helper | kernel | function | witness | grid_stride | rawid | warp | warp_sync | shared | collective | leader |
    barrier | fence | unsafe | cast | math | builtin | range | atomic_op | write_unchecked | witness_get | forge |
    print | breakpoint | unknown"""

    kind: str
    name: str
    fn: FunctionInfo | None = None


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

    def is_output(self, index: int) -> bool:
        k = SLICE_KINDS.get(self.params[index][1])
        return bool(k and k.output)


class ModuleModel:
    """Everything the rules read about one module."""

    def __init__(self, tree: ast.Module, path: str, source: str, front: ModuleFront | None = None):
        if front is None:  # (a caller's own tree: the model is of that tree's nodes)
            front = front_for_source(source, path, tree)
            if front.tree is not tree:
                front = ModuleFront(source, path, tree)
        self.front = front
        self.tree = tree = self.front.tree
        self.module = tree  # the parsed module (an `ast.Module`)
        self.path = path
        self.source = source
        self.src = self.front.src
        self.names = self.front.names
        self._qualname_cache: dict[int, str | None] = {}  # by node id (the tree outlives the model)
        self.functions: dict[str, FunctionInfo] = {}
        self.by_node: dict[ast.AST, FunctionInfo] = {}
        self.values: dict[ast.AST, Val] = {}
        self.ctx: dict[ast.AST, Ctx] = {}
        self.callees: dict[ast.Call, Callee] = {}
        self.stores: set[ast.AST] = set()  # subscript/attribute/name nodes written
        self.barriers: dict[ast.Call, Ctx] = {}
        self.helper_barrier_calls: dict[ast.Call, Ctx] = {}
        self.warp_ops: dict[ast.Call, Ctx] = {}  # full-warp operations
        self.helper_warp_calls: dict[ast.Call, Ctx] = {}  # calls of helpers that reach one
        self.guards: dict[ast.AST, frozenset[tuple[str, str]]] = {}  # subscript -> (witness, slice)
        self.imports_anodize = False
        # without these words in the source no statement declares a name global or nonlocal
        self._declares = "global" in source or "nonlocal" in source
        self._build()

    # -- helpers for rules -------------------------------------------------------------------
    def span(self, node: ast.AST, top: int | None = None) -> Span:
        """`node`'s span (`top`, the index of the top-level statement that holds it, is not needed)."""
        return self.src.span(node)

    def code(self, node: ast.AST) -> str:
        return self.src.code(node).strip()

    def qualname(self, node: ast.AST) -> str | None:
        """The canonical qualified name of a name or attribute chain (see `canonical`)."""
        key = id(node)
        hit = self._qualname_cache.get(key, _MISSING)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        names = self.names.qualnames(node)
        out = None
        if len(names) == 1:
            out = canonical(names[0])
        elif names:
            best = sorted(names)
            out = canonical(best[0])
            for n in best:
                if n.startswith(("anodize", "math.", "builtins.")):
                    out = canonical(n)
                    break
        self._qualname_cache[key] = out
        return out

    def kernels(self) -> Iterator[FunctionInfo]:
        return (f for f in self.functions.values() if f.kind == "kernel")

    def summary(self, fn: FunctionInfo) -> KernelSummary:
        params = []
        for p in fn.params.values():
            kind = p.slice_kind.name if p.slice_kind else (p.scalar or "?")
            params.append((p.name, kind))
        c = fn.contract
        return KernelSummary(
            fn.name,
            self.path,
            tuple(params),
            c is not None,
            c.domain if c else None,
            c.block if c else None,
            self.src.name_span(fn.node),
        )

    def callees_of(self, fn: FunctionInfo) -> list[FunctionInfo]:
        """`fn` and every helper it calls, transitively."""
        out: list[FunctionInfo] = []
        todo = [fn]
        while todo:
            f = todo.pop()
            if f in out:
                continue
            out.append(f)
            todo.extend(g for _, g in f.helper_calls)
        return out

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        body = self.tree.body
        for top, stmt in enumerate(body):
            if isinstance(stmt, ast.Import):
                if any(a.name.split(".")[0] == "anodize" for a in stmt.names):
                    self.imports_anodize = True
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.module is not None and stmt.module.split(".")[0] == "anodize":
                    self.imports_anodize = True
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info = self._function(stmt)
                info.top = top
                self.functions[info.name] = info
                self.by_node[stmt] = info
            elif isinstance(stmt, ast.ClassDef):
                # kernels kept as static methods of a top-level class: `Holder.k`
                for inner in stmt.body:
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        info = self._function(inner)
                        info.top = top
                        if info.kind != "plain":
                            info.name = f"{stmt.name}.{info.name}"
                            self.functions[info.name] = info
                            self.by_node[inner] = info
        # `k = az.kernel(f)` / `h = az.func(f)` at module level mark `f` too
        for stmt in body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                first = call.args[0] if call.args else (call.keywords[0].value if call.keywords else None)
                if first is None:
                    continue
                if isinstance(first, ast.Starred):
                    first = first.value
                q = self.qualname(call.func)
                if q in ("az.kernel", "az.func") and isinstance(first, ast.Name) and first.id in self.functions:
                    target = self.functions[first.id]
                    if target.kind == "plain":
                        target.kind = "kernel" if q == "az.kernel" else "func"
                        self._scope_facts(target)
                    for t in stmt.targets:
                        if isinstance(t, ast.Name) and t.id not in self.functions:
                            self.functions[t.id] = target
        # every device function, also one whose name a later `def` took over
        for fn in list(dict.fromkeys([*self.by_node.values(), *self.functions.values()])):
            if fn.is_device:
                analyze(self, fn)

    def _function(self, node: ast.FunctionDef) -> FunctionInfo:
        kind = "plain"
        kdeco = None
        contract = None
        for d in node.decorator_list:
            q = decorator_kind(self.names, d)
            if (q == "kernel" and not isinstance(d, ast.Call)) or q == "tile_kernel":
                kind, kdeco = "kernel", d
            elif q == "func" and not isinstance(d, ast.Call):
                kind = "func" if kind != "kernel" else kind
            elif q == "launch_contract" and contract is None:
                contract = self._contract(d, node)
        params: dict[str, ParamInfo] = {}
        a = node.args
        for p in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            params[p.arg] = self._param(p)
        info = FunctionInfo(node.name, node, kind, params, contract, kdeco)
        if kind != "plain":  # a plain function's body is never analysed
            self._scope_facts(info)
        return info

    def _scope_facts(self, info: FunctionInfo) -> None:
        """The names a device function binds and declares global."""
        globals_: set[str] = set()
        if self._declares:
            for stmt in _walk_statements(info.node.body):
                if isinstance(stmt, (ast.Global, ast.Nonlocal)):
                    globals_.update(stmt.names)
        info.locals = self.names.function_locals(info.node) | frozenset(info.params)
        info.globals_declared = frozenset(globals_)

    def _param(self, p: ast.arg) -> ParamInfo:
        kind, skind, scalar = annotation_kind(self.front.symbols, p.annotation)
        if kind == "slice":
            return ParamInfo(p.arg, p, "slice", SLICE_KINDS[skind], scalar)  # type: ignore[index]
        if kind == "scalar":
            return ParamInfo(p.arg, p, "scalar", scalar=scalar)
        if kind == "witness":
            return ParamInfo(p.arg, p, "witness", domain=int(scalar or 0))
        if kind == "local":
            return ParamInfo(p.arg, p, "local", scalar=scalar)
        return ParamInfo(p.arg, p, "bad")

    def _contract(self, deco: ast.expr, node: ast.FunctionDef) -> ContractInfo:
        """The decorator's parts, with domain and block as the front end's one reading has them."""
        call = deco if isinstance(deco, ast.Call) else None
        args: dict[str, ast.keyword] = {}
        if call is not None:
            for kw in call.keywords:
                if kw.arg is not None:
                    args[kw.arg] = kw
        contract, _ = self.front.contract(node)
        if contract is None:
            return ContractInfo(deco, call, args, None, None)
        return ContractInfo(deco, call, args, contract.domain, contract.block)


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


def _walk_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body and of its nested blocks (not of nested functions or classes)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody"):
            sub = getattr(stmt, attr, None)
            if isinstance(sub, list):
                yield from _walk_statements(sub)
        for h in getattr(stmt, "handlers", ()) or ():
            yield from _walk_statements(h.body)


# ---- the abstract interpreter --------------------------------------------------------------


class _Loop:
    def __init__(self) -> None:
        self.divergent: ast.AST | None = None  # a thread-dependent break/continue/return
        self.lane_divergent: ast.AST | None = None  # a lane-dependent one (or head)
        self.break_envs: list[Env] = []
        self.continue_envs: list[Env] = []


_SYNTHETIC: dict[tuple[int, int], ast.BoolOp] = {}


def _bool_prefix(node: ast.BoolOp, k: int) -> ast.AST:
    """The operands before operand `k` of `a and b and c`, as the one node libcst's binary
    `BooleanOperation` had for them (`a`, then `a and b`), with their source range."""
    if k == 1:
        return node.values[0]
    key = (id(node), k)
    hit = _SYNTHETIC.get(key)
    if hit is None or hit.values[0] is not node.values[0]:
        first, last = node.values[0], node.values[k - 1]
        hit = ast.BoolOp(op=node.op, values=node.values[:k])
        hit.lineno, hit.col_offset = first.lineno, first.col_offset
        hit.end_lineno, hit.end_col_offset = last.end_lineno, last.end_col_offset
        if len(_SYNTHETIC) > 4096:
            _SYNTHETIC.clear()
        _SYNTHETIC[key] = hit
    return hit


class _Analyzer:
    def __init__(self, model: ModuleModel, fn: FunctionInfo):
        self.m = model
        self.fn = fn
        self.unsafe = False
        self.cond: list[ast.AST] = []  # thread-dependent conditions in force
        self.cond_lane: list[bool] = []  # for each: may it differ between the lanes of a warp
        self.loops: list[_Loop] = []
        self.div_return: ast.AST | None = None
        self.lane_return: ast.AST | None = None  # a lane-dependent return
        self.guards: list[tuple[str, str]] = []
        self._ctxs: dict[tuple[bool, ast.AST | None, ast.AST | None], Ctx] = {}
        block = fn.contract.block if fn.kind == "kernel" and fn.contract is not None else None
        dims = (tuple(block) + (1, 1, 1))[:3] if block else None
        # raw ids equal on the lanes of a warp under this kernel's literal block (warps are
        # 32 consecutive linear thread ids, x fastest)
        self.warp_uniform_ids: frozenset[str] = frozenset()
        self.warp_x = bool(dims and dims[0] % 32 == 0)  # `tid_x() // 32` is the warp's index
        if dims:
            self.warp_uniform_ids = frozenset(
                n for n, ok in (("tid_y", dims[0] % 32 == 0), ("tid_z", dims[0] * dims[1] % 32 == 0)) if ok
            )

    # context ------------------------------------------------------------------------------
    def divergent(self) -> ast.AST | None:
        if self.cond:
            return self.cond[-1]
        if self.div_return is not None:
            return self.div_return
        for lp in reversed(self.loops):
            if lp.divergent is not None:
                return lp.divergent
        return None

    def lane_divergent(self) -> ast.AST | None:
        for c, lane in zip(reversed(self.cond), reversed(self.cond_lane)):
            if lane:
                return c
        if self.lane_return is not None:
            return self.lane_return
        for lp in reversed(self.loops):
            if lp.lane_divergent is not None:
                return lp.lane_divergent
        return None

    def push_cond(self, node: ast.AST, lane: bool) -> None:
        self.cond.append(node)
        self.cond_lane.append(lane)

    def pop_cond(self) -> None:
        self.cond.pop()
        self.cond_lane.pop()

    def here(self) -> Ctx:
        # one `Ctx` per distinct context of this function (equal contexts are equal values)
        d = self.divergent()
        ld = self.lane_divergent() if d is not None else None
        key = (self.unsafe, d, ld)
        ctx = self._ctxs.get(key)
        if ctx is None:
            ctx = self._ctxs[key] = Ctx(self.fn, self.unsafe, d, ld)
        return ctx

    # entry ----------------------------------------------------------------------------------
    def run(self) -> None:
        env: Env = {}
        for p in self.fn.params.values():
            if p.kind == "slice":
                env[p.name] = Val("slice", params=frozenset([p.name]), origin=p.node)
            elif p.kind == "witness":
                env[p.name] = Val("witness", domain=p.domain, tdep=True, origin=p.node, spaces=frozenset([Space("param", param=p.name)]))
            elif p.kind == "scalar":
                # a helper's scalar may come from a thread-dependent value at its call site
                env[p.name] = VARYING if self.fn.kind == "func" else UNIFORM
            elif p.kind == "local":
                env[p.name] = LOCAL_ARRAY
            else:
                env[p.name] = UNKNOWN
        self.block(self.fn.node.body, env)

    # statements -----------------------------------------------------------------------------
    def block(self, stmts: Sequence[ast.stmt], env: Env | None) -> Env | None:
        last: Env | None = env
        dead: Env | None = None
        for stmt in stmts:
            if env is None:
                # Unreachable code is still checked (codegen compiles it), from the state at
                # the exit that made it unreachable; nothing flows out of it.
                if dead is None:
                    dead = dict(last) if last is not None else {}
                dead = self.statement(stmt, dead) or dead
                continue
            last = env
            env = self.statement(stmt, env)
        return env

    def assign_name(self, name: str, val: Val, env: Env) -> None:
        if val.kind == "scalar" and self.divergent() is not None:
            val = val.tainted(self.lane_divergent() is not None)
        env[name] = val

    def statement(self, s: ast.stmt, env: Env) -> Env | None:
        m = self.m
        if isinstance(s, ast.Assign):
            val = self.ev(s.value, env)
            for t in s.targets:
                self.store(t, val, env)
            return env
        if isinstance(s, ast.Expr):
            self.ev(s.value, env)
            return env
        if isinstance(s, ast.AugAssign):
            rhs = self.ev(s.value, env)
            if isinstance(s.target, ast.Name):
                old = self.ev(s.target, env)
                m.stores.add(s.target)
                m.ctx[s.target] = self.here()
                p = self.fn.params.get(s.target.id)
                if p is None or p.kind != "slice":  # rebinding a slice parameter is an error
                    self.assign_name(s.target.id, _scalar3(old.tdep or rhs.tdep, old.lane or rhs.lane), env)
            else:
                self.ev(s.target, env)
                m.stores.add(s.target)
                self._mark_write(getattr(s.target, "value", s.target), env)
            return env
        if isinstance(s, ast.If):
            return self.if_(s, env)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            return self.for_(s, env)
        if isinstance(s, ast.While):
            return self.loop(s, env, lambda e: self.ev(s.test, e), None, s.body, s.orelse)
        if isinstance(s, ast.AnnAssign):
            val = self.ev(s.value, env) if s.value is not None else UNKNOWN
            q = m.qualname(s.annotation) or ""
            if q.startswith("az.") and q[3:] in WITNESS_TYPES:
                if not (val.kind == "witness" and val.domain == WITNESS_TYPES[q[3:]]):
                    val = VARYING  # annotating a non-witness as one does not make it one
            self.store(s.target, val, env)
            return env
        if isinstance(s, ast.Return):
            d = self.divergent()
            if s.value is not None:
                v = self.ev(s.value, env)
                if d is not None and v.kind == "scalar":
                    # returned under thread-dependent control: which value a thread gets
                    # depends on the thread (the returns join, each tainted by its divergence)
                    v = v.tainted()
                self.fn.returns = join(self.fn.returns, v)
            else:
                self.fn.returns = join(self.fn.returns, NONE)
            if d is not None:
                if self.div_return is None:
                    self.div_return = s
                for lp in self.loops:
                    lp.divergent = lp.divergent or s
                if self.lane_divergent() is not None:
                    if self.lane_return is None:
                        self.lane_return = s
                    for lp in self.loops:
                        lp.lane_divergent = lp.lane_divergent or s
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            if self.loops:
                lp = self.loops[-1]
                if self.divergent() is not None and lp.divergent is None:
                    lp.divergent = s
                if self.lane_divergent() is not None and lp.lane_divergent is None:
                    lp.lane_divergent = s
                (lp.break_envs if isinstance(s, ast.Break) else lp.continue_envs).append(dict(env))
            return None
        if isinstance(s, (ast.With, ast.AsyncWith)):
            unsafe = False
            for item in s.items:
                self.ev(item.context_expr, env)
                e = item.context_expr
                callee = self.m.callees.get(e) if isinstance(e, ast.Call) else None
                if callee is not None and callee.kind == "unsafe":
                    unsafe = True
                if item.optional_vars is not None:
                    self.store(item.optional_vars, UNKNOWN, env)
            prev = self.unsafe
            self.unsafe = prev or unsafe
            out = self.block(s.body, env)
            self.unsafe = prev
            return out
        if isinstance(s, ast.Delete):
            for t in s.targets:
                for tgt in _targets(t):
                    self.ev(tgt, env)
                    m.stores.add(tgt)
                    self._mark_write(getattr(tgt, "value", tgt), env)
                    if isinstance(tgt, ast.Name):
                        env.pop(tgt.id, None)
            return env
        if isinstance(s, ast.Raise):
            return None
        if isinstance(s, ast.Assert):
            self.ev(s.test, env)
            return env
        if isinstance(s, ast.Try):
            out = self.block(s.body, dict(env))
            for h in s.handlers:
                out = join_env(out, self.block(h.body, dict(env)))
            return out
        # pass, global, nonlocal, import; nested def/class/match: analysed no further (the
        # rules report what needs reporting)
        return env

    def store(self, target: ast.expr, val: Val, env: Env) -> None:
        m = self.m
        if isinstance(target, ast.Name):
            m.stores.add(target)
            m.values[target] = val
            m.ctx[target] = self.here()
            name = target.id
            p = self.fn.params.get(name)
            if p is not None and p.kind == "slice":
                return  # rebinding a slice parameter is an error; keep its declared kind
            self.assign_name(name, val, env)
        elif isinstance(target, (ast.Tuple, ast.List)):
            # `a, b = f(x)` / `a, b = b, a`: tuples hold scalars, so each name gets the scalar
            # join of the right side (over-approximated: every element's dependence)
            elt = val if val.kind == "scalar" else UNKNOWN
            for e in target.elts:
                self.store(e.value if isinstance(e, ast.Starred) else e, elt, env)
        elif isinstance(target, ast.Starred):
            self.store(target.value, UNKNOWN, env)
        else:  # subscript or attribute
            m.stores.add(target)
            self.ev(target, env)
            self._mark_write(getattr(target, "value", target), env)

    def if_(self, s: ast.If, env: Env) -> Env | None:
        tv = self.ev(s.test, env)
        tdep = tv.tdep
        guards = self._guards_of(s.test, env)
        if tdep:
            self.push_cond(s.test, tv.lane)
        self.guards.extend(guards)
        body = self.block(s.body, dict(env))
        del self.guards[len(self.guards) - len(guards) :]
        other: Env | None = self.block(s.orelse, dict(env)) if s.orelse else dict(env)
        if tdep:
            self.pop_cond()
            # values bound on only one side of a thread-dependent branch differ between threads
            for e in (body, other):
                if e is not None:
                    for k, v in list(e.items()):
                        if v.kind == "scalar" and env.get(k) != v:
                            e[k] = v.tainted(tv.lane)
        return join_env(body, other)

    def _guards_of(self, test: ast.expr, env: Env) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        parts = [test]
        while parts:
            t = parts.pop()
            if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.And):
                parts += t.values
            elif (
                isinstance(t, ast.Compare)
                and len(t.ops) == 1
                and isinstance(t.ops[0], ast.In)
                and isinstance(t.left, ast.Name)
                and isinstance(t.comparators[0], ast.Name)
            ):
                out.append((t.left.id, t.comparators[0].id))
        return out

    def for_(self, s: ast.For, env: Env) -> Env | None:
        it = self.ev(s.iter, env)
        callee = self.m.callees.get(s.iter) if isinstance(s.iter, ast.Call) else None
        loop_tdep: ast.AST | None
        if callee is not None and callee.kind == "grid_stride":
            over = self.m.values.get(s.iter.args[0]) if isinstance(s.iter, ast.Call) and s.iter.args else None  # type: ignore[union-attr]
            # one space per slice the loop may iterate: a loop over a slice chosen at run time
            # maps each choice its own way
            names = sorted(over.params) if over is not None and over.kind == "slice" else []
            binding = frozenset((p.name, p.name) for p in self.fn.params.values() if p.kind == "slice")
            spaces = frozenset(Space("grid_stride", s.iter, frozenset([n]), binding=binding) for n in names) or frozenset(
                [Space("grid_stride", s.iter, binding=binding)]
            )
            var = Val("witness", domain=1, tdep=True, origin=s.iter, spaces=spaces)
            loop_tdep = s.iter  # each thread runs its own number of iterations
        elif callee is not None and callee.kind == "range":
            var = _scalar3(it.tdep, it.lane)
            loop_tdep = s.iter if it.tdep else None
        else:
            var = UNKNOWN
            loop_tdep = s.iter
        # a grid-stride loop's trip count differs between the lanes; a range's as its bounds
        loop_lane = callee is None or callee.kind != "range" or it.lane

        def head(e: Env) -> Val:
            self.store(s.target, var, e)
            return _scalar3(loop_tdep is not None, loop_lane)

        return self.loop(s, env, head, loop_tdep, s.body, s.orelse)

    def loop(self, s, env: Env, head, head_div, body, orelse) -> Env | None:  # type: ignore[no-untyped-def]
        entry = dict(env)
        state: Env = dict(env)
        lp = _Loop()
        self.loops.append(lp)
        exit_env: Env | None = None
        for _ in range(MAX_FIXPOINT):
            before = (dict(state), lp.divergent, self.div_return, lp.lane_divergent, self.lane_return)
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            hv = head(iter_env)
            div = head_div if head_div is not None else (s.test if isinstance(s, ast.While) and hv.tdep else None)
            if div is not None and lp.divergent is None:
                lp.divergent = div
            if div is not None and hv.lane and lp.lane_divergent is None:
                lp.lane_divergent = div
            if div is not None:
                self.push_cond(div, hv.lane)
            out = self.block(body, dict(iter_env))
            if div is not None:
                self.pop_cond()
            back = out
            for ce in lp.continue_envs:
                back = join_env(back, ce)
            if lp.divergent is not None and back is not None:
                for k, v in list(back.items()):
                    if v.kind == "scalar" and state.get(k) != v:
                        back[k] = v.tainted(lp.lane_divergent is not None)
            new_state = join_env(state, back) or state
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
            if (new_state, lp.divergent, self.div_return, lp.lane_divergent, self.lane_return) == before:
                break
            state = new_state
        else:
            # no fixed point in MAX_FIXPOINT passes: widen (every changed value to a
            # thread-dependent int, the loop divergent) and record one last pass
            for k, v in list(state.items()):
                if entry.get(k) != v:
                    state[k] = VARYING if v.kind in ("witness", "scalar") else UNKNOWN
            lp.divergent = lp.divergent or s
            lp.lane_divergent = lp.lane_divergent or s
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            head(iter_env)
            self.push_cond(s, True)
            self.block(body, dict(iter_env))
            self.pop_cond()
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
        self.loops.pop()
        if orelse:
            exit_env = self.block(orelse, exit_env) if exit_env is not None else None
        # after the loop every thread is back together: only the values carry the divergence
        return exit_env

    # expressions ----------------------------------------------------------------------------
    def ev(self, node: ast.expr, env: Env) -> Val:
        """`node`'s value in `env`, recorded in `model.values` (names and constants here, the
        most common nodes; the others in `_ev`)."""
        cls = node.__class__
        if cls is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in env:
                v = env[name]
            elif name in self.fn.locals:
                v = UNKNOWN  # a local read before any binding on this path
            else:
                v = Val("global", origin=node)
        elif cls is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            v = NONE if value is None else UNKNOWN if value is Ellipsis else UNIFORM
        else:
            v = self._ev(node, env)
        self.m.values[node] = v
        return v

    def _ev(self, node: ast.expr, env: Env) -> Val:
        m = self.m
        cls = node.__class__
        if cls is ast.BinOp:
            a = self.ev(node.left, env)  # type: ignore[attr-defined]
            b = self.ev(node.right, env)  # type: ignore[attr-defined]
            if a.kind == "tile" or b.kind == "tile":
                return TILE  # element-wise over a tile (checker/tile_model.py)
            if not (a.tdep or b.tdep):
                return UNIFORM
            if a.tid_x and self.warp_x and _warp_index_op(node):  # type: ignore[arg-type]
                return WARP_UNIFORM  # `tid_x() // 32` (or `>> 5`): the warp's index in its row
            return _scalar3(True, a.lane or b.lane)
        if cls is ast.Subscript:
            return self.subscript(node, env)  # type: ignore[arg-type]
        if cls is ast.Call:
            return self.call(node, env)  # type: ignore[arg-type]
        if cls is ast.Attribute:
            return self.attribute(node, env)  # type: ignore[arg-type]
        if cls is ast.Compare:
            lv = self.ev(node.left, env)  # type: ignore[attr-defined]
            t, lane = lv.tdep, lv.lane
            tile = lv.kind == "tile"
            for c in node.comparators:  # type: ignore[attr-defined]
                cv = self.ev(c, env)
                t, lane = t or cv.tdep, lane or cv.lane
                tile = tile or cv.kind == "tile"
            m.ctx[node] = self.here()
            return TILE if tile else _scalar3(t, lane)
        if cls is ast.UnaryOp:
            a = self.ev(node.operand, env)  # type: ignore[attr-defined]
            return TILE if a.kind == "tile" else _scalar3(a.tdep, a.lane)
        if cls is ast.BoolOp:
            values = node.values  # type: ignore[attr-defined]
            first = self.ev(values[0], env)
            tdep, lane = first.tdep, first.lane
            for k in range(1, len(values)):
                if tdep:
                    self.push_cond(_bool_prefix(node, k), lane)  # type: ignore[arg-type]
                b = self.ev(values[k], env)
                if tdep:
                    self.pop_cond()
                tdep, lane = tdep or b.tdep, lane or b.lane
            return _scalar3(tdep, lane)
        if cls is ast.IfExp:
            cv = self.ev(node.test, env)  # type: ignore[attr-defined]
            if cv.tdep:
                self.push_cond(node.test, cv.lane)  # type: ignore[attr-defined]
            a = self.ev(node.body, env)  # type: ignore[attr-defined]
            b = self.ev(node.orelse, env)  # type: ignore[attr-defined]
            if cv.tdep:
                self.pop_cond()
            j = join(a, b) or UNKNOWN
            return j.tainted(cv.lane) if cv.tdep and j.kind == "scalar" else j
        if cls in (ast.Tuple, ast.List, ast.Set):
            parts = [self.ev(e.value if e.__class__ is ast.Starred else e, env) for e in node.elts]  # type: ignore[attr-defined]
            if cls is ast.Tuple and parts and all(p.kind == "scalar" for p in parts):
                # a tuple of scalars (a helper's `return a, b`, the right of `a, b = b, a`)
                return _scalar3(any(p.tdep for p in parts), any(p.lane for p in parts))
            return Val("unknown", tdep=True)
        if cls is ast.NamedExpr:
            v = self.ev(node.value, env)  # type: ignore[attr-defined]
            self.store(node.target, v, env)  # type: ignore[attr-defined]
            return v
        if cls is ast.JoinedStr:
            return UNIFORM
        if cls is ast.Dict:
            return UNKNOWN
        # anything else (lambda, comprehension, await, ...): evaluate the parts we can see
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.ev(child.value if child.__class__ is ast.Starred else child, env)  # type: ignore[attr-defined]
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        m.guards[node] = frozenset(self.guards)
        base = self.ev(node.value, env)
        tdep = False
        lane = False
        sliced = False  # a slice `a:b` among the indices (`index_elements` gives None)
        sl = node.slice
        if sl.__class__ is ast.Tuple:
            for e in sl.elts:  # type: ignore[attr-defined]
                if e.__class__ is ast.Slice:
                    self._slice_parts(e, env)  # type: ignore[arg-type]
                    sliced = True
                else:
                    ev = self.ev(e.value if e.__class__ is ast.Starred else e, env)  # type: ignore[attr-defined]
                    tdep, lane = ev.tdep or tdep, ev.lane or lane
        elif sl.__class__ is ast.Slice:
            self._slice_parts(sl, env)  # type: ignore[arg-type]
            sliced = True
        else:
            ev = self.ev(sl, env)
            tdep, lane = ev.tdep, ev.lane
        if sliced:
            return UNKNOWN
        if base.kind == "slice":
            output = False
            for name in base.params:
                p = self.fn.params.get(name)
                if p is not None and p.slice_kind is not None and p.slice_kind.output:
                    output = True
                    break
            # an input is read-only for the whole launch: equal indices read equal values
            return VARYING if output else _scalar3(tdep, lane)
        if base.kind in ("scalar", "global"):
            return _scalar3(base.tdep or tdep, base.lane or lane)
        return VARYING  # shared memory and anything unknown: assume it differs between threads

    def _slice_parts(self, sl: ast.Slice, env: Env) -> None:
        for part in (sl.lower, sl.upper, sl.step):
            if part is not None:
                self.ev(part, env)

    def attribute(self, node: ast.Attribute, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        if self._module_path(node.value):
            return Val("global", origin=node)
        base = self.ev(node.value, env)
        attr = node.attr
        if base.kind == "tile_id":  # `pid.row` / `pid.col`: the same on every thread of the program
            return UNIFORM
        if base.kind == "tile":  # `x.T`
            return base
        if base.kind in ("witness", "local_witness"):
            return VARYING
        if base.kind == "slice":
            return UNIFORM if attr == "shape" else UNKNOWN
        if base.kind == "global":
            return Val("global", origin=node)
        return Val(base.kind if base.kind == "scalar" else "unknown", tdep=True)

    def call(self, node: ast.Call, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        callee = self.resolve(node, env)
        m.callees[node] = callee
        anytdep = anylane = anytile = False
        for a in node.args:
            av = self.ev(a.value if a.__class__ is ast.Starred else a, env)  # type: ignore[attr-defined]
            anytdep, anylane = av.tdep or anytdep, av.lane or anylane
            anytile = anytile or av.kind == "tile"
        for kw in node.keywords:
            av = self.ev(kw.value, env)
            anytdep, anylane = av.tdep or anytdep, av.lane or anylane
        k = callee.kind
        if k == "witness":
            d = 1 if callee.name == f"thread.{BLOCK_WITNESS_MAKER}" else WITNESS_MAKERS[callee.name.split(".")[-1]]
            self.fn.witness_uses.append((node, d))
            return Val("witness", domain=d, tdep=True, origin=node, spaces=maker_spaces(callee.name))
        if k == "grid_stride":
            self.fn.witness_uses.append((node, 1))
            return UNKNOWN
        if k in ("tile", "tile_method"):
            from .tile_model import tile_call

            return tile_call(self, node, callee, env)
        if k == "thread_tile":  # thread.tile_2d(TR, TC[, GR, GC]): each shape is one index space
            self.fn.witness_uses.append((node, 2))
            return Val("thread_tile", domain=2, tdep=True, origin=node, spaces=tile_spaces(node))
        if k == "tile_at":  # t.at(r, s): an Index2D of the tile's space
            base = self.m.values.get(node.func.value)  # type: ignore[attr-defined]
            spaces = base.spaces if base is not None and base.kind == "thread_tile" else frozenset()
            return Val("witness", domain=2, tdep=True, origin=node, spaces=spaces) if spaces else UNKNOWN
        if k == "tile_io":  # t.load(x, v, fill) / t.store(out, v): the tile's elements, no value
            return NONE
        if k == "rawid":
            self.fn.thread_dependent = True
            short = callee.name.split(".")[-1]
            if short not in THREAD_VARYING_IDS:
                return UNIFORM
            if short == "tid_x":
                return TID_X
            return WARP_UNIFORM if short in self.warp_uniform_ids else VARYING
        if k == "warp":
            self.fn.thread_dependent = True
            self.m.warp_ops[node] = self.here()
            if self.fn.warp_op is None:
                self.fn.warp_op = node
            # a vote gives every lane of the warp the same answer; a shuffle gives each its own
            return WARP_UNIFORM if callee.name.split(".")[-1] in WARP_VOTES else VARYING
        if k == "shared":
            return Val("shared", tdep=True, origin=node)
        if k == "local":  # az.local.array: private to the thread, never shared state
            return LOCAL_ARRAY
        if k == "local_witness":  # this thread's slot in its block (safe shared memory)
            self.fn.thread_dependent = True
            return Val("local_witness", domain=2 if callee.name.endswith("_2d") else 1, tdep=True, origin=node)
        if k == "shared_atomic":
            self.fn.thread_dependent = True
            return VARYING
        if k == "collective":  # az.warp.reduce, az.block.reduce/scan/broadcast
            return self.collective(node, callee.name)
        if k == "leader":  # thread.is_block_leader(): true on one thread of the block
            self.fn.thread_dependent = True
            return VARYING
        if k == "barrier":
            m.barriers[node] = self.here()
            self.fn.has_barrier = True
            return NONE
        if k in ("unsafe", "print", "breakpoint"):
            return NONE
        if k in ("cast", "math", "builtin", "range"):
            if callee.name == "len":
                return UNIFORM
            if anytile:
                return TILE
            return _scalar3(anytdep, anylane)
        if k == "atomic_op":
            self.fn.thread_dependent = True
            if callee.name != "load":  # an atomic load reads
                self._mark_write(node.func.value, env)  # type: ignore[attr-defined]
            return VARYING
        if k == "write_unchecked":
            self._mark_write(node.func.value, env)  # type: ignore[attr-defined]
            return NONE
        if k == "witness_get":
            return VARYING
        if k == "helper" and callee.fn is not None:
            h = callee.fn
            if not h.analyzed:
                analyze(m, h)
            self.fn.helper_calls.append((node, h))
            if h.has_barrier:
                self.fn.has_barrier = True
                m.helper_barrier_calls[node] = self.here()
            if h.warp_op is not None:
                m.helper_warp_calls[node] = self.here()
                if self.fn.warp_op is None:
                    self.fn.warp_op = node
            if h.thread_dependent:
                self.fn.thread_dependent = True
            # slices passed to parameters the helper writes are written here
            for pname, arg in bind_args(h, node):
                if pname in h.writes:
                    self._mark_write(arg, env)
            ret = h.returns or NONE
            if ret.kind == "witness":
                return Val("witness", domain=ret.domain, tdep=True, origin=node, spaces=self.call_spaces(h, node, ret.spaces))
            if ret.kind == "scalar":
                return _scalar(anytdep or h.thread_dependent or ret.tdep)
            return ret if ret.kind == "none" else UNKNOWN
        return UNKNOWN

    def collective(self, node: ast.Call, name: str) -> Val:
        """A block collective is a barrier (every thread of the block must reach it) whose
        result is the same on every thread, but for a scan's; `warp.reduce` is a full-warp
        operation whose result is the same on the warp's lanes."""
        if name in BLOCK_COLLECTIVES:
            self.m.barriers[node] = self.here()
            self.fn.has_barrier = True
            if name == "block.scan":
                self.fn.thread_dependent = True
                return VARYING
            return UNIFORM
        self.fn.thread_dependent = True
        self.m.warp_ops[node] = self.here()
        if self.fn.warp_op is None:
            self.fn.warp_op = node
        return WARP_UNIFORM

    def call_spaces(self, h: FunctionInfo, node: ast.Call, spaces: frozenset[Space]) -> frozenset[Space]:
        """`spaces` of helper `h` as seen at its call `node` (see `substitute`)."""
        return substitute(spaces, h, node, self.m.values)

    def _module_path(self, node: ast.expr) -> bool:
        """Is `node` a name chain naming anodize, one of its modules or classes, or `math`?"""
        if isinstance(node, ast.Name):
            if node.id in self.fn.locals:
                return False
        elif not isinstance(node, ast.Attribute):
            return False
        q = self.m.qualname(node) or ""
        return q in ("anodize", "math") or q.startswith(("az.", "math."))

    def _mark_write(self, target: ast.expr, env: Env) -> None:
        v = self.m.values.get(target) or self.ev(target, env)
        if v.kind == "slice":
            self.fn.writes.update(v.params & set(self.fn.params))

    def resolve(self, node: ast.Call, env: Env) -> Callee:
        m = self.m
        f = node.func
        if isinstance(f, ast.Attribute) and not self._module_path(f.value):
            base = self.ev(f.value, env)
            attr = f.attr
            if base.kind in ("tile", "tile_id"):  # the Tile model (checker/tile_model.py)
                return Callee("tile_method", attr)
            if base.kind == "witness":
                if attr == "get":
                    return Callee("witness_get", attr)
                return Callee("forge" if attr.startswith("_") else "unknown", attr)
            if base.kind == "thread_tile":  # a per-thread tile: `t.at(r, s)`
                return Callee("tile_at" if attr == TILE_AT else "tile_io" if attr in TILE_IO else "unknown", attr)
            if base.kind == "local_witness":  # a block-local witness: `w.get()`
                return Callee("witness_get" if attr == "get" else "unknown", attr)
            if base.kind == "shared" and attr in ATOMIC_METHODS:  # a block-shared atomic array
                return Callee("shared_atomic", attr)
            if base.kind == "slice":
                if attr in ATOMIC_METHODS:
                    return Callee("atomic_op", attr)
                if attr == "write_unchecked":
                    return Callee("write_unchecked", attr)
                return Callee("method", attr)
        q = m.qualname(f)
        if q is None:
            if isinstance(f, ast.Name) and f.id in self.m.functions:
                q = f.id
            else:
                return Callee("unknown", m.code(f))
        short = q.split(".")[-1]
        if q in ("thread.index_1d", "thread.index_2d", "thread.index_3d", f"thread.{BLOCK_WITNESS_MAKER}"):
            return Callee("witness", q)
        if q == "thread.grid_stride":
            return Callee("grid_stride", q)
        if q.startswith("tile.") and short in TILE_FUNCS:
            return Callee("tile", q)
        if q == f"thread.{TILE_MAKER}":
            return Callee("thread_tile", q)
        if q.startswith("thread.") and short in RAW_IDS:
            return Callee("rawid", q)
        if q.startswith("warp.") and short in WARP_OPS:
            return Callee("warp", q)
        if q in ("shared.array", "shared.dynamic_array", "shared.atomic_array"):
            return Callee("shared", q)
        if q == "local.array":
            return Callee("local", q)
        if q in ("thread.index_in_block", "thread.index_in_block_2d"):
            return Callee("local_witness", q)
        if q in COLLECTIVES:
            return Callee("collective", q)
        if q == f"thread.{BLOCK_LEADER}":
            return Callee("leader", q)
        if q == "az.syncthreads":
            return Callee("barrier", q)
        if q == "az.threadfence":
            return Callee("fence", q)
        if q == "warp.sync":
            return Callee("warp_sync", q)
        if q == "az.unsafe":
            return Callee("unsafe", q)
        if q.startswith(("az.Index1D", "az.Index2D", "az.Index3D", "az.BlockWitness1D")):
            return Callee("forge", q)
        if q.startswith("az.") and short in SCALARS and q.count(".") == 1:
            return Callee("cast", short)
        if q.startswith("math.") and short in MATH_FUNCS:
            return Callee("math", q)
        if q in ("builtins.int", "builtins.float", "builtins.bool"):
            return Callee("cast", {"int": "i64", "float": "f64", "bool": "bool_"}[short])
        if q in ("builtins.abs", "builtins.min", "builtins.max", "builtins.len"):
            return Callee("builtin", short)
        if q == "builtins.range":
            return Callee("range", short)
        if q == "typing.cast":
            return Callee("cast", q)
        if "." not in q and m.front.symbols.own(q).kind == "typevar":
            return Callee("cast", q)  # `T(x)`: a cast to the specialisation's scalar
        if q.startswith("builtins.") and short in DEBUG_BUILTINS:
            return Callee(short, short)
        target = m.functions.get(q)
        if target is not None:
            if target.kind == "func":
                return Callee("helper", q, target)
            return Callee("kernel" if target.kind == "kernel" else "function", q, target)
        return Callee("unknown", m.code(f))


def _targets(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return list(node.elts)
    return [node]


# warp operations whose result is the same on every lane (`reduce` once the vocabulary has it)
WARP_VOTES = {"ballot", "any", "all", "reduce"}


def _warp_index_op(node: ast.BinOp) -> bool:
    """`x // (32 * k)` or `x >> s` with `5 <= s < 32`, literal on the right: equal on the 32 lanes
    of a warp when `x` is `tid_x()` (an `i32`) and the block's x extent is a multiple of 32."""
    r = literal_int(node.right)
    if r is None:
        return False
    if isinstance(node.op, ast.FloorDiv):
        return r > 0 and r % 32 == 0
    if isinstance(node.op, ast.RShift):
        return 5 <= r < 32
    return False


_MAKER_SPACES: dict[str, frozenset[Space]] = {}


def tile_spaces(node: ast.Call) -> frozenset[Space]:
    """The index space of `thread.tile_2d(TR, TC[, GR, GC])`: one per shape (the mapping is fixed
    by the shape and the launch), so two calls with one shape are one space."""
    parts: list[str] = []
    for a in node.args:
        try:
            parts.append(repr(ast.literal_eval(a)))
        except ValueError:
            parts.append(ast.unparse(a))
    if len(parts) == 2:
        parts += ["1", "1"]
    return frozenset([Space(TILE_MAKER, param=", ".join(parts))])


def maker_spaces(maker: str) -> frozenset[Space]:
    """The one index space of a witness maker (`thread.index_1d` -> `index_1d`), wherever it is called."""
    short = maker.split(".")[-1]
    hit = _MAKER_SPACES.get(short)
    if hit is None:
        hit = _MAKER_SPACES[short] = frozenset([Space(short)])
    return hit


def substitute(spaces: frozenset[Space], h: FunctionInfo, call: ast.Call, values: dict[ast.AST, Val]) -> frozenset[Space]:
    """A helper's witness spaces at one of its calls: a witness parameter becomes the spaces of
    its argument, and a grid-stride loop over slice parameters loops over the arguments' slices
    (the same loop over other slices is another mapping)."""
    if not spaces or all(sp.kind not in ("param", "grid_stride") for sp in spaces):
        return spaces
    args = dict(bind_args(h, call))
    out: set[Space] = set()
    for sp in spaces:
        if sp.kind == "param":
            a = args.get(sp.param)
            v = values.get(a) if a is not None else None
            if v is not None and v.kind == "witness":
                out |= v.spaces
        elif sp.kind == "grid_stride":

            def bound(name: str) -> list[str]:
                a = args.get(name)
                v = values.get(a) if a is not None else None
                if v is not None and v.kind == "slice" and v.params:
                    return sorted(v.params)
                return [f"{h.name}.{name}"]  # not a slice here: apart from every slice of the caller

            binding = frozenset((p, "|".join(bound(x))) for p, x in sp.binding)
            for name in sp.over or ("",):
                for b in bound(name) if name else [""]:
                    out.add(replace(sp, over=frozenset([b]) if b else frozenset(), binding=binding))
        else:
            out.add(sp)
    return frozenset(out)


def bind_args(fn: FunctionInfo, call: ast.Call) -> list[tuple[str, ast.expr]]:
    """(parameter name, argument expression) for each argument of a call to `fn`."""
    names = list(fn.params)
    out: list[tuple[str, ast.expr]] = []
    pos = 0
    for a in call.args:
        if isinstance(a, ast.Starred):
            continue
        if pos < len(names):
            out.append((names[pos], a))
        pos += 1
    for kw in call.keywords:
        if kw.arg is not None:
            out.append((kw.arg, kw.value))
    return out


def analyze(model: ModuleModel, fn: FunctionInfo) -> None:
    """Run the abstract interpreter over one kernel or helper (helpers on first use)."""
    if fn.analyzed or fn.in_progress:
        if fn.in_progress:  # recursion: assume the worst of the helper
            fn.has_barrier = True
            fn.thread_dependent = True
            fn.writes.update(p for p, i in fn.params.items() if i.kind == "slice")
        return
    fn.in_progress = True
    _Analyzer(model, fn).run()
    fn.in_progress = False
    fn.analyzed = True
