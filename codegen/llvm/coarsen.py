"""Coarsening: each GPU thread of an element-wise kernel takes several consecutive indices.

(This module is the plan; the lowering is codegen/llvm/coarsen_lower.py.)

A kernel written one element per thread (`i = thread.index_1d()`, `ij = thread.index_2d()`)
moves 4 bytes per thread and load, which leaves the memory system short of requests in
flight (82-87% of the copy ceiling on an H200, against 97-107% for 16 bytes per thread).
When `coarsen_plan` accepts a kernel, the compiler gives each thread CHUNK * CHUNKS = 4
indices along x (the 1-D index, or the column of a 2-D one), and the runtime launches
`ceil(grid_x / 4)` blocks of the user's block (`artifact.launch_grid`): thread `x` of block
`b` runs the body for the indices `4t .. 4t + 3`, `t = b * block_x + x`, each below the
user's extent `grid_x * block_x`, which travels as one hidden `i64` parameter after
`launch_rank` (`artifact.hidden_args`).  The set of indices visited is exactly the user's
grid times block: every index of the user's launch once, and none beyond it.

Why that is the same program: an accepted kernel's threads never communicate (no shared
memory, barriers, warp or block operations, block witnesses, atomics, fences, `print`, raw
thread ids or grid-stride loops; every `return` is a helper's), so running four threads'
bodies one after another, or interleaved statement by statement, in one GPU thread is one of
the schedules the GPU could have run.  Every witness a lane makes is the lane's index, so
the one-mapping-per-output rule holds with the same owner for every element.

Each thread takes one of two paths (codegen/llvm/coarsen_lower.py):

* the **vector path**, when the whole chunk is in range (`4t + 4 <= extent`, and within the
  last axis of, and for 2-D at a row inside, every slice the body tests with `w in s` or
  indexes at the witness) and every vector slice's base is 16-byte aligned (a 2-D one also
  needs a column count divisible by 4, so that every row starts aligned).  Slices of 4- or
  8-byte elements indexed at the witness only (outputs written on every path:
  `_plan_slices`) are loaded and stored with one 16-byte access per chunk
  (`ld.global.nc.v4.f32`, `st.global.v4.f32`; two `v2` for 8-byte elements), a write kept
  in a per-lane slot until the chunk's store; reads at the column plus a multiple of 4 (a
  stencil's rows: `neighbour_reads`) load 16 bytes for the four lanes where they are read.
  `w in s` is true there.  The four lanes run in lockstep, statement by statement, so the
  loads of all four are issued before any is used.  An `if` whose lanes disagree sends the
  chunk to the lane path when nothing was stored or recorded yet (the slots are dropped),
  and otherwise runs that `if` lane by lane.
* the **lane path** otherwise (the last, partial chunk; a view whose start breaks 16-byte
  alignment): one copy of the body in a loop over the lanes, lane `k` a fresh thread (its
  locals zeroed, its parameters as passed) when `4t + k < extent`, with scalar accesses.

A kernel is coarsened only when `code_size` (the copies per lane) stays under MAX_SIZE:
compile time grows with it, and a body of libdevice calls is compute-bound anyway.
"""

from __future__ import annotations

import os
from dataclasses import field
from anodize.language.records import dataclass
from typing import Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.ir_walk import node_fields
from anodize.language.types import WitnessTy

from .types import INTRINSIC_MATH

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


_FIELDS: dict[type, tuple[str, ...]] = {}
_IR = ir.__name__


def _nodes(x: Any) -> list[Any]:
    """The IR nodes directly inside node `x` (expressions and statements, in field order;
    not a call's FuncIR: its body is the helper's)."""
    t = type(x)
    names = _FIELDS.get(t)
    if names is None:
        names = _FIELDS[t] = tuple(f for f in node_fields(t) if f != "func")
    out: list[Any] = []
    for n in names:
        v = getattr(x, n)
        if isinstance(v, tuple):
            out.extend(item for item in v if type(item).__module__ == _IR)
        elif type(v).__module__ == _IR:
            out.append(v)
    return out


def witness_local(e: ir.Expr) -> bool:
    """A witness held in a local (`i`), or its value (`i.get()`): every such value in a lane is
    the lane's index, and reading it has no effect."""
    if isinstance(e, ir.WitnessPart) and e.part == "get":
        e = e.witness
    return isinstance(e, ir.Local) and isinstance(e.ty, WitnessTy) and not e.ty.block and not e.ty.local and e.ty.tile is None


def at_witness(index: tuple[ir.Expr, ...]) -> bool:
    return len(index) == 1 and witness_local(index[0])


_REFUSED = (
    ir.Atomic, ir.RawId, ir.WarpOp, ir.Collective, ir.SharedRead, ir.SharedRef, ir.SharedWrite, ir.SharedDecl,
    ir.Barrier, ir.Fence, ir.Print, ir.GridStride, ir.While,
)


