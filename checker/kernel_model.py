"""The per-module kernel model: computed once, read by every rule.

For one parsed module it records which top-level functions are kernels and
`@az.func` helpers, their parameters (slice kinds, scalars, witnesses, from
`checker/model.py`), their launch contracts, and a flow-sensitive abstract
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

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider

from .diagnostics import Span
from .model import MATH_FUNCS, RAW_IDS, SCALARS, SLICE_KINDS, WARP_OPS, WITNESS_TYPES, SliceKindInfo
from .positions import Positions
from .walk import QualifiedNames

# Raw ids that differ between the threads of one block (the rest are block-uniform).
THREAD_VARYING_IDS = {"tid_x", "tid_y", "tid_z", "lane_id"}
ATOMIC_METHODS = {"add", "min", "max", "exchange"}
VIEW_METHODS = {"view", "reshape", "ravel", "flatten", "transpose", "squeeze", "T", "real", "imag", "base"}
MAX_FIXPOINT = 8


# ---- names ---------------------------------------------------------------------------------


def canonical(qualname: str) -> str:
    """`anodize.thread.index_1d` -> `thread.index_1d`, `anodize.types.Slice` -> `az.Slice`."""
    for prefix, short in (
        ("anodize.thread.", "thread."),
        ("anodize.warp.", "warp."),
        ("anodize.shared.", "shared."),
        ("anodize.math.", "math."),
        ("anodize.types.", "az."),
        ("anodize.kernel.", "az."),
        ("anodize.runtime.config.", "az."),
        ("anodize.", "az."),
    ):
        if qualname.startswith(prefix):
            return short + qualname[len(prefix) :]
    return qualname


def dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


# ---- abstract values -----------------------------------------------------------------------


@dataclass(frozen=True)
class Val:
    """An abstract value.  kind: witness | slice | shared | scalar | global | none | unknown."""

    kind: str
    domain: int = 0  # witness: its index space (1 or 2)
    tdep: bool = False  # may differ between the threads of a block
    params: frozenset[str] = frozenset()  # slice: the parameters it may be
    origin: cst.CSTNode | None = field(default=None, compare=False)

    def tainted(self) -> Val:
        return self if self.tdep else replace(self, tdep=True)


UNIFORM = Val("scalar")
VARYING = Val("scalar", tdep=True)
UNKNOWN = Val("unknown", tdep=True)
NONE = Val("none")


def join(a: Val | None, b: Val | None) -> Val | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    if a.kind == b.kind == "witness" and a.domain == b.domain:
        return a
    if a.kind == b.kind == "slice":
        return Val("slice", params=a.params | b.params, tdep=a.tdep or b.tdep, origin=a.origin)
    if a.kind == b.kind and a.kind in ("scalar", "shared", "global", "none"):
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
    for k in a.keys() | b.keys():
        v = join(a.get(k), b.get(k))
        if k not in a or k not in b:
            # bound on one path only: using it on the other is an error at run time; keep the
            # known value but never as a witness
            v = VARYING if v is not None and v.kind == "witness" else v
        if v is not None:
            out[k] = v
    return out


# ---- the model -----------------------------------------------------------------------------


@dataclass
class ParamInfo:
    name: str
    node: cst.Param
    kind: str  # "slice" | "scalar" | "witness" | "bad"
    slice_kind: SliceKindInfo | None = None
    scalar: str | None = None
    domain: int = 0  # witness params (helpers only)


@dataclass
class ContractInfo:
    decorator: cst.Decorator
    call: cst.Call | None
    args: dict[str, cst.Arg]
    domain: int | None  # the literal domain when it is 1 or 2
    block: tuple[int, ...] | None  # the literal block, CUDA order


@dataclass(frozen=True)
class Ctx:
    fn: FunctionInfo
    unsafe: bool
    divergent: cst.CSTNode | None  # what makes control thread-dependent here


@dataclass(frozen=True)
class Callee:
    """kind: helper | kernel | function | witness | grid_stride | rawid | warp | shared | barrier |
    unsafe | cast | math | builtin | range | atomic_op | write_unchecked | witness_get | forge | unknown"""

    kind: str
    name: str
    fn: FunctionInfo | None = None


@dataclass(eq=False)
class FunctionInfo:
    name: str
    node: cst.FunctionDef
    kind: str  # "kernel" | "func" | "plain"
    params: dict[str, ParamInfo]
    contract: ContractInfo | None
    kernel_decorator: cst.Decorator | None
    locals: frozenset[str] = frozenset()
    globals_declared: frozenset[str] = frozenset()
    top: int | None = None  # index of the module's top-level statement that holds it
    # analysis summary
    analyzed: bool = False
    in_progress: bool = False
    witness_uses: list[tuple[cst.Call, int]] = field(default_factory=list)  # makers called directly
    helper_calls: list[tuple[cst.Call, FunctionInfo]] = field(default_factory=list)
    writes: set[str] = field(default_factory=set)  # slice parameters written (also through helpers)
    has_barrier: bool = False  # reaches a barrier (also through helpers)
    thread_dependent: bool = False  # results may differ between threads
    returns: Val | None = None

    @property
    def is_device(self) -> bool:
        return self.kind in ("kernel", "func")

    @property
    def domain(self) -> int | None:
        return self.contract.domain if self.contract else None

    def domains_used(self) -> dict[int, cst.CSTNode]:
        """Index spaces this function's witnesses come from (also through helpers)."""
        out: dict[int, cst.CSTNode] = {}
        seen: set[int] = set()

        def walk(f: FunctionInfo, via: cst.CSTNode | None) -> None:
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

    def __init__(self, wrapper: MetadataWrapper, path: str, source: str):
        self.wrapper = wrapper
        self.module = wrapper.module
        self.path = path
        self.source = source
        self._positions: Positions | None = None  # created on first use
        self.scopes = wrapper.resolve(ScopeProvider)
        self._qualnames = wrapper.resolve(QualifiedNames)  # libcst's QualifiedNameProvider
        self.functions: dict[str, FunctionInfo] = {}
        self.by_node: dict[cst.FunctionDef, FunctionInfo] = {}
        self.values: dict[cst.CSTNode, Val] = {}
        self.ctx: dict[cst.CSTNode, Ctx] = {}
        self.callees: dict[cst.Call, Callee] = {}
        self.stores: set[cst.CSTNode] = set()  # subscript/attribute/name nodes written
        self.barriers: dict[cst.Call, Ctx] = {}
        self.helper_barrier_calls: dict[cst.Call, Ctx] = {}
        self.guards: dict[cst.CSTNode, frozenset[tuple[str, str]]] = {}  # subscript -> (witness, slice)
        self.imports_anodize = False
        self._build()

    # -- helpers for rules -------------------------------------------------------------------
    @property
    def positions(self) -> Positions:
        """PositionProvider's ranges, computed only for the top-level statements that hold a
        node asked about (checker/positions.py)."""
        if self._positions is None:
            self._positions = Positions(self.module, self.source)
        return self._positions

    def span(self, node: cst.CSTNode, top: int | None = None) -> Span:
        """`node`'s span; `top`, if known, is the top-level statement that holds it."""
        r = self.positions.get_range(node, top)
        return Span(self.path, r.start.line, r.start.column, r.end.line, r.end.column)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def qualname(self, node: cst.CSTNode) -> str | None:
        """The canonical qualified name of a name or attribute chain (see `canonical`)."""
        try:
            names = self._qualnames[node]
        except KeyError:
            return None
        if not isinstance(names, (set, frozenset)):
            names = names()  # type: ignore[operator]  # libcst resolves qualified names lazily
        if not names:
            return None
        best = sorted(n.name for n in names)
        for n in best:
            if n.startswith(("anodize", "math.", "builtins.")):
                return canonical(n)
        return canonical(best[0])

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
            self.span(fn.node.name, fn.top),
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
        for top, stmt in enumerate(self.module.body):
            if isinstance(stmt, cst.SimpleStatementLine):
                for s in stmt.body:
                    if isinstance(s, cst.Import) and any(
                        (dotted(a.name) or "").split(".")[0] == "anodize" for a in s.names
                    ):
                        self.imports_anodize = True
                    if isinstance(s, cst.ImportFrom) and s.module is not None:
                        if (dotted(s.module) or "").split(".")[0] == "anodize":
                            self.imports_anodize = True
            elif isinstance(stmt, cst.FunctionDef):
                info = self._function(stmt)
                info.top = top
                self.functions[info.name] = info
                self.by_node[stmt] = info
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                # kernels kept as static methods of a top-level class: `Holder.k`
                for inner in stmt.body.body:
                    if isinstance(inner, cst.FunctionDef):
                        info = self._function(inner)
                        info.top = top
                        if info.kind != "plain":
                            info.name = f"{stmt.name.value}.{info.name}"
                            self.functions[info.name] = info
                            self.by_node[inner] = info
        # `k = az.kernel(f)` / `h = az.func(f)` at module level mark `f` too
        for stmt in self.module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for s in stmt.body:
                    if isinstance(s, cst.Assign) and isinstance(s.value, cst.Call) and s.value.args:
                        q = self.qualname(s.value.func)
                        arg = s.value.args[0].value
                        if q in ("az.kernel", "az.func") and isinstance(arg, cst.Name) and arg.value in self.functions:
                            target = self.functions[arg.value]
                            if target.kind == "plain":
                                target.kind = "kernel" if q == "az.kernel" else "func"
                            for t in s.targets:
                                if isinstance(t.target, cst.Name) and t.target.value not in self.functions:
                                    self.functions[t.target.value] = target
        for fn in list(dict.fromkeys(self.functions.values())):
            if fn.is_device:
                analyze(self, fn)

    def _function(self, node: cst.FunctionDef) -> FunctionInfo:
        kind = "plain"
        kdeco = None
        contract = None
        for deco in node.decorators:
            d = deco.decorator
            target = d.func if isinstance(d, cst.Call) else d
            q = self.qualname(target)
            if q == "az.kernel" and not isinstance(d, cst.Call):
                kind, kdeco = "kernel", deco
            elif q == "az.func" and not isinstance(d, cst.Call):
                kind = "func" if kind != "kernel" else kind
            elif q == "az.launch_contract":
                contract = self._contract(deco)
        params: dict[str, ParamInfo] = {}
        ps = node.params
        for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params):
            params[p.name.value] = self._param(p)
        locals_: set[str] = set()
        globals_: set[str] = set()
        try:
            body_scope = self.scopes[node.body.body[0]] if node.body.body else None
        except (KeyError, AttributeError):
            body_scope = None
        if body_scope is not None:
            locals_ = {a.name for a in body_scope.assignments}
        for stmt in _walk_statements(node.body):
            if isinstance(stmt, (cst.Global, cst.Nonlocal)):
                globals_.update(n.name.value for n in stmt.names)
        return FunctionInfo(
            node.name.value,
            node,
            kind,
            params,
            contract,
            kdeco,
            frozenset(locals_ | set(params)),
            frozenset(globals_),
        )

    def _param(self, p: cst.Param) -> ParamInfo:
        name = p.name.value
        ann = p.annotation.annotation if p.annotation else None
        if ann is None:
            return ParamInfo(name, p, "bad")
        base, elem = (ann.value, ann.slice) if isinstance(ann, cst.Subscript) else (ann, None)
        q = self.qualname(base) or ""
        short = q[3:] if q.startswith("az.") else ""
        if short in SLICE_KINDS:
            scalar = None
            if elem is not None and len(elem) == 1 and isinstance(elem[0].slice, cst.Index):
                eq = self.qualname(elem[0].slice.value) or ""
                scalar = eq[3:] if eq.startswith("az.") and eq[3:] in SCALARS else None
            return ParamInfo(name, p, "slice", SLICE_KINDS[short], scalar)
        if elem is None and short in SCALARS:
            return ParamInfo(name, p, "scalar", scalar=short)
        if elem is None and short in WITNESS_TYPES:
            return ParamInfo(name, p, "witness", domain=WITNESS_TYPES[short])
        return ParamInfo(name, p, "bad")

    def _contract(self, deco: cst.Decorator) -> ContractInfo:
        call = deco.decorator if isinstance(deco.decorator, cst.Call) else None
        args: dict[str, cst.Arg] = {}
        if call is not None:
            for a in call.args:
                if a.keyword is not None:
                    args[a.keyword.value] = a
        domain = None
        if "domain" in args:
            v = literal_int(args["domain"].value)
            domain = v if v in (1, 2) else None
        block = literal_dims(args["block"].value) if "block" in args else None
        return ContractInfo(deco, call, args, domain, block)


