"""Forbids indexing a `DisjointSlice*` at anything but this thread's witness of its index space,
and accessing one output through two index spaces (one mapping per output)."""

from __future__ import annotations

import ast
from anodize.language.records import dataclass

from anodize.language import messages
from anodize.language.vocab import SLICE_KINDS, TILE_MAKER
from ..kernel_interp import bind_args, substitute
from ..kernel_values import FunctionInfo, Space, index_elements
from ..tile_model import TILE_SPACE
from .base import Rule, RuleContext, slice_kinds

_DISJOINT = {k.name: k.rank for k in SLICE_KINDS.values() if k.disjoint}


@dataclass(frozen=True)
class _Access:
    """One read or write of an output (`param` of the function summarised) through `space`:
    at `node` in that function, `via` the helper whose body holds the access itself."""

    param: str
    space: Space
    node: ast.AST
    via: str | None


class DisjointIndex(Rule):
    """Forbids indexing a `DisjointSlice*` at anything but this thread's one witness mapping for it."""

    CODE = "az-disjoint-index"
    ORDER = 40
    VALID = [
        """
@launch_contract(domain=1, block=256)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], d: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    j = i
    if j in c and i in d:
        c[j] = a[i]
        d[i] = c[i] * 2.0
        c[i] += 1.0

@launch_contract(domain=2, block=(16, 16))
@kernel
def k2(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out:
        out[ij] = m[ij.row, ij.col]

@launch_contract(domain=2, block=(16, 16))
@kernel
def k3(out: DisjointSlice2D[f32]) -> None:
    t = thread.tile_2d(8, 8, 4, 4)
    for r in range(8):
        for s in range(8):
            ij = t.at(r, s)
            if ij in out:
                out[ij] = 1.0
""",
        """
@az.func
def put(c: DisjointSlice[f32], i: Index1D, v: f32) -> None:
    c[i] = v

@launch_contract(domain=1, block=256, requires=lambda a, c, d: len(a) == len(c) and len(a) == len(d))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], d: DisjointSlice[f32], n: i32) -> None:
    for r in range(n):
        for i in thread.grid_stride(c):
            put(c, i, a[i])
            c[i] += 1.0
    for j in thread.grid_stride(d):
        d[j] = a[j]
""",
        """
@launch_contract(domain=2)
@az.tile_kernel
def t(a: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    pid = az.tile.program_id_2d()
    x = az.tile.load(a, (pid.row * 16 - 1, pid.col * 16), (16, 16))
    mine = az.tile.load(c, pid, (16, 16))
    az.tile.store(c, pid, x + mine)
""",
    ]
    INVALID = [
        """
@kernel
def k(c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    c[i + 1] = 1.0  # E: az-disjoint-index
    c[0] = 2.0  # E: az-disjoint-index
    x = c[i - 1]  # E: az-disjoint-index
    for j in range(n):
        c[j] = 0.0  # E: az-disjoint-index
    i = i.get() * 2  # E: az-type
    c[i] = 3.0  # E: az-disjoint-index
""",
        """
@kernel
def k(out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    out[ij.col, ij.row] = 1.0  # E: az-disjoint-index

@launch_contract(domain=2, block=(16, 16))
@kernel
def k2(out: DisjointSlice2D[f32]) -> None:
    t = thread.tile_2d(4, 4)
    u = thread.tile_2d(4, 4, 2, 2)
    out[t.at(0, 0)] = 1.0
    out[u.at(0, 0)] = 1.0  # E: az-disjoint-index
""",
        """
@az.func
def put(c: DisjointSlice[f32], i: Index1D, v: f32) -> None:
    c[i] = v

@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    for i in thread.grid_stride(c):
        c[i] = a[i]
    for j in thread.grid_stride(c):
        c[j] = c[j] * 2.0  # E: az-disjoint-index
    w = thread.index_1d()
    if w in c:
        put(c, w, 0.0)  # E: az-disjoint-index
""",
        """
@launch_contract(domain=2)
@az.tile_kernel
def t(a: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    pid = az.tile.program_id_2d()
    x = az.tile.load(a, pid, (16, 16))
    az.tile.store(c, pid, x)
    az.tile.store(c, (pid.row, pid.col + 1), x)  # E: az-disjoint-index
    y = az.tile.load(c, (pid.row * 16 + 16, 0), (16, 16))  # E: az-disjoint-index
    az.tile.store(c, pid, az.tile.load(a, pid, (16, 32)))  # E: az-disjoint-index
""",
    ]

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__(ctx)
        self._summaries: dict[FunctionInfo, list[_Access]] = {}

    # -- one mapping per output ---------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None or fn.kind != "kernel":
            return
        first: dict[str, _Access] = {}
        reported: set[tuple[str, Space]] = set()  # the first access through each further space
        for acc in self._accesses(fn, ()):
            p = fn.params.get(acc.param)
            if p is None or p.slice_kind is None or p.slice_kind.name not in _DISJOINT:
                continue
            head = first.setdefault(acc.param, acc)
            if acc.space == head.space or (acc.param, acc.space) in reported:
                continue
            reported.add((acc.param, acc.space))
            self.report(
                messages.disjoint_mixed_mapping(
                    self.span(acc.node), acc.param, p.slice_kind.name, self._show(acc.space),
                    self._show(head.space), self.span(head.node), via=acc.via,
                )
            )

    def _accesses(self, fn: FunctionInfo, stack: tuple[FunctionInfo, ...]) -> list[_Access]:
        """Every access of `fn`'s slice parameters through a witness, in source order, with the
        accesses inside the helpers it calls put at the calls (parameters replaced by arguments)."""
        hit = self._summaries.get(fn)
        if hit is not None:
            return hit
        if fn in stack:
            return []  # recursion (rejected elsewhere)
        m = self.model
        out: list[_Access] = []
        for node in m.evaluated(fn):
            if isinstance(node, ast.Subscript):
                base = m.values.get(node.value)
                idx = index_elements(node)
                if base is None or base.kind != "slice" or idx is None or len(idx) != 1:
                    continue
                w = m.values.get(idx[0])
                if w is None or w.kind != "witness":
                    continue
                for name in sorted(base.params & set(fn.params)):
                    for sp in _in_order(w.spaces):
                        out.append(_Access(name, sp, node, None))
            elif isinstance(node, ast.Call):
                callee = m.callees.get(node)
                if callee is not None and callee.kind == "tile" and callee.name in ("tile.store", "tile.load") and node.args:
                    base = m.values.get(node.args[0])
                    if base is not None and base.kind == "slice":  # a tile of an output: the tile space
                        for name in sorted(base.params & set(fn.params)):
                            out.append(_Access(name, TILE_SPACE, node, None))
                    continue
                if callee is not None and callee.kind == "tile_io" and node.args and isinstance(node.func, ast.Attribute):
                    base = m.values.get(node.args[0])  # t.store(out, v) / t.load(x, v, fill): through t's space
                    tile = m.values.get(node.func.value)
                    if base is not None and base.kind == "slice" and tile is not None:
                        for name in sorted(base.params & set(fn.params)):
                            for sp in _in_order(tile.spaces):
                                out.append(_Access(name, sp, node, None))
                    continue
                if callee is None or callee.kind != "helper" or callee.fn is None:
                    continue
                h = callee.fn
                args = dict(bind_args(h, node))
                for acc in self._accesses(h, stack + (fn,)):
                    a = args.get(acc.param)
                    v = m.values.get(a) if a is not None else None
                    if v is None or v.kind != "slice":
                        continue
                    for sp in _in_order(substitute(frozenset([acc.space]), h, node, m.values)):
                        for name in sorted(v.params & set(fn.params)):
                            out.append(_Access(name, sp, node, acc.via or h.name))
        out.sort(key=lambda a: (getattr(a.node, "lineno", 0), getattr(a.node, "col_offset", 0)))
        self._summaries[fn] = out
        return out

    def _show(self, sp: Space) -> str:
        if sp.kind == "grid_stride" and sp.node is not None:
            text = f"the grid-stride loop `{self.model.code(sp.node)}` (line {getattr(sp.node, 'lineno', '?')})"
            code = self.model.code(sp.node.args[0]) if isinstance(sp.node, ast.Call) and sp.node.args else ""
            renamed = sorted((p, b) for p, b in sp.binding if p != b and "." not in b)
            if renamed:  # a helper's loop: which slices this call gives it
                return text + " with " + ", ".join(f"`{p}` = `{b}`" for p, b in renamed)
            over = [n for n in sp.over if "." not in n]
            return text + (f" over `{over[0]}`" if len(over) == 1 and over[0] != code else "")
        if sp.kind == "tile":
            return "the program's tile (`tile.store` / `tile.load`)"
        if sp.kind == "param":
            return f"witness parameter `{sp.param}`"
        if sp.kind == TILE_MAKER:
            return f"`thread.{TILE_MAKER}({sp.param})`"
        return f"`thread.{sp.kind}()`"

    # -- indices ---------------------------------------------------------------------------------
    def visit_Subscript(self, node: ast.Subscript) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        kinds = [(n, k) for n, k in slice_kinds(fn, self.val(node.value)) if k in _DISJOINT]
        if not kinds:
            return
        store = node in self.model.stores
        idx = index_elements(node)
        if idx is None:
            return  # slicing: az-unsupported
        for name, kind in kinds:
            d = _DISJOINT[kind]
            v = self.val(idx[0]) if len(idx) == 1 else None
            if v is not None and v.kind == "witness" and v.domain == d:
                continue
            index_text = ", ".join(self.model.code(e) for e in idx)
            self.report(
                messages.disjoint_index(
                    self.span(node), name, kind, index_text, "written" if store else "read", _why(v, len(idx)),
                    self.decl(fn, name), domain=d, n=len(idx), have=getattr(v, "domain", 0), want=d,
                )
            )

    def visit_Compare(self, node: ast.Compare) -> None:
        fn = self.fn_of(node)
        if fn is None:
            return
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)):
                for name, kind in slice_kinds(fn, self.val(right)):
                    if kind in _DISJOINT:
                        d = _DISJOINT[kind]
                        v = self.val(left)
                        if v is None or v.kind != "witness" or v.domain != d:
                            self.report(
                                messages.disjoint_index(
                                    self.span(node), name, kind, self.model.code(left), "tested", _why(v, 1),
                                    self.decl(fn, name), domain=d, n=1, have=getattr(v, "domain", 0), want=d,
                                )
                            )
            left = right

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.model.callees.get(node)
        if callee is not None and callee.kind == "tile":
            self._tile_access(node, callee.name)
            return
        for s in self.slices_passed(node):
            if s.kind in _DISJOINT and (s.param.slice_kind is None or s.param.slice_kind.name != s.kind):
                self.report(messages.disjoint_passed(self.span(s.arg), s.name, s.kind, s.helper.name, s.pname, s.annotation))


    def _tile_access(self, node: ast.Call, name: str) -> None:
        """`tile.store(dst, pid, v)` needs this program's id; `tile.load` of an output too."""
        fn = self.fn_of(node)
        if fn is None or name not in ("tile.store", "tile.load") or len(node.args) < 2:
            return
        for pname, kind in slice_kinds(fn, self.val(node.args[0])):
            if kind not in _DISJOINT:
                continue
            v = self.val(node.args[1])
            if v is not None and v.kind == "tile_id" and v.domain == _DISJOINT[kind]:
                continue
            self.report(messages.tile_ownership(
                self.span(node.args[1]), _tile_key(name), help="tile-store-own",
                name=pname, index=self.model.code(node.args[1]), rank=_DISJOINT[kind],
            ))


def _tile_key(call: str) -> str:
    """The message of an access of an output outside the program's tile (a catalogue key)."""
    return "tile-store-not-own" if call == "tile.store" else "tile-load-foreign"


def _in_order(spaces: frozenset[Space]) -> list[Space] | frozenset[Space]:
    """The spaces in `_space_order` (one space is in order: its sort key, strings joined, is
    not made)."""
    return spaces if len(spaces) < 2 else sorted(spaces, key=_space_order)


def _space_order(sp: Space) -> tuple[str, int, int, str]:
    n = sp.node
    detail = ",".join(sorted(sp.over)) + ";" + ",".join(f"{p}={b}" for p, b in sorted(sp.binding))
    return (sp.kind, getattr(n, "lineno", 0), getattr(n, "col_offset", 0), sp.param + detail)


def _why(v, n: int) -> str:  # type: ignore[no-untyped-def]
    """Why the index is not this thread's witness: a key of the catalogue's PHRASES
    (filled with `n` indices, the witness's domain `have` and the slice's `want`)."""
    if v is None:
        return "not-a-witness" if n == 1 else "tuple-not-witness"
    if v.kind == "witness":
        return "witness-wrong-domain"
    return "plain-int-not-witness"