def coarsen_plan(k: ir.KernelIR) -> CoarsePlan | None:
    """The plan for coarsening `k`, or None when it is not element-wise (see the module doc)."""
    chunks = int(os.environ.get("ANODIZE_COARSEN_CHUNKS", CHUNKS))
    if chunks <= 0:
        return None
    if any(p.slice_kind is not None and p.scalar.kind == "r" and p.scalar.mem_bits > 64 for p in k.params):
        # a record wider than 8 bytes already moves its bytes per thread; consecutive records per
        # thread would only spread a warp's accesses over four times the lines (0.48x numba's
        # one-record-per-thread particle step on the H200)
        return None
    rank = elementwise_rank(k)
    if rank is None:
        return None
    plan = _plan_slices(k, rank)
    plan.chunks = chunks
    plan.rows = neighbour_reads(k, plan)
    if code_size(k.body, set(plan.checked), plan.factor) > MAX_SIZE:
        return None  # the copies per lane would cost more compile time than they save
    return plan


def elementwise_rank(k: ir.KernelIR) -> int | None:
    """The rank of `k`'s witnesses when its threads cannot tell which thread runs which index
    (the module doc's list: a contract, one witness rank equal to the domain's, nothing that
    communicates or names a thread), else None: the kernels whose indices may be mapped to
    threads otherwise (here; codegen/llvm/record_warp.py)."""
    if k.contract is None or k.uses_barrier or k.uses_warp or k.uses_shared:
        return None
    ranks: set[int] = set()
    count = [0]

    def visit(x: Any, in_kernel: bool) -> None:
        count[0] += 1
        if count[0] > MAX_NODES or isinstance(x, _REFUSED):
            raise _No
        if isinstance(x, ir.Return) and in_kernel:
            raise _No  # a lane that returns would skip the lanes after it in lockstep
        if isinstance(x, (ir.MakeWitness, ir.TileAt)):
            # a per-thread tile (`thread.tile_2d`, `t.at`) names several elements per thread:
            # not a lane's one index
            # a block-local witness (`thread.index_in_block()`) is the thread's slot in its block,
            # which a coarsened block of four times the indices would no longer give each lane
            if isinstance(x, ir.TileAt) or x.ty.block or x.ty.local or x.ty.tile is not None or x.site >= 0 or x.rank not in (1, 2):
                raise _No
            ranks.add(x.rank)
        if isinstance(x, ir.Local) and isinstance(x.ty, WitnessTy) and (x.ty.block or x.ty.local):
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
    return rank if k.domain == rank else None


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


@dataclass
class WitnessAccesses:
    """How a kernel's body reaches its slices, by name: read or written at this thread's witness,
    accessed anywhere else, passed to a helper, or tested with `w in s`; and the reads at the
    witness themselves (the whole-warp record copy reads their fields)."""

    at_reads: set[str] = field(default_factory=set)
    at_writes: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)  # accessed somewhere not at the witness
    escaped: set[str] = field(default_factory=set)  # passed to a helper
    contains: set[str] = field(default_factory=set)
    witness_reads: list[ir.Read] = field(default_factory=list)


def witness_accesses(k: ir.KernelIR) -> WitnessAccesses:
    """One walk of `k`'s body classifying its slice accesses (`WitnessAccesses`), read by the
    coarsening plan and the whole-warp record copy (codegen/llvm/record_warp.py)."""
    acc = WitnessAccesses()

    def visit(x: Any) -> None:
        if isinstance(x, ir.Read):
            if at_witness(x.index):
                acc.at_reads.add(x.slice.name)
                acc.witness_reads.append(x)
            else:
                acc.other.add(x.slice.name)
        elif isinstance(x, ir.Write):
            (acc.at_writes if at_witness(x.index) else acc.other).add(x.slice.name)
        elif isinstance(x, ir.Contains) and witness_local(x.witness):
            acc.contains.add(x.slice.name)
        elif isinstance(x, ir.Call):
            acc.escaped.update(a.name for a in x.args if isinstance(a, ir.SliceRef))
        for c in _nodes(x):
            visit(c)

    for st in k.body:
        visit(st)
    return acc


def _plan_slices(k: ir.KernelIR, rank: int) -> CoarsePlan:
    """Which slices get 16-byte accesses, and which extents the vector path tests."""
    params = {p.name: p for p in k.params if p.slice_kind is not None}
    acc = witness_accesses(k)
    at_reads, at_writes, other, escaped, contains = acc.at_reads, acc.at_writes, acc.other, acc.escaped, acc.contains
    kinds = {n: p.slice_kind for n, p in params.items() if p.slice_kind is not None}

    def fits_elem(name: str) -> bool:
        p = params[name]
        return kinds[name].rank == rank and p.scalar.kind not in ("b", "r") and p.scalar.mem_bits in (32, 64)

    def fits(name: str) -> bool:
        """An input read anywhere else too, or an output accessed at the witness only."""
        if not fits_elem(name) or name in escaped:
            return False
        return not kinds[name].output or name not in other

    checked = sorted(n for n in (contains | at_reads | at_writes) if kinds[n].rank == rank)
    plan = CoarsePlan(rank, checked=checked)
    for name in sorted(at_reads | at_writes):
        if not fits(name):
            continue
        if kinds[name].output and name in at_writes:
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
                and p.scalar.mem_bits == 32 and p.scalar.kind not in ("b", "r") and not at_witness(e.index)
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
        if isinstance(e, (ir.BinOp, ir.UnaryOp, ir.Cast, ir.Bitcast, ir.MathCall)):
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
