"""Forbids a plain read or write of an `AtomicSlice`."""

from __future__ import annotations

import ast

from anodize.language import messages
from ..kernel_model import bind_args
from .base import Rule, slice_kinds


class Atomic(Rule):
    """Forbids a plain read or write of an `AtomicSlice`."""

    CODE = "az-atomic"
    VALID = [
        """
@kernel
def k(a: Slice[i32], h: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    if i in a:
        old = h.add(a[i] % len(h), 1)
        h.max(0, old)
""",
    ]
    INVALID = [
        """
@kernel
def k(h: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    h[0] = 1  # E: az-atomic
    x = h[i]  # E: az-atomic
    h[1] += 1  # E: az-atomic
""",
    ]

    def visit_Subscript(self, node: ast.Subscript) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        for name, kind in slice_kinds(fn, self.val(node.value)):
            if kind == "AtomicSlice":
                access = "write" if node in self.model.stores else "read"
                self.report(messages.atomic_plain(self.span(node), name, access, self.decl(fn, name)))

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        fn = self.fn_of(node)
        if callee is None or fn is None or callee.kind != "helper" or callee.fn is None:
            return
        h = callee.fn
        for pname, arg in bind_args(h, node):
            hp = h.params.get(pname)
            if hp is None:
                continue
            for name, kind in slice_kinds(fn, self.val(arg)):
                if kind == "AtomicSlice" and (hp.slice_kind is None or not hp.slice_kind.atomic):
                    pk = self.model.code(hp.node.annotation) if hp.node.annotation else "?"
                    self.report(messages.atomic_passed(self.span(arg), name, h.name, pname, pk))
