"""Coarsening: each GPU thread of an element-wise kernel takes FACTOR consecutive indices.

A kernel written one element per thread (`i = thread.index_1d()`, `ij = thread.index_2d()`)
moves 4 bytes per thread and load, which leaves the memory system short of requests in
flight (82-87% of the copy ceiling on an H200, against 97-107% for 16 bytes per thread).
When `coarsen_plan` accepts a kernel, the compiler gives each thread FACTOR = 4 indices
along x (the 1-D index, or the column of a 2-D one), and the runtime launches
`ceil(grid_x / 4)` blocks of the user's block: thread `t` (its x position in the smaller
grid) runs the body for the indices `4t, 4t + 1, 4t + 2, 4t + 3` along x, each below the
user's extent `grid_x * block_x`, which travels as one hidden `i64` parameter after
`launch_rank`.  The set of indices visited is exactly the user's grid times block: every
index of the user's launch once, and none beyond it.

Why that is the same program: an accepted kernel's threads never communicate (no shared
memory, barriers, warp or block operations, block witnesses, atomics, fences, `print`, raw
thread ids or grid-stride loops; every `return` is a helper's), so running four threads'
bodies one after another, or interleaved statement by statement, in one GPU thread is one of
the schedules the GPU could have run.  Every witness a lane makes is the lane's index, so
the one-mapping-per-output rule holds with the same owner for every element.

Each thread takes one of two paths:

* the **vector path**, when the whole chunk is in range (`4t + 4 <= extent`, and within the
  last axis of, and for 2-D at a row inside, every slice the body tests with `w in s` or
  indexes at the witness) and every planned slice's base is 16-byte aligned (a 2-D one also
  needs a column count divisible by 4, so that every row starts aligned).  Planned slices
  (`_plan_slices`: 4- or 8-byte elements, indexed at the witness only, outputs written on
  every path) are loaded and stored with one 16-byte access per chunk (`ld.global.nc.v4.f32`,
  `st.global.v4.f32`; two `v2` for 8-byte elements).  `w in s` is true there.  The four
  lanes run in lockstep, statement by statement, so the loads of all four are issued before
  any is used; an `if` whose condition differs between lanes runs lane by lane.
* the **lane path** otherwise (the last, partial chunk; a view whose start breaks 16-byte
  alignment): lane `k` runs the plain body when `4t + k < extent`, with scalar accesses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import ScalarTy, SliceTy, WitnessTy

from .lower_llvm import INTRINSIC_MATH

CHUNK = 4  # consecutive indices per 16-byte chunk (of 4-byte elements)
# chunks per thread: 1, or 2 (a block then covers two runs of block_x chunks, as Triton's
# 1024-element blocks of 128 threads do); ANODIZE_COARSEN_CHUNKS overrides it, 0 turns
# coarsening off (for measurements: the disk cache key does not cover it)
CHUNKS = 1
VECTOR_BYTES = 16
MAX_NODES = 400  # larger bodies are not coarsened (the vector path holds a copy per lane)
MATH_COST = 50  # what a libdevice function counts for against MAX_NODES
CHECK_COST = 12  # a bounds check left in: its cold block
MAX_SIZE = 2500  # `code_size` of the largest coarsened body
MAX_LOCKSTEP_DEPTH = 2  # `if`s nested deeper run lane by lane
MAX_TRIP = 64  # a `for` loop with constant bounds up to this many trips (a stencil's taps)


@dataclass
class CoarsePlan:
    rank: int  # the witnesses' rank (1 or 2); the chunk runs along x (the column for rank 2)
    reads: list[str] = field(default_factory=list)  # loaded as vectors on the vector path
    writes: list[str] = field(default_factory=list)  # stored as vectors on the vector path
    checked: list[str] = field(default_factory=list)  # extents the vector path tests (`w in s` is true there)
    # reads at (row, column + 4m) of 4-byte slices, read in lockstep: one 16-byte load for the
    # four lanes (`neighbour_reads`); id of the Read -> its slice; the slices are tested aligned
    rows: dict[int, str] = field(default_factory=dict)
    chunks: int = CHUNKS

    @property
    def factor(self) -> int:
        """Indices per thread along x: the launch runs ceil(grid_x / factor) blocks."""
        return CHUNK * self.chunks

    @property
    def vector(self) -> list[str]:
        """The slices the vector path tests for 16-byte alignment."""
        return list(dict.fromkeys(self.reads + self.writes + sorted(set(self.rows.values()))))


class _No(Exception):
    pass


def _nodes(x: Any) -> list[Any]:
    """The IR nodes directly inside node `x` (expressions and statements, in field order)."""
    out: list[Any] = []
    for f in dataclasses.fields(x):
        v = getattr(x, f.name)
        for item in v if isinstance(v, tuple) else (v,):
            if dataclasses.is_dataclass(item) and not isinstance(item, (ScalarTy, SliceTy, WitnessTy, ir.FuncIR)) and not isinstance(item, type):
                if type(item).__module__ == ir.__name__:
                    out.append(item)
    return out


def witness_local(e: ir.Expr) -> bool:
    """A witness held in a local (`i`), or its value (`i.get()`): every such value in a lane is
    the lane's index, and reading it has no effect."""
    if isinstance(e, ir.WitnessPart) and e.part == "get":
        e = e.witness
    return isinstance(e, ir.Local) and isinstance(e.ty, WitnessTy) and not e.ty.block


