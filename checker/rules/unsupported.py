"""Forbids constructs outside the kernel subset of the language, naming each one."""

from __future__ import annotations

import libcst as cst

from .. import messages
from .base import DeviceBodyRule, slice_kinds

_SIMPLE: dict[type, str] = {
    cst.Lambda: "a `lambda`",
    cst.ListComp: "a list comprehension",
    cst.SetComp: "a set comprehension",
    cst.DictComp: "a dict comprehension",
    cst.GeneratorExp: "a generator expression",
    cst.Dict: "a dict",
    cst.Await: "`await`",
    cst.Yield: "`yield`",
    cst.NamedExpr: "an assignment expression `:=`",
    cst.ClassDef: "a class definition",
    cst.Try: "`try`",
    cst.Raise: "`raise`",
    cst.Assert: "`assert`",
    cst.Import: "`import`",
    cst.ImportFrom: "`import`",
    cst.Match: "`match`",
    cst.FormattedString: "an f-string",
    cst.Ellipsis: "`...`",
    cst.StarredElement: "a starred expression",
}
_HELP = {
    cst.Lambda: "write a `@az.func` helper instead",
    cst.Assert: "guard with `if` instead; a failed bounds check is reported as `az.KernelFault`",
    cst.Raise: "return early instead; faults are reported through `az.KernelFault`",
}
_OK_METHODS = {"add", "min", "max", "exchange", "write_unchecked"}


