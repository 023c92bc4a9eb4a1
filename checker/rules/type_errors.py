"""Reports what the one typed front end finds in a kernel: type errors, and every other error compile raises."""

from __future__ import annotations

import ast
from dataclasses import replace

from anodize.language.diagnostics import Diagnostic

from .base import Rule


class Typing(Rule):
    """Reports the typed front end's diagnostics (`az-type` and every error compile raises)."""

    CODE = "az-type"
    ORDER = 170
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    if i in c:
        x = a[i] * 2.0
        c[i] = x + f32(n)
""",
    ]
    INVALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * 2.0  # E: az-type

@launch_contract(domain=1, block=256)
@kernel
def k2(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[1.5]  # E: az-type
""",
    ]

    def leave_Module(self, node: ast.Module) -> None:
        front = self.model.front
        for fdef in front.kernels():
            # a generic kernel is typed once per member of its type variables' constraints
            # (integer widths change what type-checks); each error is reported once
            members = front.members(fdef)
            seen: dict[tuple[str, object, str], tuple[Diagnostic, list[str]]] = {}
            for spec in members:
                for d in front.typed(fdef, spec).diagnostics:
                    hit = seen.setdefault((d.code, d.span, d.message), (d, []))
                    hit[1].append(", ".join(f"{n} = {v}" for n, v in spec))
            for d, where in seen.values():
                if len(where) < len(members):  # only some members: say which
                    d = replace(d, notes=(*d.notes, "when " + "; when ".join(where)))
                self.rc.report_typed(d)
