"""Forbids kernel and helper signatures the language does not allow."""

from __future__ import annotations

import ast
from collections.abc import Callable

from anodize.language import messages
from anodize.language.diagnostics import Span
from anodize.language.vocab import SCALARS, WITNESS_TYPES
from .base import DeviceBodyRule



class Signature(DeviceBodyRule):
    """Forbids kernel and helper signatures the language does not allow."""

    CODE = "az-signature"
    ORDER = 20
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
            self.report(messages.signature(src.name_span(node), "async-function", what=what))
        for star in (ps.vararg, ps.kwarg):
            if star is not None:
                self.report(
                    messages.signature(
                        _star_span(src.arg_name_span(star), src.line), "takes-args-kwargs",
                        help="list-each-parameter", arg=star.arg, what=what,
                    )
                )
        for p in ps.kwonlyargs:
            self.report(messages.signature(src.arg_name_span(p), "keyword-parameter", help="make-plain-parameter", arg=p.arg, what=what))
        defaults = _defaults(ps)
        for info in fn.params.values():
            p = info.node
            default = defaults.get(id(p))
            if default is not None:
                self.report(
                    messages.signature(self.model.src.expr_span(default), "parameter-default-value",
                                       help="every-argument-passed-launch", name=info.name)
                )
            ann = p.annotation
            if ann is None:
                self.report(
                    messages.signature(src.arg_name_span(p), "parameter-type-annotation",
                                       help="annotate-param", name=info.name)
                )
                continue
            if info.kind == "bad" or (info.kind in ("witness", "local") and fn.kind == "kernel"):
                witness = info.kind == "witness"
                self.report(
                    messages.param_type(self.model.src.expr_span(ann), info.name, self.model.src.quote(ann),
                                        qualname=self.model.qualname(ann) or "", witness=witness,
                                        help="use-kernel-types-or-witness" if fn.kind == "func" else "use-kernel-types")
                )
            elif info.kind == "slice" and info.scalar is None:
                self.report(
                    messages.signature(self.model.src.expr_span(ann), "slice-parameter-needs-scalar",
                                       help="write-f32", name=info.name, kind=self.model.src.quote(ann).split('[')[0])
                )
        r = node.returns
        if r is not None:
            q = self.model.qualname(r) or ""
            is_none = isinstance(r, ast.Constant) and r.value is None
            ok = is_none or (fn.kind == "func" and q.startswith("az.") and (q[3:] in SCALARS or q[3:] in WITNESS_TYPES))
            if fn.kind == "func" and isinstance(r, ast.Subscript):  # `-> tuple[f32, i32]`: the typer checks the elements
                ok = ok or self.model.qualname(r.value) in ("builtins.tuple", "typing.Tuple")
            if fn.kind == "func" and isinstance(r, (ast.Name, ast.Attribute)):  # `-> Particle`: an `@az.record` class
                ok = ok or self.model.front.symbols.resolve(r).kind == "record"
            if not ok:
                self.report(
                    messages.signature(self.model.src.expr_span(r), "bad-return-type",
                                       help="kernel-returns-none" if fn.kind == "kernel" else "scalar-types", what=what, ann=self.model.src.quote(r))
                )


    def visit_Return(self, node: ast.Return) -> None:
        if self.active and self.fn is not None and self.fn.kind == "kernel" and node.value is not None:
            self.report(
                messages.signature(self.span(node), "kernel-return-value",
                                   help="write-result-disjointslice-output")
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
