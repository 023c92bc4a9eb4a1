"""Forbids constructs outside the kernel subset of the language, naming each one."""

from __future__ import annotations

import ast
import re

from anodize.language import messages
from anodize.language.diagnostics import Span
from anodize.language.syntax import in_source_order
from anodize.language.intrinsics import method
from anodize.language.vocab import SLICE_KINDS, WITNESS_PARTS
from .base import DeviceBodyRule, slice_kinds

_READ_ONLY = {k.name for k in SLICE_KINDS.values() if not k.output}
_CLOSE = re.compile(r"[ \t]*\)")


def _is_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


class Unsupported(DeviceBodyRule):
    """Forbids constructs outside the kernel subset of the language, naming each one."""

    CODE = "az-unsupported"
    ORDER = 10
    VALID = [
        '''
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    """docstring is fine"""
    i = thread.index_1d()
    acc = f32(0.0)
    for j in range(n):
        acc += a[j] * 2.0 if j % 2 == 0 else -a[j]
    while acc > 10.0:
        acc = acc / 2.0
    if i in c and not (acc < 0.0):
        c[i] = min(abs(acc), az.math.sqrt(acc))
''',
        '''
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        print("i =", i.get(), "a[i] =", a[i], a[i] > 0.0, "100%")
        assert a[i] >= 0.0, "negative input"
        assert i.get() < len(c)
        breakpoint()
        c[i] = a[i]
''',
    ]
    INVALID = [
        '''
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    xs = [1, 2]  # E: az-unsupported
    print(a)  # E: az-unsupported
    f = lambda x: x  # E: az-unsupported
    c[i] = a[1:3]  # E: az-unsupported
''',
        '''
@kernel
def k(c: DisjointSlice[f32]) -> None:
    for j in [1, 2]:  # E: az-unsupported
        pass
    def inner() -> None:  # E: az-unsupported
        pass
''',
        '''
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    print(i)  # E: az-unsupported
    print("a", a[0], sep="")  # E: az-unsupported
    x = print(a[0])  # E: az-unsupported
    assert a[0] > 0.0, f"{a[0]}"  # E: az-unsupported
    breakpoint(1)  # E: az-type
''',
    ]

    def __init__(self, ctx):  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        self.docstring: ast.expr | None = None
        self.allowed_tuples: set[ast.AST] = set()
        self.iter_calls: set[ast.AST] = set()
        self.with_calls: set[ast.AST] = set()
        self.skip: set[int] = set()  # ids of f-string parts and format specs, of `*x` in calls
        self._sa_funcs: set[ast.expr] | None = None  # `_shared_atomic_funcs` (on first use)

    def _say(self, node: ast.AST, key: str, help: str | None = None, **values: object) -> None:
        """`az-unsupported` at `node`: `key` and `help` name texts of the message catalogue."""
        self.report(messages.unsupported(self.model.src.expr_span(node), key, help=help, **values))

    def _say_at(self, span: Span, key: str, help: str | None = None, **values: object) -> None:
        self.report(messages.unsupported(span, key, help=help, **values))

    def visit_FunctionBody(self, node: ast.FunctionDef) -> None:
        super().visit_FunctionBody(node)
        if self.fn is not None and node is self.fn.node:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, (ast.Constant, ast.JoinedStr)):
                v = first.value
                if isinstance(v, ast.JoinedStr) or isinstance(v.value, (str, bytes)):
                    self.docstring = v

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.active:
            self._say_at(self.model.src.name_span(node), "nested-function-definition", "define-module-level-az")
        elif node not in self.model.by_node and any(
            self.model.qualname(d.func if isinstance(d, ast.Call) else d) in ("az.kernel", "az.func")
            for d in node.decorator_list
        ):
            self.report(messages.unsupported_here(
                self.model.src.name_span(node), "kernel-helper-defined-module",
                help="define-kernels-az-func", name=node.name))
        super().visit_FunctionDef(node)


    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if self.active and self.fn is not None and isinstance(node.target, ast.Name):
            p = self.fn.params.get(node.target.id)
            if p is not None and p.kind == "slice":
                self._say(node.target, "rebinding-slice-parameter", name=p.name)

    # generic constructs --------------------------------------------------------------------
    def _simple(self, node: ast.AST) -> None:
        if self.active:
            self.report(messages.unsupported_syntax(self.model.src.expr_span(node), type(node).__name__))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if self.active:
            self._simple(node)
        elif node.module is not None and len(node.names) == 1 and node.names[0].name == "*":
            mod = node.module
            if mod == "anodize" or mod.startswith("anodize."):
                self.report(messages.unsupported_here(
                    self.span(node), "from-import-hides-which",
                    help="import-names-you-import", mod=mod))

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _simple
    visit_Dict = visit_Await = visit_Yield = visit_YieldFrom = visit_NamedExpr = visit_Try = _simple
    visit_Raise = visit_Import = visit_Match = _simple

    def visit_Assert(self, node: ast.Assert) -> None:
        if self.active and _is_str(node.msg):
            self.skip.add(id(node.msg))  # the message of `assert cond, "..."`; the typer reports others

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.active:
            self._simple(node)
            self.skip.update(id(b) for b in node.bases if isinstance(b, ast.Starred))

    def visit_Starred(self, node: ast.Starred) -> None:
        if self.active and id(node) not in self.skip:
            self._simple(node)  # `*x` in a call is reported as argument unpacking

    # strings: the old engine saw each literal of `"a" "b"` and each concatenation of them
    def visit_Constant(self, node: ast.Constant) -> None:
        if not self.active:
            return
        v = node.value
        if v is Ellipsis:
            self._say(node, "ellipsis")
        elif isinstance(v, (str, bytes)) and id(node) not in self.skip:
            self._strings(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if not self.active:
            return
        for part in node.values:  # the literal text and the format specs are not strings
            if isinstance(part, ast.Constant):
                self.skip.add(id(part))
            elif isinstance(part, ast.FormattedValue) and part.format_spec is not None:
                self.skip.add(id(part.format_spec))
        if id(node) not in self.skip:
            self._strings(node)

    def _strings(self, node: ast.Constant | ast.JoinedStr) -> None:
        pieces = self.model.src.string_pieces(node)
        if len(pieces) == 1:
            if isinstance(node, ast.JoinedStr):
                self._say_at(pieces[0][0], "f-string")
            elif node is not self.docstring:
                self._say_at(pieces[0][0], "string")
            return
        end = pieces[-1][0]
        for i, (span, fstring) in enumerate(pieces):
            if i < len(pieces) - 1 and not (i == 0 and node is self.docstring):
                self._say_at(Span(span.path, span.line, span.col, end.end_line, end.end_col), "string")
            self._say_at(span, "f-string" if fstring else "string")

    def visit_List(self, node: ast.List) -> None:
        self._container(node, "list-value")

    def visit_Set(self, node: ast.Set) -> None:
        self._container(node, "set-value")

    def visit_Tuple(self, node: ast.Tuple) -> None:
        if node not in self.allowed_tuples:
            self._container(node, "tuple-literal", "tuples-2d-or-shape")

    def _container(self, node: ast.List | ast.Set | ast.Tuple, key: str, help: str | None = None) -> None:
        if not self.active or node in self.model.stores:
            return
        values = self.model.values
        for e in node.elts:
            v = values.get(e.value if isinstance(e, ast.Starred) else e)
            if v is not None and v.kind == "witness":
                return  # az-index-forge reports witnesses in containers
        self._say(node, key, help)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not self.active:
            return
        sl = node.slice
        base = self.model.values.get(node.value)
        if base is not None and base.kind == "tile":  # `x[:, None]`: the typer's rules (typer_tiles.new_axes)
            if isinstance(sl, ast.Tuple):
                self.allowed_tuples.add(sl)
            return
        if isinstance(sl, ast.Slice):
            self._say(sl, "slicing", "index-element-time")
        elif isinstance(sl, ast.Tuple):
            self.allowed_tuples.update(self.model.src.index_tuples(node))
            for e in sl.elts:
                if isinstance(e, ast.Slice):
                    self._say(e, "slicing", "index-element-time")

    def visit_Delete(self, node: ast.Delete) -> None:
        if not self.active:
            return
        ts = node.targets
        if len(ts) == 1 and isinstance(ts[0], ast.Name):
            self._say(node, "del-local")
        elif len(ts) > 1 and not any((v := self.val(t)) is not None and v.kind == "witness" for t in ts):
            # `del a, b` deletes a tuple (as the old engine saw it)
            a, b = self.span(node), self.span(ts[-1])
            text = self.model.src.line(a.line)
            col = a.col + 3  # after `del`
            while col < len(text) and text[col] in " \t":
                col += 1
            text = self.model.src.line(b.end_line)
            end = b.end_col  # with the last target's parentheses
            while (m := _CLOSE.match(text, end)) is not None:
                end = m.end()
            self._say_at(Span(a.path, a.line, col, b.end_line, end), "tuple-literal",
                         "tuples-2d-or-shape")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.active and isinstance(node.op, ast.MatMult):
            self._say(node, "matmul")

    def visit_Compare(self, node: ast.Compare) -> None:
        if not self.active:
            return
        prev = node.left
        for op, comp in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Is, ast.IsNot)):
                self._say_at(self.model.src.op_span(prev, comp), "is-operator", "compare-values")
            elif isinstance(op, (ast.In, ast.NotIn)):
                v = self.val(comp)
                if v is None or v.kind != "slice":
                    self._say(comp, "in-non-slice", "in-tests-witness")
            prev = comp

    # statements -----------------------------------------------------------------------------
    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        if not self.active:
            return
        if isinstance(node, ast.AsyncFor):
            self._say(node, "async-for")
        it = node.iter
        callee = self.model.callees.get(it) if isinstance(it, ast.Call) else None
        if callee is None or callee.decl is None or not callee.decl.loop_only:
            self._say(it, "loop-over-anything-range")
        else:
            self.iter_calls.add(it)
        t = node.target
        if not isinstance(t, ast.Name):
            self._say(t, "loop-target-plain-name")
        elif self.fn is not None and (p := self.fn.params.get(t.id)) is not None and p.kind == "slice":
            self._say(t, "rebinding-slice-parameter", "new-name-loop-variable", name=p.name)
        if node.orelse:
            self._say_at(self.model.src.else_span(node.body, node.orelse), "loop-else")


    def visit_While(self, node: ast.While) -> None:
        if self.active and node.orelse:
            self._say_at(self.model.src.else_span(node.body, node.orelse), "loop-else")

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        if not self.active:
            return
        for item in node.items:
            e = item.context_expr
            callee = self.model.callees.get(e) if isinstance(e, ast.Call) else None
            if callee is None or callee.kind != "unsafe" or item.optional_vars is not None:
                self._say_at(self.model.src.withitem_span(item), "with-block-other")
            else:
                self.with_calls.add(e)


    def visit_Assign(self, node: ast.Assign) -> None:
        if not self.active or self.fn is None:
            return
        for t in node.targets:
            if isinstance(t, ast.Tuple):  # `a, b = f(x)`, `a, b = b, a`: the typer checks the parts
                self.allowed_tuples.add(t)
                if isinstance(node.value, ast.Tuple):
                    self.allowed_tuples.add(node.value)
            elif isinstance(t, ast.List):
                self.allowed_tuples.add(t)
                self._say(t, "tuple-unpacking", "assign-each-name-own")
            elif isinstance(t, ast.Name):
                self._rebind(t, node.value)
            elif isinstance(t, ast.Attribute):
                v = self.val(t.value)
                ro = [k for _, k in slice_kinds(self.fn, v) if k in _READ_ONLY]
                if v is not None and v.kind not in ("global", "witness", "record") and not ro:  # those have their own codes
                    self._say(t, "attribute-assignment")

    def visit_Return(self, node: ast.Return) -> None:
        if self.active and isinstance(node.value, ast.Tuple):  # a helper's `return a, b`: the typer checks it
            self.allowed_tuples.add(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if self.active and self.fn is not None and isinstance(node.target, ast.Name):
            self._rebind(node.target, node.value)

    def _rebind(self, target: ast.Name, value: ast.expr | None) -> None:
        assert self.fn is not None
        p = self.fn.params.get(target.id)
        if p is None or p.kind != "slice":
            return
        v = self.val(value) if value is not None else None
        ro = [k for _, k in slice_kinds(self.fn, v) if k in _READ_ONLY]
        if not (ro and p.slice_kind and p.slice_kind.output):  # az-shared-write covers that
            self._say(target, "rebinding-slice-parameter", "bind-new-local-name", name=p.name)

    # calls and attributes --------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        if not self.active:
            return
        star = False
        for a in node.args:
            if a.__class__ is ast.Starred:
                self.skip.add(id(a))
                star = True
        callee = self.model.callees.get(node)
        if callee is None:
            return
        k = callee.kind
        if k == "record":  # `Rec(x=..., ids=(1, 2))`: fields by keyword, an array field a tuple; the typer checks them
            self.allowed_tuples.update(a for a in (*node.args, *(kw.value for kw in node.keywords)) if isinstance(a, ast.Tuple))
            return
        if k in ("tile", "tile_method", "tile_id_get"):  # tile shapes and offsets are tuples; the tile typer checks keywords
            self.allowed_tuples.update(a for a in node.args if isinstance(a, ast.Tuple))
            return
        if k in ("print", "atomic_op", "shared_atomic"):
            # string literals print; `scope=`/`order=` take strings: the typer checks both
            self.skip.update(id(a) for a in node.args if k == "print" and _is_str(a))
            self.skip.update(id(kw.value) for kw in node.keywords if k != "print" and _is_str(kw.value))
            if node.keywords:
                return  # keywords: the typer reports what is wrong (one report per problem)
        if k == "collective":  # the operator is a string literal; `block.scan` takes `inclusive=`
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                self.skip.add(id(node.args[1]))
            if not star and callee.decl is not None and all(kw.arg in callee.decl.keywords for kw in node.keywords):
                return
        if k in ("shared_array", "unchecked_write", "local_array", "shared_atomic"):
            for arg in in_source_order(node):
                e = arg.value if isinstance(arg, (ast.Starred, ast.keyword)) else arg
                if isinstance(e, ast.Tuple):
                    self.allowed_tuples.add(e)
        f = node.func
        if k == "unknown":
            self._say(f, "call-to", "call-az-func-helpers", name=callee.name)
        elif k == "function":
            self._say(f, "call-az-func-helper", "decorate-az-func", name=callee.name)
        elif k == "kernel":
            self._say(f, "call-kernel", "move-shared-code-into", name=callee.name)
        elif callee.decl is not None and callee.decl.loop_only and node not in self.iter_calls:
            self._say(f, "outside-iterable-loop", name=callee.name)
        elif k == "unsafe" and node not in self.with_calls:
            self._say(f, "az-unsafe-outside-statement")
        elif k == "method":  # a slice's method none declares (language/intrinsics.py `METHODS`)
            self._say(f, "method-slice", name=callee.name)
        elif k == "atomic_op":
            v = self.val(f.value)  # type: ignore[attr-defined]
            names = {kk for _, kk in slice_kinds(self.fn, v)} if self.fn else set()
            if names and not names & {"AtomicSlice", *_READ_ONLY}:
                self._say(f, "method-of-kind", "atomicslice-parameter-atomic-updates", name=callee.name, kind=sorted(names)[0])
        if not node.keywords and not star:
            return
        args = in_source_order(node)
        for arg in args:
            if isinstance(arg, ast.Starred) or (isinstance(arg, ast.keyword) and arg.arg is None):
                self._say(arg, "argument-unpacking")
        # codegen rejects keyword arguments too (found by tools/fuzz.py); one report per call
        kw = next((x for x in args if isinstance(x, ast.keyword) and x.arg is not None), None)
        if kw is not None:
            self._say(kw, "keyword-argument", "pass-arguments-position")

    def _shared_atomic_funcs(self) -> set[ast.expr]:
        """The `h.add` of every call of a block-shared atomic array's method."""
        got = self._sa_funcs
        if got is None:
            got = self._sa_funcs = {c.func for c, k in self.model.callees.items() if k.kind == "shared_atomic"}
        return got

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self.active or self.fn is None or node in self.model.stores:
            return
        base = self.val(node.value)
        if base is None:
            return
        attr = node.attr
        at = self.model.src.attr_span
        if base.kind == "witness":
            ok = attr in WITNESS_PARTS.get(base.domain, ())
            if not ok and not attr.startswith("_"):
                self._say_at(at(node), "attribute-index-d-witness", attr=attr, domain=base.domain)
        elif base.kind == "slice":
            kinds = {k for _, k in slice_kinds(self.fn, base)}
            if attr == "shape":
                if not kinds <= {"Slice2D", "DisjointSlice2D", "Slice3D", "DisjointSlice3D"}:
                    self._say_at(at(node), "shape-1-d-slice", "use-len-a")
            elif method("atomic_slice", attr) is None and method("slice", attr) is None:
                self._say_at(at(node), "attribute-slice", attr=attr)
        elif base.kind == "shared" and node in self._shared_atomic_funcs():
            pass  # a block-shared atomic array's method (the typer checks the array is atomic)
        elif base.kind in ("scalar", "unknown", "none", "shared", "local"):
            self._say_at(at(node), "attribute", attr=attr)
