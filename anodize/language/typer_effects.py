"""Typing of the kernel operations with effects beyond their value: the `AtomicSlice`
methods (with their `scope=` and `order=` keywords, the only keywords a kernel call
takes), `print(...)`, `assert` and `breakpoint()`.

`EffectsTyper` is the typer's collaborator for them (`FnTyper.effects`, typer_fn.py); every
user error is a located diagnostic built by `messages.py`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir, messages
from anodize.language.intrinsics import ATOMIC_METHOD_NAMES, METHODS
from anodize.language.types import VOID, ScalarTy, WitnessTy
from anodize.language.vocab import ATOMIC_INT_ONLY, ATOMIC_ORDERS, ATOMIC_ORDERS_FOR, ATOMIC_SCOPES

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper

_METHOD_LIST = ", ".join(f"`{n}`" for n in ATOMIC_METHOD_NAMES)
# an atomic's positional arguments, as its messages show them (by its declared arity)
ATOMIC_SHAPES = {1: "(j)", 2: "(j, v)", 3: "(j, expected, new)"}


class EffectsTyper:
    """Atomics, `print`, `assert` and `breakpoint` of one function body."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    # ---- atomics ----------------------------------------------------------------------------
    def takes_keywords(self, node: ast.Call) -> bool:
        """Is `node` a call that may take keywords (a method of an `AtomicSlice`)?"""
        f = node.func
        if self.fn.shared_mem.takes_keywords(node):
            return True
        return (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in self.st.slices
            and self.st.slices[f.value.id].kind.atomic
            and (decl := METHODS.get(("atomic_slice", f.attr))) is not None
            and bool(decl.keywords)
        )

    def atomic_method(self, name: str, method: str, node: ast.Call) -> ir.Expr:
        sty = self.st.slices[name]
        span = self.st.span(node)
        decl = METHODS.get(("atomic_slice", method))
        if not sty.kind.atomic or decl is None:
            if sty.kind.atomic:
                self.st.type_error(node, "atomic-no-method", help="atomic-method-list", kind=sty.kind.name, method=method, methods=_METHOD_LIST)
            if method == "load":
                self.st.type_error(node, "atomic-no-method", help="atomic-load-read", kind=sty.kind.name, method=method, name=name)
            self.st.type_error(node, "atomic-no-method", kind=sty.kind.name, method=method)
        scope, order = self.atomic_options(name, method, node)
        shape = ATOMIC_SHAPES[decl.exact_arity]
        if not decl.takes(len(node.args)) or any(isinstance(a, ast.Starred) for a in node.args):
            count = f"{len(node.args)} argument{'s' if len(node.args) != 1 else ''}"
            self.st.type_error(node, "atomic-arity", name=name, method=method, shape=shape, count=count)
        elem = sty.elem
        if elem.is_bool:
            self.st.type_error(node, "atomics-bool-slices-supported")
        if elem.is_f8:
            self.st.type_error(node, "atomics-f8-slices-supported", elem=elem)
        # 8- and 16-bit elements: the read-modify-writes LLVM (or a compare-and-swap loop over a
        # half's bits) gives, relaxed and device-scoped
        narrow_ok = method in ("add", "min", "max", "exchange") or (elem.is_int and method in ("sub", "and_", "or_", "xor"))
        if elem.info.mem_bits not in (32, 64) and not (narrow_ok and scope == "device" and order == "relaxed"):
            self.st.type_error(node, "atomic-width", name=name, elem=elem)
        if method in ATOMIC_INT_ONLY and elem.is_float:
            if method == "compare_exchange":
                self.st.type_error(node, "atomic-int-only", help="atomic-cas-float", method=method, name=name, elem=elem)
            self.st.type_error(node, "atomic-int-only", method=method, name=name, elem=elem)
        e = self.fn.expr(node.args[0])
        proven = isinstance(e.ty, WitnessTy) and isinstance(node.args[0], ast.Name) and (node.args[0].id, name) in self.st.facts
        index = self.fn.exprs.as_index(e, node.args[0])
        proven = proven or self.fn.ranges.slice_in_range(name, (index,))
        what = f"an element of `{name}`"
        value = None if method == "load" else self.fn.exprs.coerce(self.fn.expr(node.args[-1]), elem, node.args[-1], what)
        expected = self.fn.exprs.coerce(self.fn.expr(node.args[1]), elem, node.args[1], what) if method == "compare_exchange" else None
        site = -1 if proven else self.st.k.site(span, "atomic", name)
        ref = ir.SliceRef(name, sty, self.st.span(node.func))
        ty = VOID if method == "store" else elem
        op = method.rstrip("_")
        return ir.Atomic(op, ref, index, value, not proven, site, ty, span, expected, scope, order)

    def atomic_options(self, name: str, method: str, node: ast.Call) -> tuple[str, str]:
        """The `scope=` and `order=` keywords of an atomic call (defaults: device, relaxed)."""
        got = {"scope": "device", "order": "relaxed"}
        for kw in node.keywords:
            if kw.arg is None:
                self.st.unsupported(kw, "argument-unpacking")
            if kw.arg not in got:
                self.st.unsupported(kw, "atomic-keyword", help="atomic-keywords", kw=kw.arg)
            v = kw.value
            text = _literal(v)
            if text is None:
                self.st.type_error(v, "keyword-string-literal", help="atomic-choices", kw=kw.arg, choices=_choices(kw.arg))
            assert text is not None and kw.arg is not None
            if kw.arg == "scope":
                if text == "block":
                    self.st.fail(messages.atomic_scope(self.st.span(kw), text, name))
                if text not in ATOMIC_SCOPES:
                    self.st.type_error(v, "atomic-unknown-scope", help="atomic-choices", text=text, choices=_choices("scope"))
            else:
                if text not in ATOMIC_ORDERS:
                    self.st.type_error(v, "atomic-unknown-order", help="atomic-choices", text=text, choices=_choices("order"))
                fits = ATOMIC_ORDERS_FOR.get(method, ATOMIC_ORDERS)
                if text not in fits:
                    self.st.fail(messages.atomic_order(self.st.span(kw), method, text, fits))
            got[kw.arg] = text
        return got["scope"], got["order"]

    # ---- print, assert, breakpoint ------------------------------------------------------------
    def print_stmt(self, call: ast.Call) -> list[ir.Stmt]:
        if call.keywords:
            kw = call.keywords[0]
            if kw.arg is None:
                self.st.unsupported(kw, "argument-unpacking")
            self.st.unsupported(kw, "print-keyword", help="print-line", kw=kw.arg)
        parts: list[str | ir.Expr] = []
        for a in call.args:
            if isinstance(a, ast.Starred):
                self.st.unsupported(a, "argument-unpacking")
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                parts.append(self._utf8(a, a.value))
                continue
            e = self.fn.expr(a)
            if isinstance(e.ty, ScalarTy):
                parts.append(e)
                continue
            if isinstance(e.ty, WitnessTy):
                get = "`i.get()`" if e.ty.rank == 1 else "`i.row, i.col`"
                self.st.unsupported(a, "print-witness", help="print-coordinates", ty=e.ty, get=get)
            self.st.unsupported(a, "print-other", help="print-scalars", ty=e.ty)
        return [ir.Print(tuple(parts), self.st.span(call))]

    def _utf8(self, node: ast.expr, text: str) -> str:
        """A string a kernel prints (or an assert reports): UTF-8, so no lone surrogate."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            self.st.unsupported(node, "lone-surrogate", help="lone-surrogate-help", char=ascii(text[e.start])[1:-1])
        return text

    def breakpoint_stmt(self, call: ast.Call) -> list[ir.Stmt]:
        if call.args or call.keywords:
            self.st.type_error(call, "breakpoint-no-args")
        return [ir.Breakpoint(self.st.span(call))]  # pdb on the debug device; lowered to nothing elsewhere

    def visit_Assert(self, node: ast.Assert) -> list[ir.Stmt]:
        cond = self.fn.exprs.truth(self.fn.expr(node.test), node.test)
        message = ""
        if node.msg is not None:
            literal = _literal(node.msg)
            if literal is None:
                self.st.unsupported(node.msg, "assert-message-literal", help="assert-message-help")
            message = self._utf8(node.msg, literal or "")
        span = self.st.span(node)
        # no facts flow from an assert: a failed one records a fault and the thread goes on
        return [ir.Assert(cond, self.st.k.site(span, "assert", "", message), span)]


def _literal(node: ast.expr) -> str | None:
    """The text of a string literal, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _choices(kw: str | None) -> str:
    values = ATOMIC_SCOPES if kw == "scope" else ATOMIC_ORDERS
    return "use one of " + ", ".join(f'`{kw}="{v}"`' for v in values)


__all__ = ["EffectsTyper"]
