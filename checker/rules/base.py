"""The rule base class: a visitor of the engine's one batched `ast` walk that reads the shared kernel model."""

from __future__ import annotations

from collections.abc import Callable
from anodize.language.records import dataclass
from typing import TYPE_CHECKING, ClassVar

import ast

from anodize.language.diagnostics import Diagnostic, Span
from ..kernel_interp import bind_args
from ..kernel_model import ModuleModel
from ..kernel_values import Callee, FunctionInfo, KernelSummary, ParamInfo, Val

if TYPE_CHECKING:
    from ..engine import Project

# Every rule example is checked with this header in front of it (the test generator adds it).
EXAMPLE_HEADER = (
    "import anodize as az\n"
    "from anodize import (kernel, func, launch_contract, thread, Slice, DisjointSlice, Slice2D,\n"
    "                     DisjointSlice2D, AtomicSlice, Index1D, Index2D, f32, i32, i64)\n"
)


def divergence_reason(node: ast.AST, lanes: bool) -> str:
    """Why control flow diverges at `node`: a key of the catalogue's PHRASES, worded for the
    lanes of a warp (`lanes`) or the threads of a block."""
    if isinstance(node, ast.Return):
        return "lane-divergent-return" if lanes else "divergent-return"
    if isinstance(node, (ast.Break, ast.Continue)):
        return "lane-divergent-leave-iteration" if lanes else "divergent-leave-iteration"
    if isinstance(node, ast.Call):
        return "lane-divergent-trip-count" if lanes else "divergent-trip-count"
    return "lane-divergent-condition" if lanes else "divergent-condition"


@dataclass(frozen=True)
class PassedSlice:
    """A slice parameter of the caller passed to a helper: the argument, the caller's parameter
    it may be and that one's kind, the helper, its parameter and that one's annotation (source)."""

    arg: ast.expr
    name: str
    kind: str
    helper: FunctionInfo
    pname: str
    param: ParamInfo
    annotation: str


@dataclass
class RuleContext:
    model: ModuleModel
    project: Project | None
    report: Callable[[Diagnostic], None]
    # the typed front end's diagnostics: the engine drops one where a rule already
    # reported an error at the same position (one error per place)
    report_typed: Callable[[Diagnostic], None] | None = None

    def __post_init__(self) -> None:
        if self.report_typed is None:
            self.report_typed = self.report


class Rule:
    """Base of every rule: `CODE`, a one-line docstring, `VALID` and `INVALID` examples.

    A rule defines `visit_<AstClass>` / `leave_<AstClass>` methods (and may alias them:
    `visit_List = visit_Set = _container`); the engine runs every rule's methods in one
    batched walk (anodize/language/walk.py).  INVALID examples mark each expected diagnostic
    inline with `# E: az-code`."""

    CODE: ClassVar[str]
    ORDER: ClassVar[int]  # where the engine runs it among the rules (rules/__init__.py ALL_RULES)
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []

    def __init__(self, ctx: RuleContext):
        self.rc = ctx
        self.model = ctx.model

    def report(self, diag: Diagnostic) -> None:
        self.rc.report(diag)

    def span(self, node: ast.AST) -> Span:
        return self.model.span(node)

    def val(self, node: ast.AST) -> Val | None:
        return self.model.values.get(node)

    def fn_of(self, node: ast.AST) -> FunctionInfo | None:
        c = self.model.ctx.get(node)
        return c.fn if c else None

    def slices_passed(self, node: ast.Call) -> list[PassedSlice]:
        """Each slice parameter a call to a helper passes (by argument, then by the parameter
        it may be); none for any other call."""
        callee = self.model.callees.get(node)
        if callee is None or callee.kind != "helper" or callee.fn is None:
            return []
        hit = self.model.passed.get(node)  # (three rules ask for each helper call)
        if hit is None:
            hit = self.model.passed[node] = self._slices_passed(node, callee)
        return hit

    def _slices_passed(self, node: ast.Call, callee: Callee) -> list[PassedSlice]:
        fn = self.fn_of(node)
        h = callee.fn
        if fn is None or h is None:
            return []
        out = []
        for pname, arg in bind_args(h, node):
            hp = h.params.get(pname)
            if hp is None:
                continue
            for name, kind in slice_kinds(fn, self.val(arg)):
                pk = self.model.code(hp.node.annotation) if hp.node.annotation else "?"
                out.append(PassedSlice(arg, name, kind, h, pname, hp, pk))
        return out

    def decl(self, fn: FunctionInfo, param: str) -> Span | None:
        p = fn.params.get(param)
        if p is None:
            return None
        return self.model.span(p.node.annotation) if p.node.annotation else self.model.src.arg_name_span(p.node)


class DeviceBodyRule(Rule):
    """A rule that looks at the bodies of kernels and helpers only (`self.fn` is set there)."""

    def __init__(self, ctx: RuleContext):
        super().__init__(ctx)
        self.fn: FunctionInfo | None = None
        self.depth = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.fn is None:
            info = self.model.by_node.get(node)
            if info is not None and info.is_device:
                self.fn = info
        self.depth += 1

    def leave_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.depth -= 1
        if self.fn is not None and self.fn.node is node:
            self.fn = None
            self.active = False

    # True while the walk is inside the device function's body (not its decorators or signature)
    active = False

    def visit_FunctionBody(self, node: ast.FunctionDef) -> None:
        if self.fn is not None and node is self.fn.node:
            self.active = True

    def leave_FunctionBody(self, node: ast.FunctionDef) -> None:
        if self.fn is not None and node is self.fn.node:
            self.active = False


def slice_kinds(fn: FunctionInfo, v: Val | None) -> list[tuple[str, str]]:
    """(parameter, kind name) for each parameter a slice value may be."""
    if v is None or v.kind != "slice":
        return []
    out = []
    for name in sorted(v.params):
        p = fn.params.get(name)
        if p is not None and p.slice_kind is not None:
            out.append((name, p.slice_kind.name))
    return out


class HostRule(Rule):
    """A rule about launch sites in host code: resolves kernels and tracks local bindings."""

    def __init__(self, ctx: RuleContext):
        super().__init__(ctx)
        self.bindings: list[dict[str, tuple[ast.expr, ast.AST]]] = [{}]
        self.in_device = 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        info = self.model.by_node.get(node)
        if info is not None and info.is_device:
            self.in_device += 1
        self.bindings.append({})

    def leave_FunctionDef(self, node: ast.FunctionDef) -> None:
        info = self.model.by_node.get(node)
        if info is not None and info.is_device:
            self.in_device -= 1
        self.bindings.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if self.in_device:
            return
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.bindings[-1][t.id] = (node.value, t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not self.in_device and node.value is not None and isinstance(node.target, ast.Name):
            self.bindings[-1][node.target.id] = (node.value, node.target)

    def binding(self, name: str) -> tuple[ast.expr, ast.AST] | None:
        for scope in reversed(self.bindings):
            if name in scope:
                return scope[name]
        return None

    def kernel_at(self, node: ast.expr) -> KernelSummary | None:
        """The kernel a host expression names (this module or an imported one), if any."""
        if self.in_device:
            return None
        m = self.model
        if isinstance(node, ast.Name) and node.id in m.functions:
            fn = m.functions[node.id]
            return m.summary(fn) if fn.kind == "kernel" else None
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        q = m.qualname(node)
        if q is None or q.startswith(("az.", "builtins.", "thread.", "math.")):
            return None
        if q in m.functions:
            fn = m.functions[q]
            return m.summary(fn) if fn.kind == "kernel" else None
        if self.rc.project is None or "." not in q:
            return None
        return self.rc.project.lookup(m.path, q)
