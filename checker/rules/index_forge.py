"""Forbids forging or smuggling index witnesses."""

from __future__ import annotations

import libcst as cst

from .. import messages
from ..kernel_model import bind_args
from ..model import WITNESS_TYPES
from .base import Rule


class IndexForge(Rule):
    """Forbids forging or smuggling index witnesses."""

    CODE = "az-index-forge"
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
    t = (i, i)  # E: az-index-forge
    v = i._Index1D__value  # E: az-index-forge
""",
    ]

    def __init__(self, ctx):  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        self.index_tuples: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        callee = self.model.callees.get(node)
        fn = self.fn_of(node)
        if callee is None or fn is None:
            return
        if callee.kind == "forge" and callee.name.startswith("az.Index"):
            self.report(messages.index_forge(self.span(node), f"cannot construct a witness with `{self.model.code(node.func)}`"))
        elif callee.kind == "helper" and callee.fn is not None:
            for pname, arg in bind_args(callee.fn, node):
                hp = callee.fn.params.get(pname)
                if hp is None or hp.kind != "witness":
                    continue
                v = self.val(arg)
                if v is None or v.kind != "witness" or v.domain != hp.domain:
                    self.report(
                        messages.index_forge(
                            self.span(arg),
                            f"`{self.model.code(arg)}` is passed as witness `{pname}: Index{hp.domain}D` of `{callee.fn.name}`, but it is not one",
                        )
                    )

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        fn = self.fn_of(node.target)
        if fn is None:
            return
        q = self.model.qualname(node.annotation.annotation) or ""
        if q.startswith("az.") and q[3:] in WITNESS_TYPES:
            d = WITNESS_TYPES[q[3:]]
            v = self.val(node.value) if node.value is not None else None
            if v is None or v.kind != "witness" or v.domain != d:
                self.report(messages.index_forge(self.span(node), f"annotating a non-witness as `{q[3:]}` does not make it one"))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        for el in node.slice:
            if isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Tuple):
                self.index_tuples.add(el.slice.value)

    def _container(self, node: cst.Tuple | cst.List | cst.Set) -> None:
        if node in self.index_tuples or node in self.model.stores:
            return
        for e in node.elements:
            v = self.val(e.value)
            if v is not None and v.kind == "witness" and self.fn_of_any(e.value):
                self.report(
                    messages.index_forge(self.span(node), "cannot put a witness into a container",
                                         help="pass the witness itself; a container would let it outlive or leave its thread")
                )
                return

    def fn_of_any(self, node: cst.CSTNode) -> bool:
        return node in self.model.values

    visit_Tuple = visit_List = visit_Set = _container

    def visit_Attribute(self, node: cst.Attribute) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        v = self.val(node.value)
        if v is not None and v.kind == "witness":
            if node.attr.value.startswith("_"):
                self.report(messages.index_forge(self.span(node), f"cannot reach private member `{node.attr.value}` of a witness"))
            elif node in self.model.stores:
                self.report(messages.index_forge(self.span(node), f"cannot assign to `{node.attr.value}` of a witness"))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None or fn.kind != "func" or node.returns is None:
            return
        q = self.model.qualname(node.returns.annotation) or ""
        if q.startswith("az.") and q[3:] in WITNESS_TYPES:
            r = fn.returns
            if r is None or r.kind != "witness" or r.domain != WITNESS_TYPES[q[3:]]:
                self.report(
                    messages.index_forge(self.span(node.returns.annotation),
                                         f"helper `{fn.name}` is declared to return `{q[3:]}` but returns something else")
                )
