"""Forbids a witness of the wrong index space for the kernel's launch domain."""

from __future__ import annotations

import ast

from anodize.language import messages
from anodize.language.intrinsics import GRID_STRIDE
from .base import Rule


class IndexDomain(Rule):
    """Forbids a witness of the wrong index space for the kernel's launch domain."""

    CODE = "az-index-domain"
    ORDER = 60
    VALID = [
        """
@launch_contract(domain=2, block=(16, 16))
@kernel
def k(out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    out[ij] = 1.0
""",
    ]
    INVALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()  # E: az-index-domain
    out[ij] = 1.0

@func
def idx() -> Index1D:
    return thread.index_1d()  # E: az-index-domain

@launch_contract(domain=2, block=(16, 16))
@kernel
def k2(c: DisjointSlice[f32]) -> None:
    i = idx()  # E: az-index-domain
    c[i] = 1.0
""",
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None or not fn.is_device:
            return
        seen: set[tuple[ast.AST, int]] = set()
        first: dict[int, ast.AST] = {}
        direct: list[tuple[ast.AST, int, str | None]] = [(c, d, None) for c, d in fn.witness_uses]
        via: list[tuple[ast.AST, int, str | None]] = []
        for hcall, h in fn.helper_calls:
            for d in h.domains_used():
                via.append((hcall, d, h.name))
        domain = fn.domain if fn.kind == "kernel" else None
        if domain is not None:
            if all(d == domain for _, d, _ in direct + via):
                return
        elif fn.contract is not None or len({d for _, d, _ in direct + via}) < 2:
            return  # nothing to report: skip the positions that ordering the sites needs
        contract_span = None
        if fn.contract is not None and "domain" in fn.contract.args:
            contract_span = self.span(fn.contract.args["domain"])
        for site, d, helper in sorted(direct + via, key=lambda t: (self.span(t[0]).line, self.span(t[0]).col)):
            if (site, d) in seen:
                continue
            seen.add((site, d))
            maker = f"thread.index_{d}d()"
            callee = self.model.callees.get(site) if isinstance(site, ast.Call) else None
            if callee is not None and callee.tag == GRID_STRIDE:
                maker = "thread.grid_stride()"
            elif callee is not None and callee.name == "thread.block_witness_1d":
                maker = "thread.block_witness_1d()"
            elif callee is not None and callee.kind == "tile":  # a tile program id
                maker = f"{callee.name}()"
            elif callee is not None and callee.kind == "thread_tile":
                maker = "thread.tile_2d()"
            if domain is not None:
                if d != domain:
                    self.report(messages.index_domain(self.span(site), maker, d, domain, contract_span, via=helper))
            else:
                first.setdefault(d, site)
                others = [first[o] for o in sorted(first) if o != d and first[o] is not site]
                if others and fn.contract is None:
                    self.report(messages.index_domain_mixed(self.span(site), self.span(others[0])))
