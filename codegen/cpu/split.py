"""The CPU backend's plan for a kernel with barriers, shared memory or warp operations: the
typed IR split at its synchronisation points into regions that loop over the block's
threads (work-item loops, as POCL and the CUDA-on-CPU compilers form them).

Two passes over the typed model (`anodize/language/ir.py`), both pure:

1. `normalize.normalize` brings every synchronisation point to statement level
   (inlining synchronising helpers, hoisting warp operations out of expressions).
2. `structure` cuts each statement list at its split points, block level first (barriers,
   block collectives), then, inside each block region that has them, warp level (warp
   operations, `warp.reduce`, `warp.sync`).  A statement that contains a split point is
   block- (warp-) uniform by the checker's az-barrier-divergence (az-warp-divergence)
   rule, so its condition or trip count is evaluated by every thread into a per-thread
   slot and decided once from the first live thread's slot (codegen/cpu/regions.py also
   checks that the live threads agree).  Everything else is a `Region`: a run of
   statements executed for each thread in turn.

A value that lives across regions is kept in a per-thread context array; `classify`
finds the locals that one region alone touches (and that no split loop repeats), which
stay ordinary registers.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import field
from anodize.language.records import dataclass

from anodize.language import ir
from anodize.language.ir_walk import node_fields
from anodize.language.types import BOOL, ScalarTy, Ty
from anodize.language.vocab import BLOCK_COLLECTIVES

from ..llvm.lower import value_type

from .normalize import (  # noqa: F401  (Unsplittable, RET, Scope, Leave: re-exported)
    RET,
    Leave,
    Normalizer,
    Scope,
    Unsplittable,
    WarpX,
    exprs_of,
    normalize,
    sub_bodies,
    walk,
    walk_expr,
)


# ---- the split plan -----------------------------------------------------------------------


@dataclass
class Region:
    stmts: list
    index: int = -1
    in_loop: bool = False


@dataclass
class WarpRegion:
    """A block region with warp operations: for each warp, `body` (warp-level nodes)."""

    body: list


@dataclass
class Sync:
    """A barrier (block level) or `warp.sync()` (warp level): only a region boundary."""


@dataclass
class UIf:
    cond: str  # a per-thread bool, assigned in the region before
    then: list
    orelse: list


@dataclass
class UWhile:
    cond: str
    body: list
    tail: list  # re-evaluates `cond` (after a `continue` too)
    brk: int
    cont: int


@dataclass
class UFor:
    var: str
    ty: ScalarTy
    start: str
    stop: str
    step: str
    counter: str  # a uniform slot, read by the body's first region
    body: list
    brk: int
    cont: int


@dataclass
class UScope:
    id: int
    body: list


@dataclass
class Coll:
    """A block collective (block level) or `warp.reduce` (warp level) of the per-thread
    values in `src`; the result goes to `dst` (uniform or per-thread) for the next region."""

    c: ir.Collective
    src: str
    dst: str


@dataclass
class Xchg:
    """A warp shuffle or vote over the warp's `src` (and `k`) slots, into `dst`."""

    op: ir.WarpOp
    src: str
    k: str
    dst: str


@dataclass
class Plan:
    kernel: ir.KernelIR  # the normalized kernel (locals include the hidden ones)
    nodes: list
    uniform: set[str] = field(default_factory=set)  # one slot per block
    hidden: set[str] = field(default_factory=set)  # per-thread, never read before written
    regions: list[Region] = field(default_factory=list)
    leaves: bool = False  # some thread may stop early (return, break, continue, helper return)
    arrays: dict = field(default_factory=dict)  # local array name -> LocalArrayTy (per-thread slots)


# ---- pass 2: structure --------------------------------------------------------------------


def _block_sync(s: object) -> bool:
    if isinstance(s, ir.Barrier):
        return True
    if isinstance(s, ir.Assign) and isinstance(s.value, ir.Collective):
        return s.value.kind in BLOCK_COLLECTIVES
    return any(_block_sync(x) for b in sub_bodies(s) for x in b)


def _warp_sync(s: object) -> bool:
    if isinstance(s, WarpX) or (isinstance(s, ir.Fence) and s.kind == "warp_sync"):
        return True
    if isinstance(s, ir.Assign) and isinstance(s.value, ir.Collective):
        return s.value.kind not in BLOCK_COLLECTIVES
    return any(_warp_sync(x) for b in sub_bodies(s) for x in b)