class Unsupported(DeviceBodyRule):
    """Forbids constructs outside the kernel subset of the language, naming each one."""

    CODE = "az-unsupported"
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
    ]
    INVALID = [
        '''
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    xs = [1, 2]  # E: az-unsupported
    print(i)  # E: az-unsupported
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
    ]

    def __init__(self, ctx):  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        self.docstring: cst.CSTNode | None = None
        self.allowed_tuples: set[cst.CSTNode] = set()
        self.iter_calls: set[cst.CSTNode] = set()
        self.with_calls: set[cst.CSTNode] = set()

    def _say(self, node: cst.CSTNode, construct: str, help: str | None = None) -> None:
        self.report(messages.unsupported(self.span(node), construct, help=help))

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        super().visit_IndentedBlock(node)
        if node is self._body and node.body:
            first = node.body[0]
            if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr):
                if isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
                    self.docstring = first.body[0].value

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.active:
            self._say(node.name, "a nested function definition", "define a module-level `@az.func` helper")
        elif node not in self.model.by_node and any(
            self.model.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
            in ("az.kernel", "az.func")
            for d in node.decorators
        ):
            self.report(messages.unsupported_here(
                self.span(node.name), f"`{node.name.value}` is a kernel or helper not defined at module level",
                help="define kernels and `@az.func` helpers at the top level of a module"))
        super().visit_FunctionDef(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.active and self.fn is not None and isinstance(node.target, cst.Name):
            p = self.fn.params.get(node.target.value)
            if p is not None and p.kind == "slice":
                self._say(node.target, f"rebinding slice parameter `{p.name}`")

    # generic constructs --------------------------------------------------------------------
    def _simple(self, node: cst.CSTNode) -> None:
        if self.active:
            self._say(node, _SIMPLE[type(node)], _HELP.get(type(node)))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if self.active:
            self._simple(node)
        elif isinstance(node.names, cst.ImportStar) and node.module is not None:
            mod = self.model.code(node.module)
            if mod == "anodize" or mod.startswith("anodize."):
                self.report(messages.unsupported_here(
                    self.span(node), f"`from {mod} import *` hides which names are kernels and slices",
                    help="import the names you use (or `import anodize as az`) so the checker can resolve them"))

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _simple
    visit_Dict = visit_Await = visit_Yield = visit_NamedExpr = visit_ClassDef = visit_Try = _simple
    visit_Raise = visit_Assert = visit_Import = visit_Match = _simple
    visit_FormattedString = visit_Ellipsis = visit_StarredElement = _simple

    def _strings(self, node: cst.CSTNode) -> None:
        if self.active and node is not self.docstring:
            self._say(node, "a string")

    visit_SimpleString = visit_ConcatenatedString = _strings

    def visit_List(self, node: cst.List) -> None:
        self._container(node, "a list")

    def visit_Set(self, node: cst.Set) -> None:
        self._container(node, "a set")

    def visit_Tuple(self, node: cst.Tuple) -> None:
        if node not in self.allowed_tuples:
            self._container(node, "a tuple", "tuples are allowed only as 2-D indices and shared-array shapes")

    def _container(self, node: cst.List | cst.Set | cst.Tuple, what: str, help: str | None = None) -> None:
        if not self.active or node in self.model.stores:
            return
        if any((v := self.val(e.value)) is not None and v.kind == "witness" for e in node.elements):
            return  # az-index-forge reports witnesses in containers
        self._say(node, what, help)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not self.active:
            return
        for el in node.slice:
            if isinstance(el.slice, cst.Slice):
                self._say(el.slice, "slicing", "index one element at a time")
            elif isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Tuple):
                self.allowed_tuples.add(el.slice.value)

    def visit_Del(self, node: cst.Del) -> None:
        if self.active and isinstance(node.target, cst.Name):
            self._say(node, "`del` of a local")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self.active and isinstance(node.operator, cst.MatrixMultiply):
            self._say(node, "the `@` operator")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if not self.active:
            return
        for c in node.comparisons:
            op = c.operator
            if isinstance(op, (cst.Is, cst.IsNot)):
                self._say(c.operator, "`is`", "compare values with `==`")
            elif isinstance(op, (cst.In, cst.NotIn)):
                v = self.val(c.comparator)
                if v is None or v.kind != "slice":
                    self._say(c.comparator, "`in` on anything but a slice", "`i in c` tests a witness against a slice")

    # statements -----------------------------------------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        if not self.active:
            return
        if node.asynchronous is not None:
            self._say(node, "`async for`")
        callee = self.model.callees.get(node.iter) if isinstance(node.iter, cst.Call) else None
        if callee is None or callee.kind not in ("range", "grid_stride"):
            self._say(node.iter, "a `for` loop over anything but `range(...)` or `thread.grid_stride(...)`")
        else:
            self.iter_calls.add(node.iter)
        if not isinstance(node.target, cst.Name):
            self._say(node.target, "a loop target that is not a plain name")
        elif self.fn is not None and (p := self.fn.params.get(node.target.value)) is not None and p.kind == "slice":
            self._say(node.target, f"rebinding slice parameter `{p.name}`", "use a new name for the loop variable")
        if node.orelse is not None:
            self._say(node.orelse, "`else` on a loop")

    def visit_While(self, node: cst.While) -> None:
        if self.active and node.orelse is not None:
            self._say(node.orelse, "`else` on a loop")

    def visit_With(self, node: cst.With) -> None:
        if not self.active:
            return
        for item in node.items:
            callee = self.model.callees.get(item.item) if isinstance(item.item, cst.Call) else None
            if callee is None or callee.kind != "unsafe" or item.asname is not None:
                self._say(item, "a `with` block other than `with az.unsafe():`")
            else:
                self.with_calls.add(item.item)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.active or self.fn is None:
            return
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                self.allowed_tuples.add(t.target)
                self._say(t.target, "tuple unpacking", "assign each name on its own line")
            elif isinstance(t.target, cst.Name):
                self._rebind(t.target, node.value)
            elif isinstance(t.target, cst.Attribute):
                v = self.val(t.target.value)
                ro = [k for _, k in slice_kinds(self.fn, v) if k in ("Slice", "Slice2D")]
                if v is not None and v.kind not in ("global", "witness") and not ro:  # those have their own codes
                    self._say(t.target, "attribute assignment")

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.active and self.fn is not None and isinstance(node.target, cst.Name):
            self._rebind(node.target, node.value)

    def _rebind(self, target: cst.Name, value: cst.BaseExpression | None) -> None:
        assert self.fn is not None
        p = self.fn.params.get(target.value)
        if p is None or p.kind != "slice":
            return
        v = self.val(value) if value is not None else None
        ro = [k for _, k in slice_kinds(self.fn, v) if k in ("Slice", "Slice2D")]
        if not (ro and p.slice_kind and p.slice_kind.output):  # az-shared-write covers that
            self._say(target, f"rebinding slice parameter `{p.name}`", "bind a new local name instead")

    # calls and attributes --------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        callee = self.model.callees.get(node)
        if callee is None:
            return
        k = callee.kind
        if k in ("shared", "write_unchecked"):
            for a in node.args:
                if isinstance(a.value, cst.Tuple):
                    self.allowed_tuples.add(a.value)
        if k == "unknown":
            self._say(node.func, f"a call to `{callee.name}`", "call `@az.func` helpers, `abs`/`min`/`max`/`len`, casts such as `f32(x)`, or `math.*` functions")
        elif k == "function":
            self._say(node.func, f"a call to `{callee.name}` (not an `@az.func` helper)", f"decorate `{callee.name}` with `@az.func`")
        elif k == "kernel":
            self._say(node.func, f"a call to kernel `{callee.name}`", "move the shared code into an `@az.func` helper")
        elif k in ("range", "grid_stride") and node not in self.iter_calls:
            self._say(node.func, f"`{callee.name}` outside the iterable of a `for` loop")
        elif k == "unsafe" and node not in self.with_calls:
            self._say(node.func, "`az.unsafe()` outside a `with` statement")
        elif k == "method":
            v = self.val(node.func.value) if isinstance(node.func, cst.Attribute) else None  # type: ignore[union-attr]
            kinds = slice_kinds(self.fn, v) if self.fn else []
            if not (callee.name in _OK_METHODS and kinds):
                self._say(node.func, f"method `{callee.name}` of a slice")
        elif k in ("atomic_op",):
            v = self.val(node.func.value)  # type: ignore[attr-defined]
            names = {kk for _, kk in slice_kinds(self.fn, v)} if self.fn else set()
            if names and not names & {"AtomicSlice", "Slice", "Slice2D"}:
                self._say(node.func, f"method `{callee.name}` of a `{sorted(names)[0]}`", "use an `AtomicSlice` parameter for atomic updates")
        for a in node.args:
            if a.star:
                self._say(a, "argument unpacking")
        # codegen rejects keyword arguments too (found by tools/fuzz.py); one report per call
        kw = next((a for a in node.args if a.keyword is not None and not a.star), None)
        if kw is not None:
            self._say(kw, "a keyword argument", "pass the arguments by position")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self.active or self.fn is None or node in self.model.stores:
            return
        base = self.val(node.value)
        if base is None:
            return
        attr = node.attr.value
        if base.kind == "witness":
            ok = attr == "get" if base.domain == 1 else attr in ("row", "col")
            if not ok and not attr.startswith("_"):
                self._say(node.attr, f"attribute `{attr}` of an `Index{base.domain}D` witness")
        elif base.kind == "slice":
            kinds = {k for _, k in slice_kinds(self.fn, base)}
            if attr == "shape":
                if not kinds <= {"Slice2D", "DisjointSlice2D"}:
                    self._say(node.attr, "`.shape` of a 1-D slice", "use `len(a)`")
            elif attr not in _OK_METHODS:
                self._say(node.attr, f"attribute `{attr}` of a slice")
        elif base.kind in ("scalar", "unknown", "none", "shared"):
            self._say(node.attr, f"attribute `{attr}`")