def at_witness(index: tuple[ir.Expr, ...]) -> bool:
    return len(index) == 1 and witness_local(index[0])


_REFUSED = (
    ir.Atomic, ir.RawId, ir.WarpOp, ir.Collective, ir.SharedRead, ir.SharedRef, ir.SharedWrite, ir.SharedDecl,
    ir.Barrier, ir.Fence, ir.Print, ir.GridStride, ir.While,
)


def coarsen_plan(k: ir.KernelIR) -> CoarsePlan | None:
    """The plan for coarsening `k`, or None when it is not element-wise (see the module doc)."""
    import os

    chunks = int(os.environ.get("ANODIZE_COARSEN_CHUNKS", CHUNKS))
    if chunks <= 0 or k.contract is None or k.uses_barrier or k.uses_warp or k.uses_shared:
        return None
    ranks: set[int] = set()
    count = [0]

    def visit(x: Any, in_kernel: bool) -> None:
        count[0] += 1
        if count[0] > MAX_NODES or isinstance(x, _REFUSED):
            raise _No
        if isinstance(x, ir.Return) and in_kernel:
            raise _No  # a lane that returns would skip the lanes after it in lockstep
        if isinstance(x, ir.MakeWitness):
            if x.ty.block or x.site >= 0 or x.rank not in (1, 2):
                raise _No
            ranks.add(x.rank)
        if isinstance(x, ir.Local) and isinstance(x.ty, WitnessTy) and x.ty.block:
            raise _No
        if isinstance(x, ir.ForRange):
            trips = _const_trips(x)
            if trips is None or trips > MAX_TRIP:
                raise _No  # a long per-element loop: compute-bound, keep every thread
        if isinstance(x, ir.MathCall) and x.name not in INTRINSIC_MATH:
            count[0] += MATH_COST  # a libdevice call: compute, and code in every lane
        if isinstance(x, ir.Call):  # inlined at every call
            for st in x.func.body:
                visit(st, False)
        for c in _nodes(x):
            visit(c, in_kernel)

    try:
        for st in k.body:
            visit(st, True)
    except _No:
        return None
    if len(ranks) != 1:
        return None
    rank = ranks.pop()
    if k.domain != rank:
        return None
    plan = _plan_slices(k, rank)
    plan.chunks = chunks
    plan.rows = neighbour_reads(k, plan)
    if code_size(k.body, set(plan.checked), plan.factor) > MAX_SIZE:
        return None  # the copies per lane would cost more compile time than they save
    return plan


def _cost(x: Any) -> int:
    """Roughly the instructions `x` lowers to: one per node, more for a check left in
    (its cold fault block) and a libdevice call; a helper counts at every call."""
    n = 1
    if isinstance(x, (ir.Read, ir.Write, ir.TableRead)) and x.checked:
        n += CHECK_COST
    if isinstance(x, ir.MathCall) and x.name not in INTRINSIC_MATH:
        n += MATH_COST
    if isinstance(x, ir.Call):
        n += sum(_cost(st) for st in x.func.body)
    if isinstance(x, ir.ForRange):
        trips = _const_trips(x) or 1
        return n + _cost(x.start) + _cost(x.stop) + _cost(x.step) + trips * sum(_cost(st) for st in x.body)
    return n + sum(_cost(c) for c in _nodes(x))


