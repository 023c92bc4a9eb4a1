"""Forbids a plain read or write of an `AtomicSlice` (and, through the typer, atomics whose scope or ordering cannot hold).

The `scope=`/`order=` errors (`scope="block"` on global memory, a load that releases,
a store that acquires) are found by the one typed front end (language/typer_effects.py)
and reported through `az-type`'s rule with their own code, `az-atomic`: one report per
problem, the same one compile raises.
"""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import Rule, slice_kinds


class Atomic(Rule):
    """Forbids a plain read or write of an `AtomicSlice`."""

    CODE = "az-atomic"
    ORDER = 70
    VALID = [
        """
@kernel
def k(a: Slice[i32], h: AtomicSlice[i32]) -> None:
    i = thread.index_1d()
    if i in a:
        old = h.add(a[i] % len(h), 1)
        h.max(0, old)
""",
        """
@kernel
def k(a: Slice[i32], h: AtomicSlice[i32], s: AtomicSlice[f32]) -> None:
    i = thread.index_1d()
    if i in a:
        h.sub(1, 1, scope="system")
        h.and_(2, a[i])
        h.or_(3, a[i], order="release")
        h.xor(4, 1, order="acq_rel", scope="device")
        old = h.compare_exchange(5, 0, a[i], order="seq_cst")
        h.store(6, old, order="release")
        x = h.load(6, order="acquire") + h.exchange(7, 1)
        h.min(8, x)
        s.add(0, 1.5)
        s.sub(1, 0.5, order="acq_rel")
        s.store(2, s.load(3))
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
        """
@kernel
def k(h: AtomicSlice[i32]) -> None:
    h.add(0, 1, scope="block")  # E: az-atomic
    h.store(1, 2, order="acquire")  # E: az-atomic
    h.load(1, order="release")  # E: az-atomic
    h.store(1, 2, order="acq_rel")  # E: az-atomic
    h.add(0, 1, order="acq_rel", scope="system")
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
        for s in self.slices_passed(node):
            if s.kind == "AtomicSlice" and (s.param.slice_kind is None or not s.param.slice_kind.atomic):
                self.report(messages.atomic_passed(self.span(s.arg), s.name, s.helper.name, s.pname, s.annotation))
