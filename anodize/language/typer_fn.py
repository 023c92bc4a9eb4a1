"""The typer of one function body: `FnTyper` holds the body's state (`FnState`, typer_state.py)
and the collaborators that type its constructs, and dispatches each node to the one that owns
it (one `visit_<Node>` method per supported construct, Triton's code_generator style).

    st            FnState           the declared state every collaborator reads and writes
    names         NameResolver      names, annotations, compile-time values   (typer_names.py)
    ranges        RangeFacts        integer range facts, bounds proofs        (ranges.py)
    stmts         StmtTyper         statements                                (typer_stmts.py)
    exprs         ExprTyper         expressions, subscripts, arithmetic       (typer_exprs.py)
    calls         CallTyper         calls: intrinsics, helpers                (typer_calls.py)
    effects       EffectsTyper      atomics, print, assert, breakpoint        (typer_effects.py)
    local_values  LocalValueTyper   local arrays, tuples, unpacking           (typer_locals.py)
    collectives   CollectiveTyper   warp/block collectives, block witnesses   (collectives.py)
    shared_mem    SharedTyper       safe shared memory                        (shared_safe.py)
    thread_tiles  ThreadTileTyper   per-thread tiles                          (typer_thread_tiles.py)
    records       RecordTyper       `@az.record` values                       (typer_records.py)
    tiles         TileTyper         the tile vocabulary, tile kernels only    (typer_tiles.py)

A collaborator reaches another through the typer (`self.fn.exprs.coerce(...)`) and the state
through `self.st`.  A tile kernel's typer (typer_tiles.py's `TileFnTyper`) is a specialisation:
its statement, expression and call typers are subclasses, and it adds the tile vocabulary.

Anything without a visitor reaches `generic_visit`, which reports a located `az-unsupported`
diagnostic naming the construct; an internal error is reported as `az-internal` at the
construct being typed.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, NoReturn

from anodize.language import ir, messages
from anodize.language.collectives import CollectiveTyper
from anodize.language.diagnostics import CheckError
from anodize.language.fn_types import FnTypes
from anodize.language.ranges import RangeFacts
from anodize.language.record_types import RecordTy
from anodize.language.returns import may_fall_through
from anodize.language.shared_safe import SharedTyper
from anodize.language.typer_base import _Fail, _Silent
from anodize.language.typer_calls import CallTyper
from anodize.language.typer_effects import EffectsTyper
from anodize.language.typer_exprs import ExprTyper
from anodize.language.typer_locals import LocalValueTyper
from anodize.language.typer_names import NameResolver
from anodize.language.typer_records import RecordTyper
from anodize.language.typer_state import FnState, KernelCtx
from anodize.language.typer_stmts import StmtTyper
from anodize.language.typer_thread_tiles import ThreadTileTyper
from anodize.language.types import VOID, LocalArrayTy, ScalarTy, SliceTy, TupleTy, Ty, WitnessTy
from anodize.language.walk import nodes

__all__ = ["FnTyper", "compile_helper", "record_params", "signature_names"]


class FnTyper:
    """Types one function body (the kernel, or one specialisation of a helper)."""

    # the collaborators' classes (a tile kernel's typer names its subclasses)
    stmt_typer: type[StmtTyper] = StmtTyper
    expr_typer: type[ExprTyper] = ExprTyper
    call_typer: type[CallTyper] = CallTyper

    def __init__(self, kctx: KernelCtx, fdef: ast.FunctionDef, params: dict[str, Ty], *, is_kernel: bool, ret: Ty | None = None):
        st = self.st = FnState(kctx, fdef, kctx.front.src, kctx.front.symbols, is_kernel, ret)
        st.vars = {n: t for n, t in params.items() if isinstance(t, (ScalarTy, WitnessTy))}
        st.slices = {n: t for n, t in params.items() if isinstance(t, SliceTy)}
        st.arrays = {n: t for n, t in params.items() if isinstance(t, LocalArrayTy)}
        for n, t in params.items():  # a helper's record parameter: the record, and its leaves (typer_records.py)
            if isinstance(t, RecordTy):
                st.vars[n] = t  # type: ignore[assignment]
                st.vars.update((f"{n}." + ".".join(p), lt) for p, lt, _ in t.leaves())
        self.names = NameResolver(st)
        self.ranges = RangeFacts(st)
        self.stmts = self.stmt_typer(self)
        self.exprs = self.expr_typer(self)
        self.calls = self.call_typer(self)
        self.effects = EffectsTyper(self)
        self.local_values = LocalValueTyper(self)
        self.collectives = CollectiveTyper(self)
        self.shared_mem = SharedTyper(self)
        self.thread_tiles = ThreadTileTyper(self)
        self.records = RecordTyper(self)
        self.expr: Callable[[ast.expr], ir.Expr] = self.exprs.expr  # an expression's typing (the entry of every collaborator)
        self._bound: dict[type, tuple[Callable[[Any], Any], bool]] = {}  # `visit`'s dispatch

    # ---- dispatch ---------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> Any:
        # the bound `visit_<Node>` of this typer's collaborator, found once per node class
        # (a body visits thousands of nodes of a dozen classes)
        hit = self._bound.get(node.__class__)
        if hit is None:
            hit = self._bind(node.__class__)
        method, is_expr = hit
        try:
            res = method(node)
            if is_expr:
                self.st.typed[node] = res  # type: ignore[index]
            return res
        except (_Fail, _Silent, CheckError):
            raise
        except Exception as exc:  # an internal error: locate it, hide the compiler's frames
            self.st.fail(messages.internal_error(self.st.span(node), exc))

    def _bind(self, cls: type) -> tuple[Callable[[Any], Any], bool]:
        owner = _VISITORS.get(cls)
        method = self.generic_visit if owner is None else getattr(getattr(self, owner[0]), owner[1])
        hit = self._bound[cls] = (method, issubclass(cls, ast.expr))
        return hit

    def generic_visit(self, node: ast.AST) -> NoReturn:
        self.st.fail(messages.unsupported_construct(self.st.span(node), type(node).__name__))

    def body(self, stmts: list[ast.stmt]) -> tuple[ir.Stmt, ...]:
        """A block of statements: each one's diagnostic is collected and typing goes on."""
        st = self.st
        out: list[ir.Stmt] = []
        for s in stmts:
            try:
                res = self.visit(s)
            except _Fail as f:
                st.k.diags.append(f.diag)
                for t in nodes(s):
                    if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                        st.failed_names.add(t.id)
                continue
            except _Silent:
                continue
            out.extend(res)
            if isinstance(s, ast.If) and not s.orelse and _terminates(s.body):
                st.facts |= self.stmts.witness_guard_facts(s.test, negated=True)
                st.rfacts |= st.if_false_facts  # nothing was assigned on the fall-through path
        return tuple(out)

    def release(self) -> None:
        """Drop the collaborators once the body is typed: each holds the typer (a reference
        cycle), so the typer's memory goes with its last reference, not at the next collection."""
        for name in _COLLABORATORS:  # (`delattr`, not `__dict__.pop`: no dict made of the attributes)
            try:
                delattr(self, name)
            except AttributeError:
                pass

    # ---- helpers ----------------------------------------------------------------------------
    def signature_names(self, fdef: ast.FunctionDef) -> NameResolver:
        """The names of a helper's signature, for its annotations."""
        return signature_names(self.st.k, fdef)

    def compile_helper(self, fdef: ast.FunctionDef, ptypes: dict[str, Ty], ret: Ty | None, facts: set[tuple[str, str]]) -> ir.FuncIR:
        return compile_helper(self.st.k, fdef, ptypes, ret, facts)


