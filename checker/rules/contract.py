"""Forbids a malformed `@launch_contract`."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.contract import BinOp, Len, Neg, Param, RequiresSyntaxError, Shape, parse_requires
from anodize.language.diagnostics import Span
from ..kernel_model import ContractInfo, FunctionInfo, literal_dims, literal_int
from anodize.language.vocab import MAX_THREADS_PER_BLOCK
from anodize.language.syntax import in_source_order
from .base import Rule

_KNOWN = {"domain", "block", "requires", "min_compute_capability"}
_INT_SCALARS = {"i32", "i64", "u32", "u64"}


class Contract(Rule):
    """Forbids a malformed `@launch_contract`."""

    CODE = "az-contract"
    VALID = [
        """
@launch_contract(domain=1, block=256, requires=lambda a, c, n: len(a) == len(c) and n <= len(a))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    pass

@kernel
@launch_contract(domain=2, block=(16, 16), requires=lambda m, out: m.shape[0] == out.shape[0])
def k2(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    pass
""",
    ]
    INVALID = [
        """
@launch_contract(domain=3, block=256)  # E: az-contract
@kernel
def k(c: DisjointSlice[f32]) -> None:
    pass

@launch_contract(domain=1, block=(32, 64))  # E: az-contract
@kernel
def k2(c: DisjointSlice[f32]) -> None:
    pass

@launch_contract(domain=2, block=(64, 32))  # E: az-contract
@kernel
def k3(c: DisjointSlice2D[f32]) -> None:
    pass

@launch_contract(domain=1, requires=lambda c, z: len(c) > z)  # E: az-contract
@kernel
def k4(c: DisjointSlice[f32]) -> None:
    pass

@launch_contract(domain=1, requires=lambda c: len(c) > 0 or len(c) < 9)  # E: az-contract
@kernel
def k5(c: DisjointSlice[f32]) -> None:
    pass

@launch_contract(domain=1)  # E: az-contract
@func
def h(x: f32) -> f32:
    return x
""",
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None:
            return
        src = self.model.src
        contracts = [d for d in node.decorator_list if self._is_contract(d)]
        for extra in contracts[1:]:
            self._say(src.decorator_span(extra), "a kernel has at most one `@launch_contract`", "merge the two contracts")
        if fn.contract is None:
            return
        c = fn.contract
        deco = src.decorator_span(c.decorator)
        if fn.kind != "kernel":
            self._say(deco, f"`@launch_contract` on `{fn.name}`, which is not a `@kernel`", "add `@kernel`, or remove the contract")
            return
        if c.call is None:
            self._say(deco, "`@launch_contract` needs arguments", "write `@launch_contract(domain=1, block=256)`")
            return
        for a in in_source_order(c.call):
            if not isinstance(a, ast.keyword) or a.arg is None:
                self._say(self.span(a), "`@launch_contract` takes keyword arguments only", "write `domain=...`, `block=...`")
            elif a.arg not in _KNOWN:
                self._say(src.keyword_name_span(a), f"unknown contract argument `{a.arg}`", "use `domain`, `block`, `requires` or `min_compute_capability`")
        self._domain_block(fn, c)
        if "requires" in c.args:
            self._requires(fn, c.args["requires"].value)
        if "min_compute_capability" in c.args:
            v = literal_dims(c.args["min_compute_capability"].value)
            if v is not None and (len(v) != 2 or min(v) < 0):
                self._say(c.args["min_compute_capability"].value, "`min_compute_capability` must be a `(major, minor)` pair")


    def _is_contract(self, d: ast.expr) -> bool:
        return self.model.qualname(d.func if isinstance(d, ast.Call) else d) == "az.launch_contract"

    def _say(self, node: ast.AST | Span, msg: str, help: str | None = None) -> None:
        span = node if isinstance(node, Span) else self.model.src.expr_span(node)
        self.report(messages.contract(span, msg, help=help))

    def _domain_block(self, fn: FunctionInfo, c: ContractInfo) -> None:
        if "domain" not in c.args:
            self._say(c.call, "the contract has no `domain`", "add `domain=1` (or 2 for `thread.index_2d()`)")  # type: ignore[arg-type]
            domain = None
        else:
            dv = c.args["domain"].value
            lit = literal_int(dv)
            if lit not in (1, 2):
                self._say(dv, f"`domain` must be the literal 1 or 2, not `{self.model.src.quote(dv)}`")
            domain = c.domain
        if "block" not in c.args:
            return
        bv = c.args["block"].value
        if isinstance(bv, ast.Constant) and bv.value is None:
            return
        dims = c.block
        if dims is None:
            if isinstance(bv, (ast.Tuple, ast.UnaryOp)) or (isinstance(bv, ast.Constant) and type(bv.value) is int):
                self._say(bv, "`block` must be an int or a tuple of int literals")
            return  # a named constant: the runtime checks it
        if any(x < 1 for x in dims):
            self._say(bv, "every `block` dimension must be at least 1")
            return
        rank = len(dims) if isinstance(bv, ast.Tuple) else 1
        while rank > 1 and dims[rank - 1] == 1 and domain == 1:
            break
        if domain is not None and rank != domain:
            self._say(bv, f"`block` has rank {rank} but `domain` is {domain}",
                      "a 1-D kernel takes `block=256`; a 2-D kernel takes `block=(bx, by)`")
        total = 1
        for x in dims:
            total *= x
        if total > MAX_THREADS_PER_BLOCK:
            self._say(bv, f"`block` has {total} threads; a block holds at most {MAX_THREADS_PER_BLOCK}")

    def _requires(self, fn: FunctionInfo, node: ast.expr) -> None:
        if not isinstance(node, ast.Lambda):
            self._say(node, "`requires` must be a `lambda` over the kernel's parameters")
            return
        text = self.model.src.quote(node)
        base = self.span(node)
        try:
            tree = ast.parse("(" + text + ")", mode="eval")
        except SyntaxError:
            self._say(node, "`requires` does not parse")
            return
        lam = tree.body
        assert isinstance(lam, ast.Lambda)
        try:
            req = parse_requires(lam, "(" + text + ")")
        except RequiresSyntaxError as e:
            self._say(self._map(base, e.node), e.message)
            return
        for a in lam.args.args:
            if a.arg not in fn.params:
                self._say(self._map(base, a), f"`requires` names `{a.arg}`, which is not a parameter of `{fn.name}`",
                          f"use the parameter names of `{fn.name}`")
                return
        for rel in req.relations:
            for term in _walk(rel.left) + _walk(rel.right):
                p = fn.params.get(getattr(term, "param", getattr(term, "name", "")))
                if p is None:
                    continue
                if isinstance(term, Len) and p.kind != "slice":
                    self._say(node, f"`len({p.name})` in `requires`, but `{p.name}` is not a slice")
                elif isinstance(term, Shape) and not (p.slice_kind and p.slice_kind.rank == 2):
                    self._say(node, f"`{p.name}.shape[{term.axis}]` in `requires`, but `{p.name}` is not a 2-D slice", f"use `len({p.name})`")
                elif isinstance(term, Param) and not (p.kind == "scalar" and p.scalar in _INT_SCALARS):
                    self._say(node, f"`{p.name}` in `requires` must be an integer scalar parameter",
                              f"use `len({p.name})`" if p.kind == "slice" else None)

    def _map(self, base: Span, node: ast.AST) -> Span:
        """Map a position in `(<lambda source>)` back to the file."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 1)
        end_line = getattr(node, "end_lineno", line) or line
        end_col = getattr(node, "end_col_offset", col + 1) or col + 1

        def at(ln: int, c: int) -> tuple[int, int]:
            if ln == 1:
                return base.line, base.col + c - 1
            return base.line + ln - 1, c

        sl, sc = at(line, col)
        el, ec = at(end_line, end_col)
        return Span(base.path, sl, sc, el, ec)


def _walk(e):  # type: ignore[no-untyped-def]
    if isinstance(e, BinOp):
        return _walk(e.left) + _walk(e.right)
    if isinstance(e, Neg):
        return _walk(e.operand)
    return [e]
