"""Forbids a malformed `@launch_contract`."""

from __future__ import annotations

import ast

from .base import Rule


class Contract(Rule):
    """Forbids a malformed `@launch_contract`."""

    CODE = "az-contract"
    ORDER = 130
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
@launch_contract(domain=4, block=256)  # E: az-contract
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
        # the one reading of a contract (anodize/language/contract_schema.py): what it reports
        # is what compile reports, and its Contract is what codegen and the runtime use
        if self.model.by_node.get(node) is None:
            return
        _, diags = self.model.front.contract(node)  # type: ignore[arg-type]
        for d in diags:
            self.report(d)