def literal_int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        v = literal_int(node.expression)
        return None if v is None else -v
    return None


def literal_dims(node: cst.BaseExpression) -> tuple[int, ...] | None:
    """An int or a tuple of int literals, as a tuple; None when not literal."""
    v = literal_int(node)
    if v is not None:
        return (v,)
    if isinstance(node, cst.Tuple):
        out = []
        for e in node.elements:
            if not isinstance(e, cst.Element):
                return None
            x = literal_int(e.value)
            if x is None:
                return None
            out.append(x)
        return tuple(out)
    return None


def index_elements(node: cst.Subscript) -> list[cst.BaseExpression] | None:
    """The index expressions of `x[a]` / `x[a, b]` / `x[(a, b)]`; None when one is a slice `a:b`."""
    out: list[cst.BaseExpression] = []
    for el in node.slice:
        if not isinstance(el.slice, cst.Index):
            return None
        out.append(el.slice.value)
    if len(out) == 1 and isinstance(out[0], cst.Tuple) and out[0].lpar:
        inner = [e.value for e in out[0].elements if isinstance(e, cst.Element)]
        if len(inner) == len(out[0].elements):
            return inner
    return out


def _walk_statements(block: cst.BaseSuite) -> Iterator[cst.CSTNode]:
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        elif isinstance(stmt, cst.SimpleStatementSuite):
            yield from stmt.body
        else:
            yield stmt
            for attr in ("body", "orelse", "finalbody"):
                sub = getattr(stmt, attr, None)
                if isinstance(sub, cst.BaseSuite):
                    yield from _walk_statements(sub)
                elif isinstance(sub, (cst.If, cst.Else)):
                    yield from _walk_statements(sub.body)  # type: ignore[arg-type]
                    if isinstance(sub, cst.If) and sub.orelse is not None:
                        yield from _walk_statements(sub.orelse.body)  # type: ignore[arg-type]


