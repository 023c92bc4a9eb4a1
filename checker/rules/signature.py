"""Forbids kernel and helper signatures the language does not allow."""

from __future__ import annotations

import ast
from collections.abc import Callable

from anodize.language import messages
from anodize.language.diagnostics import Span
from anodize.language.vocab import SCALARS, WITNESS_TYPES
from .base import DeviceBodyRule

_KERNEL_TYPES = (
    "`Slice[T]`, `DisjointSlice[T]`, `Slice2D[T]`, `DisjointSlice2D[T]`, `Slice3D[T]`, `DisjointSlice3D[T]`, "
    "`AtomicSlice[T]` or a scalar type"
)
_SCALAR_HELP = "scalar types are `" + " ".join(SCALARS) + "`"


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

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        super().visit_FunctionDef(node)  # type: ignore[arg-type]
        fn = self.model.by_node.get(node)
        if fn is None or not fn.is_device:
            return
        what = "kernel" if fn.kind == "kernel" else "helper"
        src = self.model.src
        ps = node.args
        if isinstance(node, ast.AsyncFunctionDef):
            self.report(messages.signature(src.name_span(node), f"a {what} cannot be `async`"))
        for star in (ps.vararg, ps.kwarg):
            if star is not None:
                self.report(
                    messages.signature(
                        _star_span(src.arg_name_span(star), src.line), f"`{star.arg}`: a {what} takes no `*args` or `**kwargs`",
                        help="list each parameter",
                    )
                )
        for p in ps.kwonlyargs:
            self.report(messages.signature(src.arg_name_span(p), f"keyword-only parameter `{p.arg}` in a {what}", help="make it a plain parameter"))
        defaults = _defaults(ps)
        for info in fn.params.values():
            p = info.node
            default = defaults.get(id(p))
            if default is not None:
                self.report(
                    messages.signature(self.model.src.expr_span(default), f"parameter `{info.name}` has a default value",
                                       help="every argument is passed at launch; remove the default")
                )
            ann = p.annotation
            if ann is None:
                self.report(
                    messages.signature(src.arg_name_span(p), f"parameter `{info.name}` has no type annotation",
                                       help=f"annotate it: {_KERNEL_TYPES}")
                )
                continue
            if info.kind == "bad" or (info.kind == "witness" and fn.kind == "kernel"):
                extra = "; a kernel gets its witness from `thread.index_1d()`" if info.kind == "witness" else ""
                self.report(
                    messages.param_type(self.model.src.expr_span(ann), info.name, self.model.src.quote(ann),
                                        qualname=self.model.qualname(ann) or "", extra=extra,
                                        help=f"use {_KERNEL_TYPES}" + (", or `Index1D`/`Index2D`/`Index3D` in a helper" if fn.kind == "func" else ""))
                )
            elif info.kind == "slice" and info.scalar is None:
                self.report(
                    messages.signature(self.model.src.expr_span(ann), f"slice parameter `{info.name}` needs a scalar element type",
                                       help=f"write `{self.model.src.quote(ann).split('[')[0]}[f32]`; {_SCALAR_HELP}")
                )
        r = node.returns
        if r is not None:
            q = self.model.qualname(r) or ""
            is_none = isinstance(r, ast.Constant) and r.value is None
            ok = is_none or (fn.kind == "func" and q.startswith("az.") and (q[3:] in SCALARS or q[3:] in WITNESS_TYPES))
            if not ok:
                self.report(
                    messages.signature(self.model.src.expr_span(r), f"a {what} cannot return `{self.model.src.quote(r)}`",
                                       help="a kernel returns `None` and writes its results to outputs" if fn.kind == "kernel" else _SCALAR_HELP)
                )


    def visit_Return(self, node: ast.Return) -> None:
        if self.active and self.fn is not None and self.fn.kind == "kernel" and node.value is not None:
            self.report(
                messages.signature(self.span(node), "a kernel cannot return a value",
                                   help="write the result to a `DisjointSlice` output and `return` without a value")
            )


def _defaults(a: ast.arguments) -> dict[int, ast.expr]:
    """id(parameter) -> its default value."""
    out: dict[int, ast.expr] = {}
    if a.defaults:
        pos = [*a.posonlyargs, *a.args]
        for p, d in zip(pos[len(pos) - len(a.defaults) :], a.defaults):
            out[id(p)] = d
    for p, kd in zip(a.kwonlyargs, a.kw_defaults):
        if kd is not None:
            out[id(p)] = kd
    return out


def _star_span(name: Span, line: Callable[[int], str]) -> Span:
    """`*args` / `**kw`: the name with its stars (the old engine's parameter range)."""
    text = line(name.line)
    i = name.col
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    while i > 0 and text[i - 1] == "*":
        i -= 1
    return Span(name.path, name.line, i, name.end_line, name.end_col)