_COLLABORATORS = ("stmts", "exprs", "calls", "effects", "local_values", "collectives", "shared_mem", "thread_tiles",
                  "records", "tiles", "expr", "_bound")


def signature_names(k: KernelCtx, fdef: ast.FunctionDef, *, is_kernel: bool = False) -> NameResolver:
    """Names and annotations of a function's signature (a state of its own, no body typed)."""
    return NameResolver(FnState(k, fdef, k.front.src, k.front.symbols, is_kernel))


def _terminates(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Break, ast.Continue))


def _visitors() -> dict[type, tuple[str, str]]:
    """Node class -> (the collaborator, an `FnTyper` attribute, and its `visit_<Node>` method)."""
    out: dict[type, tuple[str, str]] = {}
    for owner, cls in (("stmts", StmtTyper), ("exprs", ExprTyper), ("calls", CallTyper), ("effects", EffectsTyper)):
        for name in dir(cls):
            if name.startswith("visit_"):
                node = getattr(ast, name[len("visit_"):])
                assert node not in out, name
                out[node] = (owner, name)
    return out


_VISITORS = _visitors()


def record_params(ptypes: dict[str, Ty]) -> list[tuple[str, Ty]]:
    """A helper's parameters as its body receives them: a record parameter as its leaves."""
    out: list[tuple[str, Ty]] = []
    for n, t in ptypes.items():
        if isinstance(t, RecordTy):
            out.extend((f"{n}." + ".".join(p), lt) for p, lt, _ in t.leaves())
        else:
            out.append((n, t))
    return out


def compile_helper(
    k: KernelCtx, fdef: ast.FunctionDef, ptypes: dict[str, Ty], ret: Ty | None, facts: set[tuple[str, str]]
) -> ir.FuncIR:
    """One specialisation of a helper (its parameter types and the proofs its arguments carry)."""
    k.stack.append(fdef)
    c = FnTyper(k, fdef, ptypes, is_kernel=False, ret=ret)
    try:
        c.st.facts = set(facts)
        body = c.body(fdef.body)
        if isinstance(c.st.ret, WitnessTy) and fdef.body and may_fall_through(fdef.body):
            # falling off the end gives a zeroed value: for a witness, index 0 on every thread
            last = fdef.body[-1]
            k.diags.append(messages.type_error(k.front.src.span(last), "helper-witness-falls-off",
                                               help="helper-witness-falls-off-help", name=fdef.name, ret=c.st.ret))
        k.views.append(FnTypes(fdef, c.st.typed, c.st.vars, tuple(k.spec.items())))
        rec = c.st.ret if isinstance(c.st.ret, RecordTy) else None
        ret = TupleTy(tuple(t for _, t, _ in rec.leaves())) if rec is not None else c.st.ret  # a record: its leaves
        fir = ir.FuncIR(
            fdef.name,
            tuple(record_params(ptypes)),
            tuple(c.st.locals.items()),
            body,
            ret if ret is not None else VOID,
            k.front.src.span(fdef),
        )
        if rec is not None:
            k.record_returns[id(fir)] = rec
        return fir
    finally:
        c.release()
        k.stack.pop()
