"""Grid-stride loops: the scalar mapping, and 16-byte vector chunks for elementwise bodies.

`for i in thread.grid_stride(c):` only promises each thread a disjoint set of
in-bounds indices, so the lowering may pick the mapping:

* **scalar** (every backend, and every body): thread `t` of `T` takes
  `t, t + T, t + 2T, ...` below `len(c)`.
* **vector chunks** (the GPU target, when the body is *elementwise*, see
  `vector_plan`): thread `t` takes the chunks `[4t, 4t + 4)`, then
  `[4(t + T), 4(t + T) + 4)`, ... below `len(c) & ~3`, each with one 16-byte
  load per input (two for 8-byte elements: `ld.global.nc.v4.f32`,
  `ld.global.nc.v2.f64`) and one 16-byte store per output; the last
  `len(c) % 4` indices then run through the scalar loop starting at
  `(len(c) & ~3) + t`.  A vector access needs a 16-byte aligned base, so the
  kernel tests every involved pointer once (`(ptr & 15) == 0`) and runs the
  whole loop scalar when one is not (a view that starts mid-allocation).

The body of a vector chunk is lowered once per lane, lane 0 to 3 in order, with
each read of a slice at `i` taken from the loaded vector and each write kept
until the chunk's store.  That gives the scalar loop's results: an elementwise
body reads and writes only element `i` of each slice, inputs never alias outputs,
and a read of an output's element after the lane wrote it sees the lane's value.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING
from anodize.language.records import dataclass

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import ScalarTy, WitnessTy

from .gridstride_unroll import lower_unrolled, unrollable
from .registry import lowers
from .types import I32T, I64T, mem_type

if TYPE_CHECKING:
    from .lower import Lowerer

CHUNK = 4  # indices per thread per vector step: 16 bytes of 4-byte elements
VECTOR_BYTES = 16


@dataclass
class VectorPlan:
    """The slices an elementwise body touches at the loop index, in first-use order."""

    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    @property
    def slices(self) -> list[str]:
        return list(dict.fromkeys(self.reads + self.writes))


class _NotElementwise(Exception):
    pass


def _at_index(index: tuple[ir.Expr, ...], var: str) -> bool:
    """Whether an access index is exactly the loop's witness (`c[i]` or `c[i.get()]`)."""
    if len(index) != 1:
        return False
    e = index[0]
    if isinstance(e, ir.WitnessPart) and e.part == "get":
        e = e.witness
    return isinstance(e, ir.Local) and e.name == var and isinstance(e.ty, WitnessTy)


def _elem_ok(ty: object) -> bool:
    return isinstance(ty, ScalarTy) and not ty.is_bool and ty.info.mem_bits in (32, 64)  # a record's: never


