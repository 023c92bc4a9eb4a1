"""Forbids forging or smuggling index witnesses."""

from __future__ import annotations

import ast

from anodize.language import messages
from ..kernel_interp import bind_args
from anodize.language.vocab import WITNESS_TYPES
from .base import Rule


class IndexForge(Rule):
    """Forbids forging or smuggling index witnesses."""

    CODE = "az-index-forge"
    ORDER = 50
    VALID = [
        """
@func
def own(c: DisjointSlice[f32], i: Index1D) -> None:
    j: Index1D = i
    c[j] = 1.0

@func
def me() -> Index1D:
    return thread.index_1d()

@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = me()
    own(c, i)
""",
    ]
    INVALID = [
        """
@func
def own(c: DisjointSlice[f32], i: Index1D) -> None:
    c[i] = 1.0

@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    f = Index1D()  # E: az-index-forge
    j: Index1D = 0  # E: az-index-forge
    own(c, 3)  # E: az-index-forge
    t = (i, i)  # E: az-index-forge, az-unsupported
    v = i._Index1D__value  # E: az-index-forge
""",
    ]

    def __init__(self, ctx):  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        self.index_tuples: set[ast.AST] = set()

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        if callee is None:
            return
        fn = self.fn_of(node)
        if fn is None:
            return
        if callee.kind == "witness_type":
            self.report(messages.index_forge(self.span(node), "construct-witness", func=self.model.src.quote(node.func)))
        elif callee.kind == "helper" and callee.fn is not None:
            for pname, arg in bind_args(callee.fn, node):
                hp = callee.fn.params.get(pname)
                if hp is None or hp.kind != "witness":
                    continue
                v = self.val(arg)
                if v is None or v.kind != "witness" or v.domain != hp.domain:
                    self.report(
                        messages.index_forge(
                            self.model.src.expr_span(arg),
                            "passed-witness-index-d", arg=self.model.src.quote(arg), pname=pname, domain=hp.domain, name=callee.fn.name,
                        )
                    )

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        fn = self.fn_of(node.target)
        if fn is None:
            return
        q = self.model.qualname(node.annotation) or ""
        if q.startswith("az.") and q[3:] in WITNESS_TYPES:
            d = WITNESS_TYPES[q[3:]]
            v = self.val(node.value) if node.value is not None else None
            if v is None or v.kind != "witness" or v.domain != d:
                self.report(messages.index_forge(self.span(node), "annotating-non-witness-does", ann=q[3:]))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.slice, ast.Tuple):
            self.index_tuples.update(self.model.src.index_tuples(node))

    def _container(self, node: ast.Tuple | ast.List | ast.Set) -> None:
        values = self.model.values
        if not node.elts or node in self.index_tuples or node in self.model.stores:
            return
        for e in node.elts:
            v = values.get(e.value if isinstance(e, ast.Starred) else e)
            if v is not None and v.kind == "witness":
                self.report(
                    messages.index_forge(self.model.src.expr_span(node), "put-witness-into-container",
                                         help="pass-witness-itself-container")
                )
                return

    visit_Tuple = visit_List = visit_Set = _container

    def visit_Attribute(self, node: ast.Attribute) -> None:
        v = self.model.values.get(node.value)
        if v is None or v.kind != "witness" or self.fn_of(node) is None:
            return
        if node.attr.startswith("_"):
            self.report(messages.index_forge(self.span(node), "reach-private-member-witness", attr=node.attr))
        elif node in self.model.stores:
            self.report(messages.index_forge(self.span(node), "assign-witness", attr=node.attr))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.returns is None:
            return
        fn = self.model.by_node.get(node)
        if fn is None or fn.kind != "func":
            return
        q = self.model.qualname(node.returns) or ""
        if q.startswith("az.") and q[3:] in WITNESS_TYPES:
            r = fn.returns
            if r is None or r.kind != "witness" or r.domain != WITNESS_TYPES[q[3:]]:
                self.report(
                    messages.index_forge(self.model.src.expr_span(node.returns),
                                         "helper-declared-return-returns", name=fn.name, ann=q[3:])
                )