class Structurer:
    def __init__(self, k: ir.KernelIR, n: Normalizer):
        self.k = k
        self.n = n
        self.plan = Plan(k, [])

    def hidden(self, stem: str, ty: Ty) -> str:
        name = self.n.fresh(stem, ty)
        self.plan.hidden.add(name)
        return name

    def uniform(self, stem: str, ty: Ty) -> str:
        name = self.n.fresh(stem, ty)
        self.plan.uniform.add(name)
        return name

    def build(self, stmts: typing.Iterable, level: str) -> list:
        split = _block_sync if level == "block" else _warp_sync
        nodes: list = []
        for s in stmts:
            if split(s):
                nodes.extend(self.split(s, level))
            else:
                nodes.append(Region([s]))
        out: list = []
        for node in nodes:  # merge neighbouring regions
            if isinstance(node, Region) and out and isinstance(out[-1], Region):
                out[-1].stmts.extend(node.stmts)
            else:
                out.append(node)
        if level == "block":
            out = [WarpRegion(self.build(r.stmts, "warp")) if isinstance(r, Region) and any(_warp_sync(s) for s in r.stmts) else r for r in out]
        return out

    def split(self, s: object, level: str) -> list:
        sp = getattr(s, "span", None)
        if isinstance(s, (ir.Barrier, ir.Fence)):
            return [Sync()]
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Collective):
            c = s.value
            src = self.hidden("cv", c.value.ty)
            uniform = c.kind in ("warp.reduce", "block.reduce", "block.broadcast")
            dst = self.uniform("cr", c.ty) if uniform else self.hidden("cr", c.ty)
            return [Region([ir.Assign(src, c.value, sp)]), Coll(c, src, dst), Region([ir.Assign(s.name, ir.Local(dst, c.ty, sp), sp)])]
        if isinstance(s, WarpX):
            src = self.hidden("xv", s.op.args[0].ty)
            first = [ir.Assign(src, s.op.args[0], sp)]
            k = ""
            if len(s.op.args) > 1:
                k = self.hidden("xk", s.op.args[1].ty)
                first.append(ir.Assign(k, s.op.args[1], sp))
            dst = self.hidden("xr", s.op.ty)
            return [Region(first), Xchg(s.op, src, k, dst), Region([ir.Assign(s.dst, ir.Local(dst, s.op.ty, sp), sp)])]
        if isinstance(s, ir.If):
            c = self.hidden("c", BOOL)
            return [Region([ir.Assign(c, s.cond, sp)]), UIf(c, self.build(s.body, level), self.build(s.orelse, level))]
        if isinstance(s, ir.While):
            c = self.hidden("c", BOOL)
            ev = ir.Assign(c, s.cond, sp)
            brk, cont = next(self.n.ids), next(self.n.ids)
            body = self.build(s.body, level)
            if body and isinstance(body[-1], Region) and not any(isinstance(x, ir.Continue) for x in walk(s.body)):
                body[-1].stmts.append(ev)  # no `continue`: the last region re-evaluates the condition
                return [Region([ev]), UWhile(c, body, [], brk, cont)]
            return [Region([ev]), UWhile(c, body, [Region([ev])], brk, cont)]
        if isinstance(s, ir.ForRange):
            ty = self.k_var_ty(s.var)
            lo, hi, st = (self.hidden(x, ty) for x in ("lo", "hi", "st"))
            ctr = self.uniform("ctr", ty)
            brk, cont = next(self.n.ids), next(self.n.ids)
            first = ir.Assign(s.var, ir.Local(ctr, ty, sp), sp)
            ev = [ir.Assign(lo, s.start, sp), ir.Assign(hi, s.stop, sp), ir.Assign(st, s.step, sp)]
            return [Region(ev), UFor(s.var, ty, lo, hi, st, ctr, self.build((first,) + s.body, level), brk, cont)]
        if isinstance(s, Scope):
            return [UScope(s.id, self.build(s.body, level))]
        raise Unsplittable(f"a synchronisation point inside {type(s).__name__}")

    def k_var_ty(self, name: str) -> ScalarTy:
        for n, t in self.k.locals + tuple(self.n.new_locals):
            if n == name:
                assert isinstance(t, ScalarTy)
                return t
        raise KeyError(name)