def vector_plan(s: ir.GridStride) -> VectorPlan | None:
    """The plan for a vectorised `s`, or None when its body is not elementwise.

    Elementwise: straight-line at the loop's level (no `return`, and no `break` or
    `continue` of this loop), every slice access at exactly `i`, proven in range, of
    4- or 8-byte elements; writes only at the body's top level (so every lane writes);
    no atomics, helper calls, shared memory, barriers or warp operations; `i` never
    reassigned; and no value carried from one iteration to the next (a local the body
    assigns is assigned at its top level before any read: `acc += x[i]` is a
    reduction, whose float result would depend on the mapping).  Only kernels with a
    contract (no rank check on the witness)."""
    if s.site >= 0:
        return None
    plan = VectorPlan()
    carried = _assigned_names(s.body)
    defined: set[str] = set()

    def expr(e: ir.Expr) -> None:
        if isinstance(e, (ir.Atomic, ir.SharedAtomic, ir.Call, ir.WarpOp, ir.Collective, ir.SharedRead, ir.SharedRef, ir.MakeWitness)):
            raise _NotElementwise
        if isinstance(e, ir.Local) and e.name in carried and e.name not in defined:
            raise _NotElementwise  # read before this iteration assigns it: loop-carried
        if isinstance(e, ir.Read):
            if e.checked or not _at_index(e.index, s.var) or not _elem_ok(e.slice.ty.elem):
                raise _NotElementwise
            if e.slice.name not in plan.reads:
                plan.reads.append(e.slice.name)
            return
        for v in _children(e):
            expr(v)

    def nested(body: tuple[ir.Stmt, ...], nested_loop: bool, extra: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        nonlocal defined
        saved = defined
        defined = saved | extra  # assignments inside do not define anything after the block
        try:
            stmts(body, False, nested_loop)
        finally:
            defined = saved

    def stmts(body: tuple[ir.Stmt, ...], top: bool, nested_loop: bool) -> None:
        for st in body:
            if isinstance(st, ir.Assign):
                if st.name == s.var:
                    raise _NotElementwise
                expr(st.value)
                if top:
                    defined.add(st.name)
            elif isinstance(st, ir.Write):
                if not top or st.checked or not _at_index(st.index, s.var) or not _elem_ok(st.slice.ty.elem):
                    raise _NotElementwise
                expr(st.value)
                if st.slice.name not in plan.writes:
                    plan.writes.append(st.slice.name)
            elif isinstance(st, ir.ExprStmt):
                expr(st.value)
            elif isinstance(st, ir.If):
                expr(st.cond)
                nested(st.body, nested_loop)
                nested(st.orelse, nested_loop)
            elif isinstance(st, ir.While):
                nested((ir.ExprStmt(st.cond),) + st.body, True)
            elif isinstance(st, ir.ForRange):
                if st.var == s.var:
                    raise _NotElementwise
                for v in (st.start, st.stop, st.step):
                    expr(v)
                nested(st.body, True, {st.var})
            elif isinstance(st, (ir.Break, ir.Continue)):
                if not nested_loop:
                    raise _NotElementwise
            elif isinstance(st, ir.Breakpoint):
                pass  # nothing on the GPU (pdb on the debug device only)
            else:  # Return, Barrier, shared memory, a nested grid-stride loop
                raise _NotElementwise

    try:
        stmts(s.body, True, False)
    except _NotElementwise:
        return None
    if not plan.reads and not plan.writes:
        return None
    return plan


def _assigned_names(body: tuple[ir.Stmt, ...]) -> set[str]:
    """Locals a body assigns (plain and augmented assignments, `range` loop variables)."""
    out: set[str] = set()
    for st in ir.walk_stmts(body):
        if isinstance(st, ir.Assign):
            out.add(st.name)
        elif isinstance(st, ir.ForRange):
            out.add(st.var)
    return out


def _children(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BinOp):
        return [e.left, e.right]
    if isinstance(e, ir.UnaryOp):
        return [e.operand]
    if isinstance(e, (ir.Compare,)):
        return list(e.operands)
    if isinstance(e, ir.BoolOp):
        return list(e.values)
    if isinstance(e, ir.IfExp):
        return [e.cond, e.then, e.orelse]
    if isinstance(e, (ir.Cast, ir.Bitcast)):
        return [e.value]
    if isinstance(e, ir.WitnessPart):
        return [e.witness]
    if isinstance(e, ir.Contains):
        return [e.witness]
    if isinstance(e, ir.MathCall):
        return list(e.args)
    return []  # Const, Local, Len, RawId, SliceRef


# ---- lowering -------------------------------------------------------------------------------


@dataclass
class Lanes:
    """While a vector chunk's body is lowered: the lane being lowered and, per slice,
    each lane's current element (loaded, or written by the lane)."""

    var: str
    lane: int = 0
    values: dict[str, list[llir.Value | None]] = field(default_factory=dict)

    def at(self, index: tuple[ir.Expr, ...]) -> bool:
        return _at_index(index, self.var)

    # the Lowerer's hooks (`Lowerer.lanes`)
    def read(self, lw: object, e: ir.Read) -> llir.Value | None:
        return self.values[e.slice.name][self.lane] if self.at(e.index) else None

    def write(self, lw: object, s: ir.Write, value: llir.Value) -> bool:
        if not self.at(s.index):
            return False
        self.values[s.slice.name][self.lane] = value
        return True

    def contains(self, lw: object, e: ir.Contains) -> llir.Value | None:
        return None

    def witness(self, lw: object, e: ir.MakeWitness) -> llir.Value | None:
        return None


@lowers(ir.GridStride)
def lower(lw: Lowerer, s: ir.GridStride) -> None:
    """Lower `s`: the lowering of every grid-stride loop."""
    plan = vector_plan(s) if lw.t.vector_grid_stride and lw.lanes is None else None
    first = lw.expressions.witness(1, s.site)
    stride = lw.b.mul(lw.sreg64("nctaid", "x"), lw.sreg64("ntid", "x"))
    if plan is None:
        if lw.t.vector_grid_stride and lw.lanes is None:  # the GPU: a reduction's loads in flight together
            if unrollable(s):
                first = lower_unrolled(lw, s, first, stride)
        _scalar_loop(lw, s, first, stride)
        return
    b = lw.b
    n = lw.frame.slices[s.slice.name].dims[0]
    tail = b.and_(n, llir.Constant(I64T, ~(CHUNK - 1)))
    aligned: llir.Value | None = None
    for name in plan.slices:
        low = b.and_(b.ptrtoint(lw.frame.slices[name].ptr, I64T), llir.Constant(I64T, VECTOR_BYTES - 1))
        ok = b.icmp_unsigned("==", low, llir.Constant(I64T, 0))
        aligned = ok if aligned is None else b.and_(aligned, ok)
    assert aligned is not None
    pre = b.block
    vpre = lw.fn.append_basic_block("gsv.pre")
    vcond = lw.fn.append_basic_block("gsv.cond")
    vbody = lw.fn.append_basic_block("gsv.body")
    vexit = lw.fn.append_basic_block("gsv.exit")
    scalar = lw.fn.append_basic_block("gs.pre")
    b.cbranch(aligned, vpre, scalar)

    b.position_at_end(vpre)
    base0 = b.shl(first, llir.Constant(I64T, 2))
    vstride = b.shl(stride, llir.Constant(I64T, 2))
    b.branch(vcond)

    b.position_at_end(vcond)
    base = b.phi(I64T, name="gsv.base")
    base.add_incoming(base0, vpre)
    b.cbranch(b.icmp_unsigned("<", base, tail), vbody, vexit)

    b.position_at_end(vbody)
    _vector_chunk(lw, s, plan, base)
    base.add_incoming(b.add(base, vstride), b.block)
    b.branch(vcond)

    b.position_at_end(vexit)
    rest = b.add(tail, first)
    b.branch(scalar)

    b.position_at_end(scalar)
    start = b.phi(I64T, name="gs.start")
    start.add_incoming(first, pre)
    start.add_incoming(rest, vexit)
    _scalar_loop(lw, s, start, stride)


def _scalar_loop(lw: Lowerer, s: ir.GridStride, first: llir.Value, stride: llir.Value) -> None:
    b = lw.b
    slot, _ = lw.frame.vars[s.var]
    sv = lw.frame.slices[s.slice.name]
    head = lw.fn.append_basic_block("gs.cond")
    body = lw.fn.append_basic_block("gs.body")
    latch = lw.fn.append_basic_block("gs.latch")
    end = lw.fn.append_basic_block("gs.end")
    b.store(first, slot)
    b.branch(head)
    b.position_at_end(head)
    cur = b.load(slot, typ=I64T)
    b.cbranch(b.icmp_unsigned("<", cur, sv.dims[0]), body, end)
    b.position_at_end(body)
    counter = lw.alloca(I64T, f"{s.var}.gs")
    b.store(cur, counter)
    lw.frame.loops.append((latch, end))
    lw.stmts(s.body)
    lw.frame.loops.pop()
    if not lw.b.block.is_terminated:
        lw.b.branch(latch)
    b.position_at_end(latch)
    # no unsigned wrap: the index is below the slice's length (< 2**62) and the stride below
    # 2**41, so LLVM may compute the trip count and unroll (several loads in flight per thread)
    b.store(b.add(b.load(counter, typ=I64T), stride, flags=("nuw",)), slot)
    b.branch(head)
    b.position_at_end(end)


def _vector_chunk(lw: Lowerer, s: ir.GridStride, plan: VectorPlan, base: llir.Value) -> None:
    """One chunk of CHUNK lanes at `base`: vector loads, the body per lane, vector stores."""
    b = lw.b
    lanes = Lanes(s.var)
    for name in plan.slices:
        lanes.values[name] = [None] * CHUNK
    for name in plan.reads:
        sv = lw.frame.slices[name]
        mt = mem_type(sv.ty.elem)
        per = VECTOR_BYTES * 8 // sv.ty.elem.info.mem_bits  # elements per 16-byte access
        vt = llir.VectorType(mt, per)
        for part in range(CHUNK // per):
            idx = base if part == 0 else b.add(base, llir.Constant(I64T, part * per))
            p = b.gep(sv.ptr, [idx], inbounds=True, source_etype=mt)
            v = b.load(p, typ=vt, align=VECTOR_BYTES)
            for j in range(per):
                lanes.values[name][part * per + j] = b.extract_element(v, llir.Constant(I32T, j))
    slot, _ = lw.frame.vars[s.var]
    saved = lw.lanes
    lw.lanes = lanes
    try:
        for k in range(CHUNK):
            lanes.lane = k
            b.store(b.add(base, llir.Constant(I64T, k)) if k else base, slot)
            lw.stmts(s.body)
    finally:
        lw.lanes = saved
    for name in plan.writes:
        sv = lw.frame.slices[name]
        mt = mem_type(sv.ty.elem)
        per = VECTOR_BYTES * 8 // sv.ty.elem.info.mem_bits
        vt = llir.VectorType(mt, per)
        vals = lanes.values[name]
        for part in range(CHUNK // per):
            vec: llir.Value = llir.Constant(vt, None)
            for j in range(per):
                x = vals[part * per + j]
                assert x is not None, "an elementwise body writes every lane"
                vec = b.insert_element(vec, x, llir.Constant(I32T, j))
            idx = base if part == 0 else b.add(base, llir.Constant(I64T, part * per))
            p = b.gep(sv.ptr, [idx], inbounds=True, source_etype=mt)
            b.store(vec, p, align=VECTOR_BYTES)
