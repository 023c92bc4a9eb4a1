"""Forbids indexing a `DisjointSlice*` at anything but this thread's witness of its index space."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.vocab import SLICE_KINDS
from ..kernel_model import bind_args, index_elements
from .base import Rule, slice_kinds

_DISJOINT = {k.name: k.rank for k in SLICE_KINDS.values() if k.disjoint}


class DisjointIndex(Rule):
    """Forbids indexing a `DisjointSlice*` at anything but this thread's witness of its index space."""

    CODE = "az-disjoint-index"
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], d: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    j = i
    if j in c and i in d:
        c[j] = a[i]
        d[i] = c[i] * 2.0
        c[i] += 1.0

@launch_contract(domain=2, block=(16, 16))
@kernel
def k2(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out:
        out[ij] = m[ij.row, ij.col]
""",
    ]
    INVALID = [
        """
@kernel
def k(c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    c[i + 1] = 1.0  # E: az-disjoint-index
    c[0] = 2.0  # E: az-disjoint-index
    x = c[i - 1]  # E: az-disjoint-index
    for j in range(n):
        c[j] = 0.0  # E: az-disjoint-index
    i = i.get() * 2  # E: az-type
    c[i] = 3.0  # E: az-disjoint-index
""",
        """
@kernel
def k(out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    out[ij.col, ij.row] = 1.0  # E: az-disjoint-index
""",
    ]

    def visit_Subscript(self, node: ast.Subscript) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        kinds = [(n, k) for n, k in slice_kinds(fn, self.val(node.value)) if k in _DISJOINT]
        if not kinds:
            return
        store = node in self.model.stores
        idx = index_elements(node)
        if idx is None:
            return  # slicing: az-unsupported
        for name, kind in kinds:
            d = _DISJOINT[kind]
            v = self.val(idx[0]) if len(idx) == 1 else None
            if v is not None and v.kind == "witness" and v.domain == d:
                continue
            index_text = ", ".join(self.model.code(e) for e in idx)
            why = _why(v, d, len(idx))
            self.report(
                messages.disjoint_index(
                    self.span(node), name, kind, index_text, "written" if store else "read", why,
                    self.decl(fn, name), domain=d,
                )
            )

    def visit_Compare(self, node: ast.Compare) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                for name, kind in slice_kinds(fn, self.val(right)):
                    if kind in _DISJOINT:
                        d = _DISJOINT[kind]
                        v = self.val(left)
                        if v is None or v.kind != "witness" or v.domain != d:
                            self.report(
                                messages.disjoint_index(
                                    self.span(node), name, kind, self.model.code(left), "tested", _why(v, d, 1),
                                    self.decl(fn, name), domain=d,
                                )
                            )
            left = right

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        if callee is None or callee.kind != "helper" or callee.fn is None:
            return
        fn = self.fn_of(node)
        if fn is None:
            return
        h = callee.fn
        for pname, arg in bind_args(h, node):
            hp = h.params.get(pname)
            if hp is None:
                continue
            for name, kind in slice_kinds(fn, self.val(arg)):
                if kind in _DISJOINT and (hp.slice_kind is None or hp.slice_kind.name != kind):
                    pk = self.model.code(hp.node.annotation) if hp.node.annotation else "?"
                    self.report(messages.disjoint_passed(self.span(arg), name, kind, h.name, pname, pk))


def _why(v, d: int, n: int) -> str:  # type: ignore[no-untyped-def]
    if v is None:
        return "not a witness" if n == 1 else f"a tuple of {n} plain ints is not a witness"
    if v.kind == "witness":
        return f"a {v.domain}-D witness, but this slice needs a {d}-D one"
    return "a plain int, not this thread's witness"
