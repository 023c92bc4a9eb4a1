"""Bundles (`class State(az.Bundle)`): several slices of their own roles passed as one kernel
parameter (docs/records.md, "Bundles").

    class State(az.Bundle):
        pos: Slice[f32]
        vel: DisjointSlice[f32]
        hits: AtomicSlice[u32]

    @kernel
    def step(s: State, dt: f32) -> None: ...   # s.pos[i], s.vel[i] = ..., s.hits.add(j, 1)

The front end reads a bundle parameter as its fields, one parameter each, named `s.pos`,
`s.vel`, `s.hits` (`flatten`, run on the module's tree once, before its names are resolved):
the parameter becomes the fields' parameters (their annotations the class's), and every
`s.pos` in the function -- its body, its contract's lambdas (`requires=lambda s: len(s.pos)
== len(s.vel)`) and a helper call's argument `s` -- becomes the name `s.pos`.  So every field
is a parameter with its own role to the checker (writes, witnesses, aliasing between fields
and with every other argument), the typer, codegen and the runtime, which expands a
`State(...)` argument into its fields at launch (in declaration order).  A bundle is found
by its base's spelling (`az.Bundle`, `anodize.Bundle` or `Bundle`): the tree is rewritten
before its names are resolved.
"""

from __future__ import annotations

import ast
import copy

__all__ = ["flatten", "bundle_classes"]


def bundle_classes(tree: ast.Module) -> dict[str, list[tuple[str, ast.expr]]]:
    """name -> [(field, annotation)] of each module-level `class X(az.Bundle)`."""
    out: dict[str, list[tuple[str, ast.expr]]] = {}
    for s in tree.body:
        if isinstance(s, ast.ClassDef) and any(_is_bundle_base(b) for b in s.bases):
            out[s.name] = [
                (st.target.id, st.annotation)
                for st in s.body
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
            ]
    return out


def _is_bundle_base(b: ast.expr) -> bool:
    return (isinstance(b, ast.Name) and b.id == "Bundle") or (
        isinstance(b, ast.Attribute) and b.attr == "Bundle" and isinstance(b.value, ast.Name) and b.value.id in ("az", "anodize")
    )


def flatten(tree: ast.Module) -> bool:
    """Rewrite every function with a bundle parameter (see the module docstring); True when
    the module has a bundle class."""
    classes = bundle_classes(tree)
    if not classes:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _flatten_fn(node, classes)
    return True


def _flatten_fn(fn: ast.FunctionDef | ast.AsyncFunctionDef, classes: dict[str, list[tuple[str, ast.expr]]]) -> None:
    bundles: dict[str, list[str]] = {}
    args: list[ast.arg] = []
    fn_args = list(fn.args.args)
    for a in fn_args:
        ann = a.annotation
        fields = classes.get(ann.id) if isinstance(ann, ast.Name) else None
        if fields is None:
            args.append(a)
            continue
        names = [f"{a.arg}.{f}" for f, _ in fields]
        bundles[a.arg] = names
        for (f, fann), name in zip(fields, names):
            fa = copy.deepcopy(fann)
            for n in ast.walk(fa):  # at the parameter's annotation: names resolve (and errors point) there
                n.lineno, n.col_offset, n.end_lineno, n.end_col_offset = ann.lineno, ann.col_offset, ann.end_lineno, ann.end_col_offset  # type: ignore[attr-defined]
                n._az_bundle = True  # type: ignore[attr-defined]  # synthesized: not at its own text
            new = ast.arg(arg=name, annotation=fa)
            ast.copy_location(new, a)
            new.end_lineno, new.end_col_offset = a.end_lineno, a.end_col_offset
            args.append(new)
    if not bundles:
        return
    fn.args.args = args
    fn._az_bundles = bundles  # type: ignore[union-attr]  # the runtime's and the checker's
    fn._az_bundle_classes = {a.arg: a.annotation.id for a in fn_args if a.arg in bundles}  # type: ignore[union-attr]  # (the launch site's, checker/rules/alias.py)
    _Rename(bundles).visit_all(fn)


class _Rename(ast.NodeTransformer):
    """`s.pos` -> the name `s.pos`; a call's argument `s` -> its fields; a lambda of `s` (a
    contract's) -> a lambda of its fields."""

    def __init__(self, bundles: dict[str, list[str]]):
        self.bundles = bundles

    def visit_all(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        fn.body = [self.visit(s) for s in fn.body]
        fn.decorator_list = [self.visit(d) for d in fn.decorator_list]

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.bundles:
            name = f"{node.value.id}.{node.attr}"
            if name in self.bundles[node.value.id]:
                return ast.copy_location(_name(name, node), node)
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        out: list[ast.expr] = []
        for a in node.args:
            if isinstance(a, ast.Name) and a.id in self.bundles:
                out.extend(_name(n, a) for n in self.bundles[a.id])
            else:
                out.append(a)
        node.args = out
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.generic_visit(node)
        args: list[ast.arg] = []
        for a in node.args.args:
            if a.arg in self.bundles:
                args.extend(ast.copy_location(ast.arg(arg=n), a) for n in self.bundles[a.arg])
            else:
                args.append(a)
        node.args.args = args
        return node


def _name(name: str, at: ast.expr) -> ast.Name:
    n = ast.Name(id=name, ctx=getattr(at, "ctx", ast.Load()))
    ast.copy_location(n, at)
    n.end_lineno, n.end_col_offset = at.end_lineno, at.end_col_offset
    n._az_bundle = True  # type: ignore[attr-defined]  # synthesized (a field of a bundle parameter)
    return n