def code_size(body: tuple[ir.Stmt, ...], checked: set[str], factor: int, depth: int = 0) -> int:
    """The estimated size of a coarsened body: the vector path's copies (`_lockstep`: each
    statement once per lane; an `if` whose lanes may differ: both arms in lockstep, and
    once more per lane for the mixed case), plus the lane loop's copy, which LLVM unrolls."""
    total = 0
    for st in body:
        if isinstance(st, ir.If) and depth < MAX_LOCKSTEP_DEPTH:
            v = fold(st.cond, checked)
            if v is not None:
                total += code_size(st.body if v else st.orelse, checked, factor, depth + 1)
                continue
            arms = code_size(st.body, checked, factor, depth + 1) + code_size(st.orelse, checked, factor, depth + 1)
            per_lane = sum(_cost(x) for x in st.body + st.orelse)
            total += factor * _cost(st.cond) + arms + factor * per_lane
        else:
            total += factor * _cost(st)
    if depth == 0:
        total += factor * sum(_cost(st) for st in body)
    return total


def _const_trips(s: ir.ForRange) -> int | None:
    vals = []
    for e in (s.start, s.stop, s.step):
        if not isinstance(e, ir.Const):
            return None
        vals.append(int(e.value))
    start, stop, step = vals
    if step == 0:
        return None
    return len(range(start, stop, step))


def _plan_slices(k: ir.KernelIR, rank: int) -> CoarsePlan:
    """Which slices get 16-byte accesses, and which extents the vector path tests."""
    params = {p.name: p for p in k.params if p.slice_kind is not None}
    at_reads: set[str] = set()
    at_writes: set[str] = set()
    other: set[str] = set()  # accessed somewhere not at the witness
    escaped: set[str] = set()  # passed to a helper
    contains: set[str] = set()

    def visit(x: Any) -> None:
        if isinstance(x, ir.Read):
            (at_reads if at_witness(x.index) else other).add(x.slice.name)
        elif isinstance(x, ir.Write):
            (at_writes if at_witness(x.index) else other).add(x.slice.name)
        elif isinstance(x, ir.Contains) and witness_local(x.witness):
            contains.add(x.slice.name)
        elif isinstance(x, ir.Call):
            escaped.update(a.name for a in x.args if isinstance(a, ir.SliceRef))
        for c in _nodes(x):
            visit(c)

    for st in k.body:
        visit(st)

    def fits_elem(name: str) -> bool:
        p = params[name]
        return p.slice_kind.rank == rank and not p.scalar.kind == "b" and p.scalar.mem_bits in (32, 64)

    def fits(name: str) -> bool:
        """An input read anywhere else too, or an output accessed at the witness only."""
        if not fits_elem(name) or name in escaped:
            return False
        return not params[name].slice_kind.output or name not in other

    checked = sorted(n for n in (contains | at_reads | at_writes) if params[n].slice_kind.rank == rank)
    plan = CoarsePlan(rank, checked=checked)
    for name in sorted(at_reads | at_writes):
        if not fits(name):
            continue
        if params[name].slice_kind.output and name in at_writes:
            if not _definitely_writes(k.body, name, set(checked)):
                continue  # a lane may leave it unwritten: scalar stores
            plan.writes.append(name)
        if name in at_reads:
            plan.reads.append(name)
    return plan


_PURE_INDEX = (ir.Local, ir.Const, ir.Len, ir.WitnessPart, ir.Cast, ir.UnaryOp, ir.BinOp)


