"""Forbids any write to a shared, read-only `Slice`, `Slice2D` or `Slice3D`."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.vocab import SLICE_KINDS
from ..kernel_values import record_root
from .base import Rule, slice_kinds

_RO = tuple(k.name for k in SLICE_KINDS.values() if not k.output)  # Slice, Slice2D, Slice3D


class SharedWrite(Rule):
    """Forbids any write to a shared, read-only `Slice`, `Slice2D` or `Slice3D`."""

    CODE = "az-shared-write"
    ORDER = 30
    VALID = [
        """
@func
def put(c: DisjointSlice[f32], i: Index1D, v: f32) -> None:
    c[i] = v

@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    put(c, i, a[i] * 2.0)
""",
    ]
    INVALID = [
        """
@func
def put(c: DisjointSlice[f32], i: Index1D, v: f32) -> None:
    c[i] = v

@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    a[i] = 1.0  # E: az-shared-write
    a[i] += 1.0  # E: az-shared-write
    b = a  # E: az-type
    b[i] = 2.0  # E: az-shared-write
    put(a, i, 1.0)  # E: az-shared-write
    c = a  # E: az-shared-write
""",
    ]

    def _check_store(self, target: ast.expr, how: str) -> None:
        if not isinstance(target, (ast.Subscript, ast.Attribute)):
            return
        fn = self.fn_of(target)
        if fn is None:
            return
        target = record_root(target, self.model.values)  # `a[i].x = v` writes `a[i]`
        for name, kind in slice_kinds(fn, self.val(target.value)):  # type: ignore[attr-defined]
            if kind in _RO:
                self.report(messages.shared_write(self.span(target), name, kind, how, self.decl(fn, name)))

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t, "how-write")
            if isinstance(t, ast.Name):
                self._rebind(t, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store(node.target, "how-write")
        if isinstance(node.target, ast.Name) and node.value is not None:
            self._rebind(node.target, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target, "how-write")

    def visit_Delete(self, node: ast.Delete) -> None:
        targets = node.targets
        if len(targets) == 1 and isinstance(targets[0], ast.Tuple):  # `del (a, b)`, as `del a, b`
            targets = targets[0].elts
        for t in targets:
            self._check_store(t, "how-delete")

    def _rebind(self, target: ast.Name, value: ast.expr) -> None:
        fn = self.fn_of(target)
        if fn is None:
            return
        p = fn.params.get(target.id)
        if p is None or p.slice_kind is None or not p.slice_kind.output:
            return
        for name, kind in slice_kinds(fn, self.val(value)):
            if kind in _RO:
                self.report(messages.shared_rebind(self.span(target), p.name, p.slice_kind.name, name))

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        if callee is None:
            return
        fn = self.fn_of(node)
        if fn is None:
            return
        if callee.kind in ("atomic_op", "unchecked_write") and callee.decl is not None and callee.decl.mutates:  # `a.load(j)`: az-type
            for name, kind in slice_kinds(fn, self.val(node.func.value)):  # type: ignore[attr-defined]
                if kind in _RO:
                    self.report(messages.shared_write(self.span(node), name, kind, "how-call", self.decl(fn, name), method=callee.name))
        else:
            for s in self.slices_passed(node):
                writes = s.pname in s.helper.writes or (s.param.slice_kind is not None and s.param.slice_kind.output)
                if writes and s.kind in _RO:
                    self.report(
                        messages.shared_write_via_helper(
                            self.span(s.arg), s.name, s.kind, s.helper.name, s.pname, self.model.src.arg_name_span(s.param.node)
                        )
                    )