# ---- the abstract interpreter --------------------------------------------------------------


class _Loop:
    def __init__(self) -> None:
        self.divergent: cst.CSTNode | None = None  # a thread-dependent break/continue/return
        self.break_envs: list[Env] = []
        self.continue_envs: list[Env] = []


class _Analyzer:
    def __init__(self, model: ModuleModel, fn: FunctionInfo):
        self.m = model
        self.fn = fn
        self.unsafe = False
        self.cond: list[cst.CSTNode] = []  # thread-dependent conditions in force
        self.loops: list[_Loop] = []
        self.div_return: cst.CSTNode | None = None
        self.guards: list[tuple[str, str]] = []

    # context ------------------------------------------------------------------------------
    def divergent(self) -> cst.CSTNode | None:
        if self.cond:
            return self.cond[-1]
        if self.div_return is not None:
            return self.div_return
        for lp in reversed(self.loops):
            if lp.divergent is not None:
                return lp.divergent
        return None

    def here(self) -> Ctx:
        return Ctx(self.fn, self.unsafe, self.divergent())

    # entry ----------------------------------------------------------------------------------
    def run(self) -> None:
        env: Env = {}
        for p in self.fn.params.values():
            if p.kind == "slice":
                env[p.name] = Val("slice", params=frozenset([p.name]), origin=p.node)
            elif p.kind == "witness":
                env[p.name] = Val("witness", domain=p.domain, tdep=True, origin=p.node)
            elif p.kind == "scalar":
                # a helper's scalar may come from a thread-dependent value at its call site
                env[p.name] = VARYING if self.fn.kind == "func" else UNIFORM
            else:
                env[p.name] = UNKNOWN
        self.block(self.fn.node.body, env)

    # statements -----------------------------------------------------------------------------
    def block(self, suite: cst.BaseSuite, env: Env | None) -> Env | None:
        stmts: Sequence[cst.CSTNode]
        if isinstance(suite, cst.IndentedBlock):
            stmts = suite.body
        else:
            stmts = [suite]
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

    def statement(self, stmt: cst.CSTNode, env: Env) -> Env | None:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            out: Env | None = env
            for small in stmt.body:
                if out is None:
                    break  # e.g. `continue; x = 1` on one line
                out = self.small(small, out)
            return out
        return self.compound(stmt, env)

    def assign_name(self, name: str, val: Val, env: Env) -> None:
        if self.divergent() is not None and val.kind == "scalar":
            val = val.tainted()
        env[name] = val

    def small(self, s: cst.CSTNode, env: Env) -> Env | None:
        m = self.m
        if isinstance(s, cst.Assign):
            val = self.ev(s.value, env)
            for t in s.targets:
                self.store(t.target, val, env)
            return env
        if isinstance(s, cst.AnnAssign):
            val = self.ev(s.value, env) if s.value is not None else UNKNOWN
            ann = s.annotation.annotation
            q = m.qualname(ann) or ""
            if q.startswith("az.") and q[3:] in WITNESS_TYPES:
                if not (val.kind == "witness" and val.domain == WITNESS_TYPES[q[3:]]):
                    val = VARYING  # annotating a non-witness as one does not make it one
            self.store(s.target, val, env)
            return env
        if isinstance(s, cst.AugAssign):
            rhs = self.ev(s.value, env)
            if isinstance(s.target, cst.Name):
                old = self.ev(s.target, env)
                m.stores.add(s.target)
                m.ctx[s.target] = self.here()
                p = self.fn.params.get(s.target.value)
                if p is None or p.kind != "slice":  # rebinding a slice parameter is an error
                    self.assign_name(s.target.value, Val("scalar", tdep=old.tdep or rhs.tdep), env)
            else:
                self.ev(s.target, env)
                m.stores.add(s.target)
                self._mark_write(getattr(s.target, "value", s.target), env)
            return env
        if isinstance(s, cst.Expr):
            self.ev(s.value, env)
            return env
        if isinstance(s, cst.Return):
            if s.value is not None:
                v = self.ev(s.value, env)
                self.fn.returns = join(self.fn.returns, v)
            else:
                self.fn.returns = join(self.fn.returns, NONE)
            d = self.divergent()
            if d is not None:
                if self.div_return is None:
                    self.div_return = s
                for lp in self.loops:
                    lp.divergent = lp.divergent or s
            return None
        if isinstance(s, (cst.Break, cst.Continue)):
            if self.loops:
                lp = self.loops[-1]
                if self.divergent() is not None and lp.divergent is None:
                    lp.divergent = s
                (lp.break_envs if isinstance(s, cst.Break) else lp.continue_envs).append(dict(env))
            return None
        if isinstance(s, cst.Del):
            for tgt in _targets(s.target):
                self.ev(tgt, env)
                m.stores.add(tgt)
                self._mark_write(getattr(tgt, "value", tgt), env)
                if isinstance(tgt, cst.Name):
                    env.pop(tgt.value, None)
            return env
        if isinstance(s, cst.Raise):
            return None
        if isinstance(s, cst.Assert):
            self.ev(s.test, env)
            return env
        return env  # pass, global, nonlocal, import: the rules report what needs reporting

    def store(self, target: cst.BaseExpression, val: Val, env: Env) -> None:
        m = self.m
        if isinstance(target, cst.Name):
            m.stores.add(target)
            m.values[target] = val
            m.ctx[target] = self.here()
            name = target.value
            p = self.fn.params.get(name)
            if p is not None and p.kind == "slice":
                return  # rebinding a slice parameter is an error; keep its declared kind
            self.assign_name(name, val, env)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self.store(e.value, UNKNOWN, env)
        elif isinstance(target, cst.StarredElement):
            self.store(target.value, UNKNOWN, env)
        else:  # subscript or attribute
            m.stores.add(target)
            self.ev(target, env)
            self._mark_write(getattr(target, "value", target), env)

    def compound(self, s: cst.CSTNode, env: Env) -> Env | None:
        if isinstance(s, cst.If):
            return self.if_(s, env)
        if isinstance(s, cst.While):
            return self.loop(s, env, lambda e: self.ev(s.test, e), None, s.body, s.orelse)
        if isinstance(s, cst.For):
            return self.for_(s, env)
        if isinstance(s, cst.With):
            unsafe = False
            for item in s.items:
                v = self.ev(item.item, env)
                callee = self.m.callees.get(item.item) if isinstance(item.item, cst.Call) else None
                if callee is not None and callee.kind == "unsafe":
                    unsafe = True
                if item.asname is not None:
                    self.store(item.asname.name, UNKNOWN, env)  # type: ignore[arg-type]
            prev = self.unsafe
            self.unsafe = prev or unsafe
            out = self.block(s.body, env)
            self.unsafe = prev
            return out
        if isinstance(s, cst.Try):
            out = self.block(s.body, dict(env))
            for h in s.handlers:
                out = join_env(out, self.block(h.body, dict(env)))
            return out
        # nested def/class/match: analysed no further; the rules reject them
        return env

    def if_(self, s: cst.If, env: Env) -> Env | None:
        tv = self.ev(s.test, env)
        tdep = tv.tdep
        guards = self._guards_of(s.test, env)
        if tdep:
            self.cond.append(s.test)
        self.guards.extend(guards)
        body = self.block(s.body, dict(env))
        del self.guards[len(self.guards) - len(guards) :]
        if s.orelse is None:
            other: Env | None = dict(env)
        elif isinstance(s.orelse, cst.If):
            other = self.if_(s.orelse, dict(env))
        else:
            other = self.block(s.orelse.body, dict(env))
        if tdep:
            self.cond.pop()
            # values bound on only one side of a thread-dependent branch differ between threads
            for e in (body, other):
                if e is not None:
                    for k, v in list(e.items()):
                        if v.kind == "scalar" and env.get(k) != v:
                            e[k] = v.tainted()
        return join_env(body, other)

    def _guards_of(self, test: cst.BaseExpression, env: Env) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        parts = [test]
        while parts:
            t = parts.pop()
            if isinstance(t, cst.BooleanOperation) and isinstance(t.operator, cst.And):
                parts += [t.left, t.right]
            elif (
                isinstance(t, cst.Comparison)
                and len(t.comparisons) == 1
                and isinstance(t.comparisons[0].operator, cst.In)
                and isinstance(t.left, cst.Name)
                and isinstance(t.comparisons[0].comparator, cst.Name)
            ):
                out.append((t.left.value, t.comparisons[0].comparator.value))
        return out

    def for_(self, s: cst.For, env: Env) -> Env | None:
        it = self.ev(s.iter, env)
        callee = self.m.callees.get(s.iter) if isinstance(s.iter, cst.Call) else None
        if callee is not None and callee.kind == "grid_stride":
            var = Val("witness", domain=1, tdep=True, origin=s.iter)
            loop_tdep: cst.CSTNode | None = s.iter  # each thread runs its own number of iterations
        elif callee is not None and callee.kind == "range":
            var = Val("scalar", tdep=it.tdep)
            loop_tdep = s.iter if it.tdep else None
        else:
            var = UNKNOWN
            loop_tdep = s.iter

        def head(e: Env) -> Val:
            self.store(s.target, var, e)
            return Val("scalar", tdep=loop_tdep is not None)

        return self.loop(s, env, head, loop_tdep, s.body, s.orelse)

    def loop(self, s, env: Env, head, head_div, body, orelse) -> Env | None:  # type: ignore[no-untyped-def]
        entry = dict(env)
        state: Env = dict(env)
        lp = _Loop()
        self.loops.append(lp)
        exit_env: Env | None = None
        for _ in range(MAX_FIXPOINT):
            before = (dict(state), lp.divergent, self.div_return)
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            hv = head(iter_env)
            div = head_div if head_div is not None else (s.test if isinstance(s, cst.While) and hv.tdep else None)
            if div is not None and lp.divergent is None:
                lp.divergent = div
            if div is not None:
                self.cond.append(div)
            out = self.block(body, dict(iter_env))
            if div is not None:
                self.cond.pop()
            back = out
            for ce in lp.continue_envs:
                back = join_env(back, ce)
            if lp.divergent is not None and back is not None:
                for k, v in list(back.items()):
                    if v.kind == "scalar" and state.get(k) != v:
                        back[k] = v.tainted()
            new_state = join_env(state, back) or state
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
            if (new_state, lp.divergent, self.div_return) == before:
                break
            state = new_state
        else:
            # no fixed point in MAX_FIXPOINT passes: widen (every changed value to a
            # thread-dependent int, the loop divergent) and record one last pass
            for k, v in list(state.items()):
                if entry.get(k) != v:
                    state[k] = VARYING if v.kind in ("witness", "scalar") else UNKNOWN
            lp.divergent = lp.divergent or s
            lp.break_envs, lp.continue_envs = [], []
            iter_env = dict(state)
            head(iter_env)
            self.cond.append(s)
            self.block(body, dict(iter_env))
            self.cond.pop()
            exit_env = dict(iter_env)
            for be in lp.break_envs:
                exit_env = join_env(exit_env, be)
        self.loops.pop()
        if orelse is not None:
            exit_env = self.block(orelse.body, exit_env) if exit_env is not None else None
        # after the loop every thread is back together: only the values carry the divergence
        return exit_env

    # expressions ----------------------------------------------------------------------------
    def ev(self, node: cst.BaseExpression, env: Env) -> Val:
        v = self._ev(node, env)
        self.m.values[node] = v
        return v

    def _ev(self, node: cst.BaseExpression, env: Env) -> Val:
        m = self.m
        if isinstance(node, cst.Name):
            if node.value in env:
                return env[node.value]
            if node.value in ("True", "False"):
                return UNIFORM
            if node.value == "None":
                return NONE
            if node.value in self.fn.locals:
                return UNKNOWN  # a local read before any binding on this path
            return Val("global", origin=node)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
            return UNIFORM
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return UNIFORM
        if isinstance(node, cst.BinaryOperation):
            a = self.ev(node.left, env)
            b = self.ev(node.right, env)
            return Val("scalar", tdep=a.tdep or b.tdep)
        if isinstance(node, cst.UnaryOperation):
            a = self.ev(node.expression, env)
            return Val("scalar", tdep=a.tdep)
        if isinstance(node, cst.BooleanOperation):
            a = self.ev(node.left, env)
            if a.tdep:
                self.cond.append(node.left)
            b = self.ev(node.right, env)
            if a.tdep:
                self.cond.pop()
            return Val("scalar", tdep=a.tdep or b.tdep)
        if isinstance(node, cst.Comparison):
            t = self.ev(node.left, env).tdep
            for c in node.comparisons:
                t = self.ev(c.comparator, env).tdep or t
            m.ctx[node] = self.here()
            return Val("scalar", tdep=t)
        if isinstance(node, cst.IfExp):
            cv = self.ev(node.test, env)
            if cv.tdep:
                self.cond.append(node.test)
            a = self.ev(node.body, env)
            b = self.ev(node.orelse, env)
            if cv.tdep:
                self.cond.pop()
            j = join(a, b) or UNKNOWN
            return j.tainted() if cv.tdep and j.kind == "scalar" else j
        if isinstance(node, cst.Subscript):
            return self.subscript(node, env)
        if isinstance(node, cst.Attribute):
            return self.attribute(node, env)
        if isinstance(node, cst.Call):
            return self.call(node, env)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            t = False
            for e in node.elements:
                t = self.ev(e.value, env).tdep or t
            return Val("unknown", tdep=True)
        if isinstance(node, cst.NamedExpr):
            v = self.ev(node.value, env)
            self.store(node.target, v, env)
            return v
        # anything else (lambda, comprehension, dict, await, ...): evaluate the parts we can see
        for child in node.children:
            if isinstance(child, cst.BaseExpression):
                self.ev(child, env)
        return UNKNOWN

    def subscript(self, node: cst.Subscript, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        m.guards[node] = frozenset(self.guards)
        base = self.ev(node.value, env)
        idx = index_elements(node)
        tdep = False
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                tdep = self.ev(el.slice.value, env).tdep or tdep
                if isinstance(el.slice.value, cst.Tuple):
                    for e in el.slice.value.elements:
                        tdep = self.ev(e.value, env).tdep or tdep
            elif isinstance(el.slice, cst.Slice):
                for part in (el.slice.lower, el.slice.upper, el.slice.step):
                    if part is not None:
                        self.ev(part, env)
        if idx is None:
            return UNKNOWN
        if base.kind == "slice":
            output = any(
                (p := self.fn.params.get(name)) is not None and p.slice_kind is not None and p.slice_kind.output
                for name in base.params
            )
            return Val("scalar", tdep=tdep or output)
        if base.kind in ("scalar", "global"):
            return Val("scalar", tdep=base.tdep or tdep)
        return VARYING  # shared memory and anything unknown: assume it differs between threads

    def attribute(self, node: cst.Attribute, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        if self._module_path(node.value):
            return Val("global", origin=node)
        base = self.ev(node.value, env)
        attr = node.attr.value
        if base.kind == "witness":
            return VARYING
        if base.kind == "slice":
            return UNIFORM if attr == "shape" else UNKNOWN
        if base.kind == "global":
            return Val("global", origin=node)
        return Val(base.kind if base.kind == "scalar" else "unknown", tdep=True)

    def call(self, node: cst.Call, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        callee = self.resolve(node, env)
        m.callees[node] = callee
        args = [self.ev(a.value, env) for a in node.args]
        anytdep = any(a.tdep for a in args)
        k = callee.kind
        if k == "witness":
            d = 1 if callee.name.endswith("index_1d") else 2
            self.fn.witness_uses.append((node, d))
            return Val("witness", domain=d, tdep=True, origin=node)
        if k == "grid_stride":
            self.fn.witness_uses.append((node, 1))
            return UNKNOWN
        if k == "rawid":
            self.fn.thread_dependent = True
            return VARYING if callee.name.split(".")[-1] in THREAD_VARYING_IDS else UNIFORM
        if k == "warp":
            self.fn.thread_dependent = True
            return VARYING
        if k == "shared":
            return Val("shared", tdep=True, origin=node)
        if k == "barrier":
            m.barriers[node] = self.here()
            self.fn.has_barrier = True
            return NONE
        if k == "unsafe":
            return NONE
        if k in ("cast", "math", "builtin", "range"):
            if callee.name == "len":
                return UNIFORM
            return Val("scalar", tdep=anytdep)
        if k == "atomic_op":
            self.fn.thread_dependent = True
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
            if h.thread_dependent:
                self.fn.thread_dependent = True
            # slices passed to parameters the helper writes are written here
            for pname, arg in bind_args(h, node):
                if pname in h.writes:
                    self._mark_write(arg, env)
            ret = h.returns or NONE
            if ret.kind == "witness":
                return Val("witness", domain=ret.domain, tdep=True, origin=node)
            if ret.kind == "scalar":
                return Val("scalar", tdep=anytdep or h.thread_dependent or ret.tdep)
            return ret if ret.kind == "none" else UNKNOWN
        if k == "method":
            return UNKNOWN
        return UNKNOWN

    def _module_path(self, node: cst.BaseExpression) -> bool:
        """Is `node` a name chain naming anodize, one of its modules or classes, or `math`?"""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return False
        if isinstance(node, cst.Name) and node.value in self.fn.locals:
            return False
        q = self.m.qualname(node) or ""
        return q in ("anodize", "math") or q.startswith(("az.", "math."))

    def _mark_write(self, target: cst.BaseExpression, env: Env) -> None:
        v = self.m.values.get(target) or self.ev(target, env)
        if v.kind == "slice":
            self.fn.writes.update(v.params & set(self.fn.params))

    def resolve(self, node: cst.Call, env: Env) -> Callee:
        m = self.m
        f = node.func
        if isinstance(f, cst.Attribute) and not self._module_path(f.value):
            base = self.ev(f.value, env)
            attr = f.attr.value
            if base.kind == "witness":
                if attr == "get":
                    return Callee("witness_get", attr)
                return Callee("forge" if attr.startswith("_") else "unknown", attr)
            if base.kind == "slice":
                if attr in ATOMIC_METHODS:
                    return Callee("atomic_op", attr)
                if attr == "write_unchecked":
                    return Callee("write_unchecked", attr)
                return Callee("method", attr)
        q = m.qualname(f)
        if q is None:
            if isinstance(f, cst.Name) and f.value in self.m.functions:
                q = f.value
            else:
                return Callee("unknown", m.code(f))
        short = q.split(".")[-1]
        if q in ("thread.index_1d", "thread.index_2d"):
            return Callee("witness", q)
        if q == "thread.grid_stride":
            return Callee("grid_stride", q)
        if q.startswith("thread.") and short in RAW_IDS:
            return Callee("rawid", q)
        if q.startswith("warp.") and short in WARP_OPS:
            return Callee("warp", q)
        if q == "shared.array":
            return Callee("shared", q)
        if q == "az.syncthreads":
            return Callee("barrier", q)
        if q == "az.unsafe":
            return Callee("unsafe", q)
        if q.startswith(("az.Index1D", "az.Index2D")):
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
        target = m.functions.get(q)
        if target is not None:
            if target.kind == "func":
                return Callee("helper", q, target)
            return Callee("kernel" if target.kind == "kernel" else "function", q, target)
        return Callee("unknown", m.code(f))


def _targets(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [e.value for e in node.elements]
    return [node]


def bind_args(fn: FunctionInfo, call: cst.Call) -> list[tuple[str, cst.BaseExpression]]:
    """(parameter name, argument expression) for each argument of a call to `fn`."""
    names = list(fn.params)
    out: list[tuple[str, cst.BaseExpression]] = []
    pos = 0
    for a in call.args:
        if a.keyword is not None:
            out.append((a.keyword.value, a.value))
        elif a.star:
            continue
        else:
            if pos < len(names):
                out.append((names[pos], a.value))
            pos += 1
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