def neighbour_reads(k: ir.KernelIR, plan: CoarsePlan) -> dict[int, str]:
    """The reads the vector path loads 16 bytes at a time for four lanes: `s[R, C]` (or `s[C]`)
    of a 4-byte slice with no check left, where C is the lane's column plus a multiple of 4
    (`ij.col`, `i.get() - 4`, a local assigned once from such a value), R is the same in every
    lane (`ij.row`, parameters, lengths, constants and their arithmetic), both without effects,
    and the read is evaluated in lockstep, unconditionally within its statement (not in an
    `x if c else y` arm, a later operand of `and`/`or`, a loop or a deeper `if`).

    Every lane of the chunk runs that statement with its own column, and each lane's read is
    in range (no check left, and the lane reached it), so the 16 bytes are the four lanes'
    elements; the vector path tests the slice's base aligned (and its column count, for 2-D)."""
    params = {p.name: p for p in k.params}
    assigned: dict[str, int] = {}
    for st in ir.walk_stmts(k.body):
        if isinstance(st, ir.Assign):
            assigned[st.name] = assigned.get(st.name, 0) + 1
        elif isinstance(st, ir.ForRange):
            assigned[st.var] = assigned.get(st.var, 2) + 2
    out: dict[int, str] = {}
    checked = set(plan.checked)

    def col(e: ir.Expr, env: dict[str, Any]) -> int | None:
        """e == the lane's column + d: d, else None."""
        if isinstance(e, ir.WitnessPart) and witness_local(e.witness):
            if (plan.rank == 1 and e.part == "get") or (plan.rank == 2 and e.part == "col"):
                return 0
            return None
        if isinstance(e, ir.Local):
            v = env.get(e.name)
            return v[1] if isinstance(v, tuple) and v[0] == "col" else None
        if isinstance(e, ir.Cast) and e.ty.is_int and e.ty.bits == 64:
            return col(e.value, env)
        if isinstance(e, ir.BinOp) and e.op in ("+", "-") and e.ty.is_int and e.ty.bits == 64 and e.site < 0:
            left = col(e.left, env)
            if left is not None and isinstance(e.right, ir.Const):
                return left + int(e.right.value) * (1 if e.op == "+" else -1)
            if e.op == "+" and isinstance(e.left, ir.Const):
                right = col(e.right, env)
                return None if right is None else right + int(e.left.value)
        return None

    def same(e: ir.Expr, env: dict[str, Any]) -> bool:
        """e has one value in every lane and no effect."""
        if isinstance(e, ir.Const) or isinstance(e, ir.Len):
            return True
        if isinstance(e, ir.WitnessPart):
            return plan.rank == 2 and e.part == "row" and witness_local(e.witness)
        if isinstance(e, ir.Local):
            if e.name in params:
                return assigned.get(e.name, 0) == 0
            return env.get(e.name) == "same"
        if isinstance(e, ir.Cast):
            return same(e.value, env)
        if isinstance(e, ir.UnaryOp):
            return e.op in ("-", "~", "abs") and same(e.operand, env)
        if isinstance(e, ir.BinOp):
            return e.site < 0 and e.op in ("+", "-", "*", "&", "|", "^", "<<", ">>", "min", "max") and same(e.left, env) and same(e.right, env)
        return False

    def form(e: ir.Expr, env: dict[str, Any]) -> Any:
        d = col(e, env)
        if d is not None:
            return ("col", d)
        return "same" if same(e, env) else None

    def reads(e: ir.Expr, env: dict[str, Any]) -> None:
        """The reads `e` evaluates whenever it is evaluated."""
        if isinstance(e, ir.Read):
            name = e.slice.name
            p = params.get(name)
            if (
                not e.checked and p is not None and p.slice_kind is not None and p.slice_kind.rank == plan.rank
                and p.scalar.mem_bits == 32 and p.scalar.kind != "b" and not at_witness(e.index)
                and len(e.index) == plan.rank
            ):
                d = col(e.index[-1], env)
                if d is not None and d % CHUNK == 0 and all(same(x, env) for x in e.index[:-1]):
                    out[id(e)] = name
            for x in e.index:
                reads(x, env)
            return
        if isinstance(e, (ir.IfExp,)):
            reads(e.cond, env)
            return
        if isinstance(e, ir.BoolOp):
            reads(e.values[0], env)
            return
        if isinstance(e, ir.Compare):
            for x in e.operands[:2]:
                reads(x, env)
            return
        if isinstance(e, (ir.BinOp, ir.UnaryOp, ir.Cast, ir.MathCall)):
            for c in _nodes(e):
                reads(c, env)

    def walk(body: tuple[ir.Stmt, ...], env: dict[str, Any], depth: int) -> None:
        env = dict(env)
        for st in body:
            if isinstance(st, ir.If) and depth < MAX_LOCKSTEP_DEPTH:
                v = fold(st.cond, checked)
                if v is None:
                    reads(st.cond, env)
                if v is not False:
                    walk(st.body, env, depth + 1)
                if v is not True:
                    walk(st.orelse, env, depth + 1)
            elif isinstance(st, ir.Assign):
                reads(st.value, env)
                if assigned.get(st.name) == 1 and st.name not in params:
                    f = form(st.value, env)
                    if f is not None:
                        env[st.name] = f
            elif isinstance(st, ir.Write):
                reads(st.value, env)
            elif isinstance(st, ir.ExprStmt):
                reads(st.value, env)

    walk(k.body, {}, 0)
    seen: dict[int, int] = {}

    def count(x: Any) -> None:
        seen[id(x)] = seen.get(id(x), 0) + 1
        for c in _nodes(x):
            count(c)

    for st in k.body:
        count(st)
    return {i: name for i, name in out.items() if seen.get(i) == 1}  # a node met twice: no