def _number(nodes: list, plan: Plan, in_loop: bool) -> None:
    for node in nodes:
        if isinstance(node, Region):
            node.index = len(plan.regions)
            node.in_loop = in_loop
            plan.regions.append(node)
        elif isinstance(node, WarpRegion):
            _number(node.body, plan, in_loop)
        elif isinstance(node, UIf):
            _number(node.then, plan, in_loop)
            _number(node.orelse, plan, in_loop)
        elif isinstance(node, (UWhile, UFor)):
            _number(node.body, plan, True)
            if isinstance(node, UWhile):
                _number(node.tail, plan, True)
        elif isinstance(node, UScope):
            _number(node.body, plan, in_loop)


def names_in(stmts: typing.Iterable) -> set[str]:
    """Every local a run of statements reads or writes (helper bodies are their own)."""
    out: set[str] = set()
    for s in walk(stmts):
        # the local a statement assigns (`Assign.name`, a loop's `var`, ...): every string
        # field, so a statement kind added later is counted too (a non-local string is harmless)
        for f in node_fields(s.__class__):
            v = getattr(s, f)
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):  # several (tile.rows_plan.TileVecLoad)
                out.update(v)
        for e in exprs_of(s):
            out.update(x.name for x in walk_expr(e) if isinstance(x, (ir.Local, ir.LocalArrayRef)))
    return out


def local_arrays(body: tuple) -> dict:
    """name -> LocalArrayTy of the local arrays a (normalized) kernel declares; raises
    `Unsplittable` for an array read or written under a name no declaration gives (a helper's
    array parameter left un-inlined in a region would need its caller's slot)."""
    decls = {s.name: s.ty for s in walk(body) if isinstance(s, ir.LocalArrayDecl)}
    for s in walk(body):
        for e in exprs_of(s):
            for x in walk_expr(e):
                if isinstance(x, ir.LocalArrayRef) and x.name not in decls:
                    raise Unsplittable(f"a local array reached by reference: {x.name}")
    return decls


def plan_kernel(k: ir.KernelIR) -> Plan:
    """The split plan of a kernel; raises `Unsplittable` for a local without an LLVM value type
    (`llvm.types.value_type`) and for the forms normalize.py names."""
    nk, n = normalize(k)
    arrays = local_arrays(nk.body)  # each thread's own copy: a per-thread slot (regions.py)
    for name, t in nk.locals:  # each local (inlined helpers' too) needs an LLVM type for its slots
        try:
            value_type(t)
        except (TypeError, AssertionError, KeyError) as e:
            raise Unsplittable(f"a local without an LLVM value type: {name}") from e
    st = Structurer(nk, n)
    nodes = st.build(nk.body, "block")
    plan = st.plan
    plan.kernel = dataclasses.replace(nk, locals=k.locals + tuple(n.new_locals))
    plan.nodes = nodes
    plan.arrays = arrays
    _number(nodes, plan, False)
    plan.leaves = any(isinstance(s, (ir.Return, ir.Break, ir.Continue, Leave)) for r in plan.regions for s in walk(r.stmts))
    return plan


def classify(plan: Plan, params: set[str]) -> tuple[set[str], dict[int, set[str]]]:
    """(the per-thread context locals, each region's private locals).  A local is private to
    a region when no other region touches it and no split loop repeats that region; the
    hidden slots and the uniform ones are never private; a parameter is per-thread only
    when some statement assigns it."""
    seen: dict[str, list[Region]] = {}
    assigned: set[str] = set()
    for r in plan.regions:
        for name in names_in(r.stmts):
            seen.setdefault(name, []).append(r)
        for s in walk(r.stmts):
            if isinstance(s, ir.Assign):
                assigned.add(s.name)
            elif isinstance(s, (ir.ForRange, ir.GridStride)):
                assigned.add(s.var)
    context: set[str] = set(plan.hidden)
    private: dict[int, set[str]] = {r.index: set() for r in plan.regions}
    known = {n for n, _ in plan.kernel.locals} | params | set(plan.arrays)
    for name, regions in seen.items():
        if name not in known or name in plan.uniform or name in plan.hidden:
            continue
        if name in params:
            if name in assigned:
                context.add(name)
            continue
        if len(regions) == 1 and not regions[0].in_loop:
            private[regions[0].index].add(name)
        else:
            context.add(name)
    return context, private
