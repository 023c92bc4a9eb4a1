"""The per-module kernel model: computed once, read by every rule.

For one parsed module it records which top-level functions are kernels and
`@az.func` helpers, their parameters (slice kinds, scalars, witnesses, from
`anodize/language/vocab.py`), their launch contracts, and a flow-sensitive abstract
interpretation of each body:

- every evaluated expression node gets a `Val` (a witness of index space 1 or
  2, a slice that is one of the parameters, a shared array, or a scalar that
  may or may not differ between the threads of a block);
- every call, subscript and attribute gets the `Ctx` it runs in (which
  function, inside `with az.unsafe():` or not, and the node that made control
  thread-dependent, if any);
- every call gets its resolved `Callee`.

The interpretation is sound for the questions the rules ask: at a merge of
control flow a value that is a witness on one path and an int on the other is
an int; loops are iterated to a fixed point; an assignment under
thread-dependent control is thread-dependent; a `return`/`break` under
thread-dependent control makes every later barrier (in the function, or in the
rest of the loop) divergent.  The model decides nothing itself: the rules in
`checker/rules/` read these facts and report.

Here: `ModuleModel`; the values and records are in kernel_values.py, the interpreter in
kernel_interp.py (statements: kernel_statements.py, expressions: kernel_exprs.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ast

from anodize.language.diagnostics import Span
from anodize.language.vocab import SLICE_KINDS
from anodize.language.front import ModuleFront, front_for_source
from anodize.language.param_annotations import annotation_kind
from anodize.language.symbols import canonical, wrapped_function
from anodize.language.walk import statements

from .kernel_interp import analyze
from .kernel_values import Callee, ContractInfo, Ctx, FunctionInfo, KernelSummary, ParamInfo, Val


_MISSING = object()  # a cache's "not there yet" (None is a cached answer)


class ModuleModel:
    """Everything the rules read about one module."""

    def __init__(self, tree: ast.Module, path: str, source: str, front: ModuleFront | None = None):
        if front is None:  # (a caller's own tree: the model is of that tree's nodes)
            front = front_for_source(source, path, tree)
            if front.tree is not tree:
                front = ModuleFront(source, path, tree)
        self.front = front
        self.tree = tree = self.front.tree
        self.module = tree  # the parsed module (an `ast.Module`)
        self.path = path
        self.source = source
        self.src = self.front.src
        self.names = self.front.names
        self._qualname_cache: dict[int, str | None] = {}  # by node id (the tree outlives the model)
        self.functions: dict[str, FunctionInfo] = {}
        self.by_node: dict[ast.AST, FunctionInfo] = {}
        self.values: dict[ast.AST, Val] = {}
        self.ctx: dict[ast.AST, Ctx] = {}
        self._evaluated: dict[FunctionInfo, list[ast.AST]] | None = None  # `evaluated`'s table (on first use)
        self.callees: dict[ast.Call, Callee] = {}
        self.stores: set[ast.AST] = set()  # subscript/attribute/name nodes written
        self.barriers: dict[ast.Call, Ctx] = {}
        self.helper_barrier_calls: dict[ast.Call, Ctx] = {}
        self.warp_ops: dict[ast.Call, Ctx] = {}  # full-warp operations
        self.helper_warp_calls: dict[ast.Call, Ctx] = {}  # calls of helpers that reach one
        self.guards: dict[ast.AST, frozenset[tuple[str, str]]] = {}  # subscript -> (witness, slice)
        self.passed: dict[ast.Call, list[Any]] = {}  # a helper call -> the slices it passes (rules/base.py)
        self._summaries: dict[FunctionInfo, KernelSummary] = {}  # `summary`, once per kernel
        self.imports_anodize = False
        # without these words in the source no statement declares a name global or nonlocal
        self._declares = "global" in source or "nonlocal" in source
        self._build()

    # -- helpers for rules -------------------------------------------------------------------
    def span(self, node: ast.AST, top: int | None = None) -> Span:
        """`node`'s span (`top`, the index of the top-level statement that holds it, is not needed)."""
        return self.src.span(node)

    def evaluated(self, fn: FunctionInfo) -> list[ast.AST]:
        """The subscripts and calls the model evaluated in `fn`, in the order it met them: one
        pass over its contexts for all functions (on first use; the model is complete once
        built), instead of a walk of each function's tree for the rules that look for them."""
        table = self._evaluated
        if table is None:
            table = self._evaluated = {}
            for node, c in self.ctx.items():
                if isinstance(node, (ast.Subscript, ast.Call)):
                    table.setdefault(c.fn, []).append(node)
        return table.get(fn, [])

    def code(self, node: ast.AST) -> str:
        return self.src.code(node).strip()

    def qualname(self, node: ast.AST) -> str | None:
        """The canonical qualified name of a name or attribute chain (see `canonical`)."""
        key = id(node)
        hit = self._qualname_cache.get(key, _MISSING)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        names = self.names.qualnames(node)
        out = None
        if len(names) == 1:
            out = canonical(names[0])
        elif names:
            best = sorted(names)
            out = canonical(best[0])
            for n in best:
                if n.startswith(("anodize", "math.", "builtins.")):
                    out = canonical(n)
                    break
        self._qualname_cache[key] = out
        return out

    def kernels(self) -> Iterator[FunctionInfo]:
        return (f for f in self.functions.values() if f.kind == "kernel")

    def summary(self, fn: FunctionInfo) -> KernelSummary:
        """What a launch site reads of a kernel (once per kernel: three launch-site rules and
        the project's table ask; the model is complete once built)."""
        hit = self._summaries.get(fn)
        if hit is None:
            hit = self._summaries[fn] = self._summary(fn)
        return hit

    def _summary(self, fn: FunctionInfo) -> KernelSummary:
        params = []
        for p in fn.params.values():
            kind = p.slice_kind.name if p.slice_kind else (p.scalar or "?")
            params.append((p.name, kind))
        bundles = getattr(fn.node, "_az_bundles", None)
        launch: list[tuple[str, str, tuple[tuple[str, str], ...]]] = []
        if bundles and all(bundles.values()):  # the signature as launched: a bundle's fields under its parameter
            kinds = dict(params)
            classes = getattr(fn.node, "_az_bundle_classes", {})
            for name, kind in params:
                owner = next((b for b, fields in bundles.items() if name in fields), None)
                if owner is None:
                    launch.append((name, kind, ()))
                elif name == bundles[owner][0]:
                    launch.append((owner, classes.get(owner, ""), tuple((f, kinds[f]) for f in bundles[owner])))
        if bundles or any(k.startswith("@") for _, k in params):
            # a bundle or a record by value is one argument at the launch site but several
            # parameters here (language/bundles.py): the rules binding arguments by position skip it
            params = []
        c = fn.contract
        return KernelSummary(
            fn.name,
            self.path,
            tuple(params),
            c is not None,
            c.domain if c else None,
            c.block if c else None,
            self.src.name_span(fn.node),
            tuple(launch),
        )

    def callees_of(self, fn: FunctionInfo) -> list[FunctionInfo]:
        """`fn` and every helper it calls, transitively."""
        out: list[FunctionInfo] = []
        todo = [fn]
        while todo:
            f = todo.pop()
            if f in out:
                continue
            out.append(f)
            todo.extend(g for _, g in f.helper_calls)
        return out

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        body = self.tree.body
        for top, stmt in enumerate(body):
            if isinstance(stmt, ast.Import):
                if any(a.name.split(".")[0] == "anodize" for a in stmt.names):
                    self.imports_anodize = True
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.module is not None and stmt.module.split(".")[0] == "anodize":
                    self.imports_anodize = True
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                info = self._function(stmt)
                info.top = top
                self.functions[info.name] = info
                self.by_node[stmt] = info
            elif isinstance(stmt, ast.ClassDef):
                # kernels kept as static methods of a top-level class: `Holder.k`
                for inner in stmt.body:
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        info = self._function(inner)
                        info.top = top
                        if info.kind != "plain":
                            info.name = f"{stmt.name}.{info.name}"
                            self.functions[info.name] = info
                            self.by_node[inner] = info
        # `k = az.kernel(f)`, `k = Kernel(f)`, `k = az.launch_contract(...)(az.kernel(f))` at module
        # level: `k` names `f` (whose kind the front end's `function_kind` already says)
        for stmt in body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                first = wrapped_function(self.front.symbols, stmt.value)
                if first is not None and first.id in self.functions:
                    target = self.functions[first.id]
                    for t in stmt.targets:
                        if isinstance(t, ast.Name) and t.id not in self.functions:
                            self.functions[t.id] = target
        # every device function, also one whose name a later `def` took over
        for fn in list(dict.fromkeys([*self.by_node.values(), *self.functions.values()])):
            if fn.is_device:
                analyze(self, fn)

    def _function(self, node: ast.FunctionDef) -> FunctionInfo:
        # what the front end says: decorators through aliases, and calls that wrap `node` at
        # module level (`k = Kernel(f)`, `k = az.launch_contract(...)(az.kernel(f))`)
        syms = self.front.symbols
        kind = syms.function_kind(node)
        kdeco = None
        contract = None
        for d in syms.decorators(node):
            q = syms.decorator_kind(d)
            if kdeco is None and ((q == "kernel" and not isinstance(syms.decorator_node(d), ast.Call)) or q == "tile_kernel"):
                kdeco = d
            elif q == "launch_contract" and contract is None:
                contract = self._contract(syms.decorator_node(d), node)
        params: dict[str, ParamInfo] = {}
        a = node.args
        for p in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            params[p.arg] = self._param(p)
        info = FunctionInfo(node.name, node, kind, params, contract, kdeco)
        if kind != "plain":  # a plain function's body is never analysed
            self._scope_facts(info)
        return info

    def _scope_facts(self, info: FunctionInfo) -> None:
        """The names a device function binds and declares global."""
        globals_: set[str] = set()
        if self._declares:
            for stmt in statements(info.node.body):
                if isinstance(stmt, (ast.Global, ast.Nonlocal)):
                    globals_.update(stmt.names)
        info.locals = self.names.function_locals(info.node) | frozenset(info.params)
        info.globals_declared = frozenset(globals_)

    def _param(self, p: ast.arg) -> ParamInfo:
        kind, skind, scalar = annotation_kind(self.front.symbols, p.annotation)
        if kind == "slice":
            return ParamInfo(p.arg, p, "slice", SLICE_KINDS[skind], scalar)  # type: ignore[index]
        if kind == "scalar":
            return ParamInfo(p.arg, p, "scalar", scalar=scalar)
        if kind == "witness":
            return ParamInfo(p.arg, p, "witness", domain=int(scalar or 0))
        if kind == "local":
            return ParamInfo(p.arg, p, "local", scalar=scalar)
        return ParamInfo(p.arg, p, "bad")

    def _contract(self, deco: ast.expr, node: ast.FunctionDef) -> ContractInfo:
        """The decorator's parts, with domain and block as the front end's one reading has them."""
        call = deco if isinstance(deco, ast.Call) else None
        args: dict[str, ast.keyword] = {}
        if call is not None:
            for kw in call.keywords:
                if kw.arg is not None:
                    args[kw.arg] = kw
        contract, _ = self.front.contract(node)
        if contract is None:
            return ContractInfo(deco, call, args, None, None)
        return ContractInfo(deco, call, args, contract.domain, contract.block)