def fold(cond: ir.Expr, checked: set[str]) -> bool | None:
    """A condition's value on the vector path, when it is known there (`w in s` is true)."""
    if isinstance(cond, ir.Contains) and witness_local(cond.witness) and cond.slice.name in checked:
        return True
    if isinstance(cond, ir.UnaryOp) and cond.op == "not":
        v = fold(cond.operand, checked)
        return None if v is None else not v
    if isinstance(cond, ir.BoolOp):
        vals = [fold(v, checked) for v in cond.values]
        if cond.op == "and":
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if isinstance(cond, ir.Const) and cond.ty.is_bool:
        return bool(cond.value)
    return None


def _definitely_writes(body: tuple[ir.Stmt, ...], name: str, checked: set[str]) -> bool:
    """Whether every path through `body` on the vector path writes `name` at the witness."""
    for st in body:
        if isinstance(st, ir.Write) and st.slice.name == name and at_witness(st.index):
            return True
        if isinstance(st, ir.If):
            v = fold(st.cond, checked)
            then = _definitely_writes(st.body, name, checked)
            other = _definitely_writes(st.orelse, name, checked)
            if (v is True and then) or (v is False and other) or (then and other):
                return True
    return False


# ---- lowering -------------------------------------------------------------------------------


class Lanes:
    """The Lowerer's hooks while a coarsened body is lowered (`Lowerer.lanes`)."""

    def __init__(self, plan: CoarsePlan, slices: dict[str, Any]):
        self.plan = plan
        self.lane = 0
        self.vector = False  # on the vector path (planned accesses from `slots`, `w in s` true)
        self.witnesses: list[llir.Value] = []  # each lane's witness on the vector path
        self.current: llir.Value | None = None  # the lane's witness in the lane loop
        self.restart: Any = None  # the lane path's block: where a chunk whose lanes differ starts over
        self.sv = {n: slices[n] for n in plan.checked}  # identity: a helper sees the same SliceVal
        self.slots: dict[str, list[llir.Value]] = {}
        self.checked = set(plan.checked)
        self.lockstep = False  # lowering a statement for each lane in turn (`_lockstep`)
        self.row_cache: dict[int, list[llir.Value]] = {}  # neighbour read -> its four lanes' values

    def _planned(self, lw: Any, name: str, which: list[str]) -> bool:
        return name in which and lw.frame.slices.get(name) is self.sv.get(name)

    def read(self, lw: Any, e: ir.Read) -> llir.Value | None:
        from .lower_llvm import I32T, mem_type

        if self.vector and at_witness(e.index) and self._planned(lw, e.slice.name, self.plan.reads):
            return lw.b.load(self.slots[e.slice.name][self.lane], typ=mem_type(e.ty))  # type: ignore[no-any-return]
        name = self.plan.rows.get(id(e))
        if self.vector and self.lockstep and name is not None and lw.frame.slices.get(name) is self.sv.get(name, lw.frame.slices.get(name)):
            if self.lane % CHUNK == 0:  # a chunk's first lane: its address; the next three lanes read on
                sv = lw.frame.slices[name]
                _, ptr, _, _ = lw.address(sv, e.index)
                v = lw.b.load(ptr, typ=llir.VectorType(mem_type(e.ty), CHUNK), align=VECTOR_BYTES)
                self.row_cache[id(e)] = [lw.b.extract_element(v, llir.Constant(I32T, j)) for j in range(CHUNK)]
            return self.row_cache[id(e)][self.lane % CHUNK]
        return None

    def write(self, lw: Any, s: ir.Write, value: llir.Value) -> bool:
        if self.vector and at_witness(s.index) and self._planned(lw, s.slice.name, self.plan.writes):
            lw.b.store(value, self.slots[s.slice.name][self.lane])
            return True
        return False

    def contains(self, lw: Any, e: ir.Contains) -> llir.Value | None:
        if self.vector and witness_local(e.witness) and e.slice.name in self.checked and lw.frame.slices.get(e.slice.name) is self.sv[e.slice.name]:
            return llir.Constant(llir.IntType(1), 1)
        return None

    def witness(self, lw: Any, e: ir.MakeWitness) -> llir.Value | None:
        return self.witnesses[self.lane] if self.vector else self.current


