"""Forbids kernel and helper signatures the language does not allow."""

from __future__ import annotations

import libcst as cst

from .. import messages
from .base import DeviceBodyRule

_KERNEL_TYPES = "`Slice[T]`, `DisjointSlice[T]`, `Slice2D[T]`, `DisjointSlice2D[T]`, `AtomicSlice[T]` or a scalar type"
_SCALAR_HELP = "scalar types are `f32 f64 i32 i64 u32 u64 bool_`"


class Signature(DeviceBodyRule):
    """Forbids kernel and helper signatures the language does not allow."""

    CODE = "az-signature"
    VALID = [
        """
@kernel
def k(a: Slice[f32], m: Slice2D[f32], c: DisjointSlice[f32], h: AtomicSlice[i32], s: f32, n: i64) -> None:
    pass

@func
def helper(c: DisjointSlice[f32], i: Index1D, x: f32) -> f32:
    return x
""",
    ]
    INVALID = [
        """
@kernel
def k(a, c: DisjointSlice[f32]) -> None:  # E: az-signature
    pass

@kernel
def k2(c: DisjointSlice[f32], n: int = 3) -> i32:  # E: az-signature
    return 1  # E: az-signature

@kernel
def k3(c: DisjointSlice, *rest: f32) -> None:  # E: az-signature
    pass
""",
    ]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        fn = self.model.by_node.get(node)
        if fn is None or not fn.is_device:
            return
        what = "kernel" if fn.kind == "kernel" else "helper"
        ps = node.params
        if node.asynchronous is not None:
            self.report(messages.signature(self.span(node.name), f"a {what} cannot be `async`"))
        for star in (ps.star_arg, ps.star_kwarg):
            if isinstance(star, cst.Param):
                self.report(
                    messages.signature(
                        self.span(star), f"`{self.model.code(star.name)}`: a {what} takes no `*args` or `**kwargs`",
                        help="list each parameter",
                    )
                )
        for p in ps.kwonly_params:
            self.report(messages.signature(self.span(p.name), f"keyword-only parameter `{p.name.value}` in a {what}", help="make it a plain parameter"))
        for info in fn.params.values():
            p = info.node
            if p.default is not None:
                self.report(
                    messages.signature(self.span(p.default), f"parameter `{info.name}` has a default value",
                                       help="every argument is passed at launch; remove the default")
                )
            if p.annotation is None:
                self.report(
                    messages.signature(self.span(p.name), f"parameter `{info.name}` has no type annotation",
                                       help=f"annotate it: {_KERNEL_TYPES}")
                )
                continue
            ann = p.annotation.annotation
            if info.kind == "bad" or (info.kind == "witness" and fn.kind == "kernel"):
                extra = "; a kernel gets its witness from `thread.index_1d()`" if info.kind == "witness" else ""
                self.report(
                    messages.signature(self.span(ann), f"unsupported type `{self.model.code(ann)}` for parameter `{info.name}`{extra}",
                                       help=f"use {_KERNEL_TYPES}" + (", or `Index1D`/`Index2D` in a helper" if fn.kind == "func" else ""))
                )
            elif info.kind == "slice" and info.scalar is None:
                self.report(
                    messages.signature(self.span(ann), f"slice parameter `{info.name}` needs a scalar element type",
                                       help=f"write `{self.model.code(ann).split('[')[0]}[f32]`; {_SCALAR_HELP}")
                )
        if node.returns is not None:
            r = node.returns.annotation
            q = self.model.qualname(r) or ""
            is_none = isinstance(r, cst.Name) and r.value == "None"
            ok = is_none or (fn.kind == "func" and q.startswith("az.") and q[3:] in ("f32", "f64", "i32", "i64", "u32", "u64", "bool_", "Index1D", "Index2D"))
            if not ok:
                self.report(
                    messages.signature(self.span(r), f"a {what} cannot return `{self.model.code(r)}`",
                                       help="a kernel returns `None` and writes its results to outputs" if fn.kind == "kernel" else _SCALAR_HELP)
                )

    def visit_Return(self, node: cst.Return) -> None:
        if self.active and self.fn is not None and self.fn.kind == "kernel" and node.value is not None:
            self.report(
                messages.signature(self.span(node), "a kernel cannot return a value",
                                   help="write the result to a `DisjointSlice` output and `return` without a value")
            )
