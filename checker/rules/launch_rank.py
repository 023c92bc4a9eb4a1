"""Forbids a launch configuration visibly of the wrong rank or block for the kernel's contract."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.launch_rules import launch_shape_problem
from ..kernel_values import KernelSummary, literal_dims
from .base import HostRule


class LaunchRank(HostRule):
    """Forbids a launch configuration visibly of the wrong rank or block for the kernel's contract."""

    CODE = "az-launch-rank"
    ORDER = 160
    VALID = [
        """
@launch_contract(domain=2, block=(16, 16))
@kernel
def k(c: DisjointSlice2D[f32]) -> None:
    pass

@launch_contract(domain=1, block=128)
@kernel
def k1(c: DisjointSlice[f32]) -> None:
    pass

def main(c: object) -> None:
    cfg = az.LaunchConfig.for_shape((100, 100))
    k[cfg](c)
    k[az.LaunchConfig((7, 7), (16, 16))](c)
    k1[az.LaunchConfig.for_num_elems(100)](c)  # without `block`: the contract's
""",
    ]
    INVALID = [
        """
@launch_contract(domain=2, block=(16, 16))
@kernel
def k(c: DisjointSlice2D[f32]) -> None:
    pass

@launch_contract(domain=1, block=128)
@kernel
def k1(c: DisjointSlice[f32]) -> None:
    pass

def main(c: object) -> None:
    cfg = az.LaunchConfig.for_num_elems(100)
    k[cfg](c)  # E: az-launch-rank
    k1[az.LaunchConfig.for_num_elems(100, block=256)](c)  # E: az-launch-rank
    k[az.LaunchConfig.for_shape((10, 10), block=(32, 8))](c)  # E: az-launch-rank
""",
    ]

    def visit_Subscript(self, node: ast.Subscript) -> None:
        k = self.kernel_at(node.value)
        if k is None or not k.has_contract:
            return
        idx = node.slice
        if isinstance(idx, ast.Slice):
            return
        if isinstance(idx, ast.Tuple):
            # only `k[cfg,]` (one subscript, a trailing comma) can name a config; `k[a, b]` and
            # `k[(a, b)]` never do
            if len(idx.elts) != 1 or not self.model.code(idx).endswith(","):
                return
            idx = idx.elts[0]
            if isinstance(idx, ast.Starred):
                return
        self._check(node, idx, k)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "unsafe_launch" and (node.args or node.keywords):
            k = self.kernel_at(f.value)
            if k is not None and k.has_contract:
                self._check(node, _first_arg(node), k)

    def _config(self, e: ast.expr) -> tuple[int | None, tuple[int, ...] | None, ast.AST]:
        seen = 0
        while isinstance(e, ast.Name) and seen < 8:
            bound = self.binding(e.id)
            if bound is None:
                return None, None, e
            e, seen = bound[0], seen + 1
        if not isinstance(e, ast.Call):
            return None, None, e
        q = self.model.qualname(e.func) or ""
        args = {kw.arg: kw.value for kw in e.keywords if kw.arg is not None}
        # positional values in source order (`*x` and `**x` give their operand; `**x` always come last)
        pos = [a.value if isinstance(a, ast.Starred) else a for a in e.args]
        pos += [kw.value for kw in e.keywords if kw.arg is None]
        if q == "az.LaunchConfig.for_num_elems":
            b = args.get("block", pos[1] if len(pos) > 1 else None)
            # without `block`, the launch takes the contract's (runtime/config.py DefaultBlockConfig)
            return 1, None if b is None else literal_dims(b), e
        if q == "az.LaunchConfig.for_shape":  # rank: the number of extents of the shape
            sh = args.get("shape", pos[0] if pos else None)
            b = args.get("block", pos[1] if len(pos) > 1 else None)
            rank = len(sh.elts) if isinstance(sh, ast.Tuple) else (len(b.elts) if isinstance(b, ast.Tuple) else None)
            return rank, None if b is None else literal_dims(b), e
        if q == "az.LaunchConfig":
            g = args.get("grid", pos[0] if pos else None)
            b = args.get("block", pos[1] if len(pos) > 1 else None)
            ranks = [_rank(x) for x in (g, b) if x is not None]
            known = [r for r in ranks if r is not None]
            rank = max(known) if known and (max(known) >= 2 or len(known) == len(ranks) == 2) else None
            block = literal_dims(b) if b is not None else None
            return rank, block, e
        return None, None, e

    def _check(self, site: ast.AST, cfg: ast.expr, k: KernelSummary) -> None:
        rank, block, _ = self._config(cfg)
        if k.domain is None:
            return
        p = launch_shape_problem(k.domain, k.block, rank, block)  # the runtime's decision too
        if p is None:
            return
        if p.kind == "rank":
            self.report(messages.launch_rank_mismatch(self.span(site), k.name, rank, k.domain, k.span))  # type: ignore[arg-type]
        elif p.kind == "block":
            self.report(messages.launch_block_mismatch(self.span(site), k.name, block, k.block, k.span))  # type: ignore[arg-type]
        else:
            self.report(messages.launch_extra_dim(self.span(site), k.name, p.what, p.axis, p.size, k.domain, k.span))


def _first_arg(call: ast.Call) -> ast.expr:
    """The value of the call's first argument in source order (`*x`/`**x`: `x`)."""
    if call.keywords:
        kw = call.keywords[0]
        if not call.args or (kw.lineno, kw.col_offset) < (call.args[0].lineno, call.args[0].col_offset):
            return kw.value  # only keywords, or `f(a=1, *b)`
    first = call.args[0]
    return first.value if isinstance(first, ast.Starred) else first


def _rank(e: ast.expr) -> int | None:
    if isinstance(e, ast.Tuple):
        return len(e.elts)
    if isinstance(e, ast.Constant):
        return 1 if type(e.value) is int else None
    if isinstance(e, (ast.BinOp, ast.UnaryOp)):
        return 1
    return None

