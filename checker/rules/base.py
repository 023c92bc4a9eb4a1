"""The rule base class: a batchable libcst visitor that reads the shared kernel model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst
from libcst import BatchableCSTVisitor
from libcst.metadata import ScopeProvider

from ..diagnostics import Diagnostic, Span
from ..kernel_model import FunctionInfo, KernelSummary, ModuleModel, Val
from ..walk import QualifiedNames

if TYPE_CHECKING:
    from ..engine import Project

# Every rule example is checked with this header in front of it (the test generator adds it).
EXAMPLE_HEADER = (
    "import anodize as az\n"
    "from anodize import (kernel, func, launch_contract, thread, Slice, DisjointSlice, Slice2D,\n"
    "                     DisjointSlice2D, AtomicSlice, Index1D, Index2D, f32, i32, i64)\n"
)


@dataclass
class RuleContext:
    model: ModuleModel
    project: Project | None
    report: Callable[[Diagnostic], None]


_VISITOR_NAMES: dict[type, tuple[str, ...]] = {}


class Rule(BatchableCSTVisitor):
    """Base of every rule: `CODE`, a one-line docstring, `VALID` and `INVALID` examples.

    INVALID examples mark each expected diagnostic inline with `# E: az-code`."""

    CODE: ClassVar[str]
    VALID: ClassVar[list[str]] = []
    INVALID: ClassVar[list[str]] = []
    # Names resolve through the model (libcst's QualifiedNameProvider, as `QualifiedNames`,
    # and ScopeProvider, both already resolved by then); positions only for reported nodes.
    METADATA_DEPENDENCIES = (QualifiedNames, ScopeProvider)

    def __init__(self, ctx: RuleContext):
        super().__init__()
        self.rc = ctx
        self.model = ctx.model

    def get_visitors(self) -> dict[str, Callable[[cst.CSTNode], None]]:
        # keyed by attribute name, so `visit_List = visit_Set = _container` aliases work too
        cls = type(self)
        names = _VISITOR_NAMES.get(cls)
        if names is None:  # once per rule class: `dir()` over libcst's ~600 stubs is slow
            names = _VISITOR_NAMES[cls] = tuple(
                name
                for name in dir(cls)
                if name.startswith(("visit_", "leave_"))
                and callable(m := getattr(cls, name))
                and not getattr(m, "_is_no_op", False)  # skip libcst's empty stubs
            )
        return {name: getattr(self, name) for name in names}

    def report(self, diag: Diagnostic) -> None:
        self.rc.report(diag)

    def span(self, node: cst.CSTNode) -> Span:
        return self.model.span(node)

    def val(self, node: cst.CSTNode) -> Val | None:
        return self.model.values.get(node)

    def fn_of(self, node: cst.CSTNode) -> FunctionInfo | None:
        c = self.model.ctx.get(node)
        return c.fn if c else None

    def decl(self, fn: FunctionInfo, param: str) -> Span | None:
        p = fn.params.get(param)
        if p is None:
            return None
        return self.model.span(p.node.annotation.annotation if p.node.annotation else p.node, fn.top)


class DeviceBodyRule(Rule):
    """A rule that looks at the bodies of kernels and helpers only (`self.fn` is set there)."""

    def __init__(self, ctx: RuleContext):
        super().__init__(ctx)
        self.fn: FunctionInfo | None = None
        self._body: cst.BaseSuite | None = None
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.fn is None:
            info = self.model.by_node.get(node)
            if info is not None and info.is_device:
                self.fn, self._body = info, node.body
        self.depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= 1
        if self.fn is not None and self.fn.node is original_node:
            self.fn, self._body = None, None
            self.active = False

    active = False

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if node is self._body:
            self.active = True

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        if original_node is self._body:
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
        self.bindings: list[dict[str, tuple[cst.BaseExpression, cst.CSTNode]]] = [{}]
        self.in_device = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        info = self.model.by_node.get(node)
        if info is not None and info.is_device:
            self.in_device += 1
        self.bindings.append({})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        info = self.model.by_node.get(original_node)
        if info is not None and info.is_device:
            self.in_device -= 1
        self.bindings.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.in_device:
            return
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.bindings[-1][t.target.value] = (node.value, t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if not self.in_device and node.value is not None and isinstance(node.target, cst.Name):
            self.bindings[-1][node.target.value] = (node.value, node.target)

    def binding(self, name: str) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
        for scope in reversed(self.bindings):
            if name in scope:
                return scope[name]
        return None

    def kernel_at(self, node: cst.BaseExpression) -> KernelSummary | None:
        """The kernel a host expression names (this module or an imported one), if any."""
        if self.in_device:
            return None
        m = self.model
        if isinstance(node, cst.Name) and node.value in m.functions:
            fn = m.functions[node.value]
            return m.summary(fn) if fn.kind == "kernel" else None
        if not isinstance(node, (cst.Name, cst.Attribute)):
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
