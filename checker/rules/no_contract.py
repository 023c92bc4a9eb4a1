"""Forbids the safe launch `k[config](...)` of a kernel that has no launch contract."""

from __future__ import annotations

import ast

from anodize.language import messages
from .base import HostRule


class NoContract(HostRule):
    """Forbids the safe launch `k[config](...)` of a kernel that has no launch contract."""

    CODE = "az-no-contract"
    ORDER = 140
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[f32]) -> None:
    pass

@kernel
def raw(c: DisjointSlice[f32]) -> None:
    pass

def main(c: object) -> None:
    k[az.LaunchConfig.for_num_elems(10)](c)
    raw.unsafe_launch(az.LaunchConfig.for_num_elems(10), c)
""",
    ]
    INVALID = [
        """
@kernel
def raw(c: DisjointSlice[f32]) -> None:
    pass

def main(c: object) -> None:
    raw[az.LaunchConfig.for_num_elems(10)](c)  # E: az-no-contract
""",
    ]

    def visit_Subscript(self, node: ast.Subscript) -> None:
        k = self.kernel_at(node.value)
        if k is None or k.has_contract:
            return
        self.report(messages.no_contract(self.span(node), k.name, k.span))