def lower_body(lw: Any, plan: CoarsePlan) -> None:
    """Lower the kernel's body as a coarsened thread (the Lowerer calls this from `lower`)."""
    from .lower_llvm import I64T, WITNESS_LL, Frame

    b = lw.b
    F = plan.factor
    one = lw.frame
    # block b, thread x: chunk j (of `chunks`) starts at ((b * chunks + j) * ntid + x) * CHUNK
    ntid = lw.sreg64("ntid", "x")
    tid = lw.sreg64("tid", "x")
    first = b.mul(lw.sreg64("ctaid", "x"), llir.Constant(I64T, plan.chunks))
    bases = []
    for j in range(plan.chunks):
        blk = b.add(first, llir.Constant(I64T, j)) if j else first
        bases.append(b.mul(b.add(b.mul(blk, ntid), tid), llir.Constant(I64T, CHUNK)))
    extent = lw.extent
    cols = [b.add(bases[k // CHUNK], llir.Constant(I64T, k % CHUNK)) if k % CHUNK else bases[k // CHUNK] for k in range(F)]
    if plan.rank == 1:
        witnesses = cols
        row = None
    else:
        row = b.add(b.mul(lw.sreg64("ctaid", "y"), lw.sreg64("ntid", "y")), lw.sreg64("tid", "y"))
        witnesses = []
        for c in cols:
            w = b.insert_value(llir.Constant(WITNESS_LL[2], None), row, 0)
            witnesses.append(b.insert_value(w, c, 1))
    lanes = Lanes(plan, one.slices)
    lanes.witnesses = witnesses
    # one frame per lane: its own locals (zeroed, as a fresh thread's) and copies of the parameters
    frames = [one]
    for k in range(1, F):
        fr = Frame(slices=one.slices, exit=one.exit)
        for name, (slot, ty) in one.vars.items():
            fr.vars[name] = (lw.alloca(slot.allocated_type, f"{name}.l{k}"), ty)
        frames.append(fr)
    params = [p.name for p in lw.k.params if p.slice_kind is None]
    initial = {name: b.load(one.vars[name][0], typ=one.vars[name][0].allocated_type) for name in params}
    for fr in frames[1:]:
        for name in params:
            b.store(initial[name], fr.vars[name][0])

    end = lw.fn.append_basic_block("co.end")
    vpath = lw.fn.append_basic_block("co.vector")
    spath = lw.fn.append_basic_block("co.lanes")
    chunk_end = b.add(bases[-1], llir.Constant(I64T, CHUNK))  # the last chunk ends last
    ok = b.icmp_unsigned("<=", chunk_end, extent)
    for name in plan.checked:
        sv = one.slices[name]
        ok = b.and_(ok, b.icmp_unsigned("<=", chunk_end, sv.dims[-1]))
        if plan.rank == 2:
            ok = b.and_(ok, b.icmp_unsigned("<", row, sv.dims[0]))
    for name in plan.vector:
        sv = one.slices[name]
        low = b.and_(b.ptrtoint(sv.ptr, I64T), llir.Constant(I64T, VECTOR_BYTES - 1))
        ok = b.and_(ok, b.icmp_unsigned("==", low, llir.Constant(I64T, 0)))
        if plan.rank == 2:
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(sv.dims[-1], llir.Constant(I64T, CHUNK - 1)), llir.Constant(I64T, 0)))
    br = b.cbranch(ok, vpath, spath)
    br.set_weights([64, 1])

    saved = lw.lanes
    lw.lanes = lanes
    before = lw.checks
    try:
        # the vector path
        b.position_at_end(vpath)
        lanes.vector = True
        for name in plan.vector:
            sv = one.slices[name]
            from .lower_llvm import mem_type

            mt = mem_type(sv.ty.elem)
            lanes.slots[name] = [lw.alloca(mt, f"{name}.lane{k}") for k in range(F)]
        for name in plan.reads:
            for j, base in enumerate(bases):
                _vector_load(lw, one.slices[name], row, base, lanes.slots[name][j * CHUNK : (j + 1) * CHUNK])
        lanes.restart = spath
        _lockstep(lw, lanes, frames, lw.k.body, 0, True)
        for name in plan.writes:
            for j, base in enumerate(bases):
                _vector_store(lw, one.slices[name], row, base, lanes.slots[name][j * CHUNK : (j + 1) * CHUNK])
        if not b.block.is_terminated:
            b.branch(end)
        # the lane path: one copy of the body in a loop over the lanes, each lane a fresh thread
        lw.checks = before  # `bounds_checks` counts the checks of one copy of the body: this one
        b.position_at_end(spath)
        lanes.vector = False
        lw.frame = one
        kslot = lw.alloca(I64T, "co.k")
        b.store(llir.Constant(I64T, 0), kslot)
        head = lw.fn.append_basic_block("co.lane")
        run = lw.fn.append_basic_block("co.run")
        nxt = lw.fn.append_basic_block("co.next")
        b.branch(head)
        b.position_at_end(head)
        k = b.load(kslot, typ=I64T)
        chunk = b.add(first, b.lshr(k, llir.Constant(I64T, CHUNK.bit_length() - 1)))
        col = b.add(b.mul(b.add(b.mul(chunk, ntid), tid), llir.Constant(I64T, CHUNK)), b.and_(k, llir.Constant(I64T, CHUNK - 1)))
        lanes.current = col if row is None else b.insert_value(b.insert_value(llir.Constant(WITNESS_LL[2], None), row, 0), col, 1)
        for name, (slot, ty) in one.vars.items():  # a fresh thread's locals and parameters
            b.store(initial[name] if name in initial else llir.Constant(slot.allocated_type, None), slot)
        b.cbranch(b.icmp_unsigned("<", col, extent), run, nxt)
        b.position_at_end(run)
        lw.stmts(lw.k.body)
        if not b.block.is_terminated:
            b.branch(nxt)
        b.position_at_end(nxt)
        k2 = b.add(b.load(kslot, typ=I64T), llir.Constant(I64T, 1))
        b.store(k2, kslot)
        # (LLVM unrolls it: kept as a loop, ptxas spilled values live across it)
        b.cbranch(b.icmp_unsigned("<", k2, llir.Constant(I64T, F)), head, end)
    finally:
        lw.lanes = saved
        lw.frame = one
    b.position_at_end(end)


def _pure(st: ir.Stmt, lanes: Lanes) -> bool:
    """Whether running `st` on the vector path leaves no trace a restart could see twice: no
    store to memory (a planned slice's write goes to its lane slot), no fault recorded (a
    check left, a division by zero, an `assert`) and no helper call."""

    def ok(x: Any) -> bool:
        if isinstance(x, (ir.Assert, ir.Call)):
            return False
        if isinstance(x, (ir.Read, ir.TableRead)) and x.checked:
            return False
        if isinstance(x, ir.Write) and (x.checked or x.slice.name not in lanes.plan.writes or not at_witness(x.index)):
            return False
        if isinstance(x, ir.BinOp) and x.site >= 0:
            return False
        return all(ok(c) for c in _nodes(x))

    return ok(st)


def _address(lw: Any, sv: Any, row: llir.Value | None, col: llir.Value) -> llir.Value:
    from .lower_llvm import mem_type

    b = lw.b
    flat = col if row is None else b.add(b.mul(row, sv.dims[-1]), col)
    return b.gep(sv.ptr, [flat], inbounds=True, source_etype=mem_type(sv.ty.elem))


def _vector_load(lw: Any, sv: Any, row: llir.Value | None, base: llir.Value, slots: list[llir.Value]) -> None:
    from .lower_llvm import I32T, I64T, mem_type

    b = lw.b
    mt = mem_type(sv.ty.elem)
    per = VECTOR_BYTES * 8 // sv.ty.elem.info.mem_bits
    vt = llir.VectorType(mt, per)
    for part in range(CHUNK // per):
        col = base if part == 0 else b.add(base, llir.Constant(I64T, part * per))
        v = b.load(_address(lw, sv, row, col), typ=vt, align=VECTOR_BYTES)
        for j in range(per):
            b.store(b.extract_element(v, llir.Constant(I32T, j)), slots[part * per + j])


def _vector_store(lw: Any, sv: Any, row: llir.Value | None, base: llir.Value, slots: list[llir.Value]) -> None:
    from .lower_llvm import I32T, I64T, mem_type

    b = lw.b
    mt = mem_type(sv.ty.elem)
    per = VECTOR_BYTES * 8 // sv.ty.elem.info.mem_bits
    vt = llir.VectorType(mt, per)
    for part in range(CHUNK // per):
        vec: llir.Value = llir.Constant(vt, None)
        for j in range(per):
            vec = b.insert_element(vec, b.load(slots[part * per + j], typ=mt), llir.Constant(I32T, j))
        col = base if part == 0 else b.add(base, llir.Constant(I64T, part * per))
        b.store(vec, _address(lw, sv, row, col), align=VECTOR_BYTES)


def _lockstep(lw: Any, lanes: Lanes, frames: list[Any], body: tuple[ir.Stmt, ...], depth: int, pure: bool) -> None:
    """Lower `body` for every lane, statement by statement (lane 0 to 3 for each).  `pure`:
    nothing before `body` on the vector path stored to memory or recorded a fault."""
    for st in body:
        if isinstance(st, ir.If) and depth < MAX_LOCKSTEP_DEPTH:
            _lockstep_if(lw, lanes, frames, st, depth, pure)
        else:
            lanes.lockstep = True
            try:
                for k in range(len(frames)):
                    lanes.lane = k
                    lw.frame = frames[k]
                    lw.stmts((st,))
            finally:
                lanes.lockstep = False
        pure = pure and _pure(st, lanes)


def _lockstep_if(lw: Any, lanes: Lanes, frames: list[Any], st: ir.If, depth: int, pure: bool) -> None:
    """An `if` on the vector path: either arm in lockstep when every lane agrees.  When they
    differ: the whole chunk again on the lane path if nothing was stored or recorded yet
    (`pure`), else this `if` lane by lane."""
    b = lw.b
    v = fold(st.cond, lanes.checked)
    if v is not None:
        _lockstep(lw, lanes, frames, st.body if v else st.orelse, depth + 1, pure)
        return
    if b.block.is_terminated:
        b.position_at_end(lw.fn.append_basic_block("dead"))
    conds = []
    lanes.lockstep = True
    try:
        for k in range(len(frames)):
            lanes.lane = k
            lw.frame = frames[k]
            lw.locate(st.span)
            conds.append(lw.expr(st.cond))
    finally:
        lanes.lockstep = False
    every = conds[0]
    some = conds[0]
    for c in conds[1:]:
        every = b.and_(every, c)
        some = b.or_(some, c)
    tt = lw.fn.append_basic_block("co.all")
    chk = lw.fn.append_basic_block("co.some")
    ff = lw.fn.append_basic_block("co.none")
    mixed = lw.fn.append_basic_block("co.mixed")
    merge = lw.fn.append_basic_block("co.merge")
    b.cbranch(every, tt, chk)
    b.position_at_end(chk)
    b.cbranch(some, mixed, ff)
    for blk, arm in ((tt, st.body), (ff, st.orelse)):
        b.position_at_end(blk)
        _lockstep(lw, lanes, frames, arm, depth + 1, pure)
        if not b.block.is_terminated:
            b.branch(merge)
    b.position_at_end(mixed)
    if pure:
        b.branch(lanes.restart)
        b.position_at_end(merge)
        return
    for k in range(len(frames)):
        lanes.lane = k
        lw.frame = frames[k]
        then = lw.fn.append_basic_block(f"co.then{k}")
        other = lw.fn.append_basic_block(f"co.else{k}")
        nxt = lw.fn.append_basic_block(f"co.join{k}")
        b.cbranch(conds[k], then, other)
        for blk, arm in ((then, st.body), (other, st.orelse)):
            b.position_at_end(blk)
            lw.stmts(arm)
            if not b.block.is_terminated:
                b.branch(nxt)
        b.position_at_end(nxt)
    b.branch(merge)
    b.position_at_end(merge)
