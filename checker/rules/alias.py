"""Forbids passing one buffer as a launch's output and as any other of its arguments."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.launch_rules import alias_pairs
from anodize.language.vocab import SLICE_KINDS
from anodize.language.diagnostics import Label
from ..kernel_values import VIEW_METHODS, KernelSummary, dotted, literal_int
from .base import HostRule


class Alias(HostRule):
    """Forbids passing one buffer as a launch's output and as any other of its arguments."""

    CODE = "az-alias"
    ORDER = 150
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pass

def main(dev: az.Device, x: object) -> None:
    a = dev.to_device(x)
    c = dev.to_device(x)
    k[az.LaunchConfig.for_num_elems(10)](a, c)
""",
    ]
    INVALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    pass

def main(dev: az.Device, x: object) -> None:
    a = dev.to_device(x)
    k[az.LaunchConfig.for_num_elems(10)](a, a)  # E: az-alias
    b = a
    k.unsafe_launch(az.LaunchConfig.for_num_elems(10), b[1:], a)  # E: az-alias
""",
    ]

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        kernel: KernelSummary | None = None
        skip = 0
        if isinstance(f, ast.Subscript):
            kernel = self.kernel_at(f.value)
        elif isinstance(f, ast.Attribute) and f.attr == "unsafe_launch":
            kernel = self.kernel_at(f.value)
            skip = 1
        if kernel is None:
            return
        if kernel.launch_params:
            self.bundle_launch(node, kernel, skip)
            return
        names = [p for p, _ in kernel.params]
        bound = _bound(node, names, skip)
        if bound is None:
            return
        self.check([(names[i], kernel.is_output(i), e, ()) for i, e in bound])

    def check(self, args: list[tuple[str, bool, ast.expr, tuple[Label, ...]]]) -> None:
        """(parameter, is an output, argument, labels) of one launch: every pair that shares a
        buffer with an output among them (the decision every front end makes: launch_rules.alias_pairs)."""
        roots = [(name, e, *self.root(e)) for name, _, e, _ in args]
        for a, b in alias_pairs([out for _, out, _, _ in args], [r for _, _, r, _ in roots]):
            name, e, root, via = roots[a]
            name2, e2, _, via2 = roots[b]
            labels = tuple(Label(self.span(n), f"`{v}` is bound to `{root}` here") for v, n in (*via, *via2))
            extra = tuple(dict.fromkeys((*args[a][3], *args[b][3])))
            self.report(messages.alias(self.span(e), name, self.span(e2), name2, root, labels + extra))

    def bundle_launch(self, node: ast.Call, kernel: KernelSummary, skip: int) -> None:
        """A launch of a kernel with a bundle parameter: a bundle argument that is its class's
        constructor call (`State(pos=a, out=o)`, here or bound once to a name) gives its fields'
        arguments, checked with every other argument as separate parameters are (a bundle
        argument of any other form is the runtime's to check)."""
        sig = kernel.launch_params
        bound = _bound(node, [n for n, _, _ in sig], skip)
        if bound is None:
            return
        args: list[tuple[str, bool, ast.expr, tuple[Label, ...]]] = []
        for i, e in bound:
            name, kind, fields = sig[i]
            if not fields:
                args.append((name, _is_output(kind), e, ()))
                continue
            ctor = self.constructor(e, kind)
            if ctor is None:
                continue
            at = (Label(self.span(e), f"the bundle `{name}` is launched here"),) if ctor is not e else ()
            given = dict(zip((f.split(".", 1)[1] for f, _ in fields), ctor.args))
            given.update((kw.arg, kw.value) for kw in ctor.keywords if kw.arg is not None)
            for f, fkind in fields:
                v = given.get(f.split(".", 1)[1])
                if v is not None and not isinstance(v, ast.Starred):
                    args.append((f, _is_output(fkind), v, at))
        self.check(args)

    def constructor(self, e: ast.expr, cls: str) -> ast.Call | None:
        """`e` as a call of the bundle class `cls` (followed through one local binding)."""
        if isinstance(e, ast.Name):
            b = self.binding(e.id)
            e = b[0] if b is not None else e
        if not isinstance(e, ast.Call) or any(isinstance(a, ast.Starred) for a in e.args) or any(k.arg is None for k in e.keywords):
            return None
        f = e.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        return e if cls and name == cls else None

    def root(self, e: ast.expr) -> tuple[str | None, list[tuple[str, ast.AST]]]:
        """The buffer an argument expression denotes (following local bindings and views)."""
        via: list[tuple[str, ast.AST]] = []
        seen: set[str] = set()
        for _ in range(32):
            if isinstance(e, ast.Name):
                b = self.binding(e.id)
                if b is None or e.id in seen:
                    return e.id, via
                seen.add(e.id)
                value, target = b
                if isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)) or _is_view_call(value):
                    via.append((e.id, target))
                    e = value
                    continue
                return e.id, via
            if isinstance(e, ast.Subscript):
                items = self.container(e.value)
                if items is None:  # a view of a buffer (`c[2:]`)
                    e = e.value
                    continue
                # an element of a list or tuple display (`bufs = [a, c]`): that element when the
                # index is a literal, else none that is known (left alone, never guessed)
                at = literal_int(e.slice)
                if at is None or not -len(items) <= at < len(items) or any(isinstance(x, ast.Starred) for x in items):
                    return None, via
                e = items[at]
            elif isinstance(e, ast.Attribute):
                if e.attr in VIEW_METHODS:
                    e = e.value
                else:
                    return dotted(e), via
            elif _is_view_call(e):
                e = e.func.value  # type: ignore[attr-defined]
            else:
                return None, via
        return None, via


    def container(self, e: ast.expr) -> list[ast.expr] | None:
        """The elements of a list or tuple display, written here or bound once to this name."""
        if isinstance(e, ast.Name):
            b = self.binding(e.id)
            e = b[0] if b is not None else e
        return list(e.elts) if isinstance(e, (ast.List, ast.Tuple)) else None


def _is_output(kind: str) -> bool:
    k = SLICE_KINDS.get(kind)
    return bool(k and k.output)


def _is_view_call(e: ast.expr) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in VIEW_METHODS


def _bound(node: ast.Call, names: list[str], skip: int) -> list[tuple[int, ast.expr]] | None:
    """(parameter index, argument) of a launch's arguments past the first `skip` (the launch
    config), or None when a `*x`/`**x` hides which argument binds which parameter (without
    them every positional argument comes before every keyword)."""
    bound: list[tuple[int, ast.expr]] = []
    for pos, a in enumerate(node.args):
        if isinstance(a, ast.Starred):
            return None
        if pos >= skip and pos - skip < len(names):
            bound.append((pos - skip, a))
    for kw in node.keywords:
        if kw.arg is None:
            return None
        if kw.arg in names:
            bound.append((names.index(kw.arg), kw.value))
    return bound
