"""Lowering a coarsened kernel (the plan and the reasoning: codegen/llvm/coarsen.py).

`lower_body` emits, for one GPU thread, the vector path (the lanes in lockstep, 16-byte
accesses, a chunk whose lanes disagree before any store restarting on the lane path) and
the lane path (one copy of the body in a loop over the lanes).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as llir

from anodize.language import ir

from .types import I32T, I64T, WITNESS_LL, Frame, mem_type
from .coarsen import CHUNK, MAX_LOCKSTEP_DEPTH, VECTOR_BYTES, CoarsePlan, _nodes, at_witness, fold, witness_local


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
        if self.vector and at_witness(e.index) and self._planned(lw, e.slice.name, self.plan.reads):
            return lw.b.load(self.slots[e.slice.name][self.lane], typ=mem_type(e.ty))  # type: ignore[no-any-return]
        name = self.plan.rows.get(id(e))
        if self.vector and self.lockstep and name is not None and lw.frame.slices.get(name) is self.sv.get(name, lw.frame.slices.get(name)):
            if self.lane % CHUNK == 0:  # a chunk's first lane: its address; the next three lanes read on
                sv = lw.frame.slices[name]
                _, ptr, _, _ = lw.bounds.address(sv, e.index)
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
    b = lw.b
    flat = col if row is None else b.add(b.mul(row, sv.dims[-1]), col)
    return b.gep(sv.ptr, [flat], inbounds=True, source_etype=mem_type(sv.ty.elem))


def _vector_load(lw: Any, sv: Any, row: llir.Value | None, base: llir.Value, slots: list[llir.Value]) -> None:
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
    if pure and _pure(ir.ExprStmt(st.cond), lanes):  # (a check in the condition may have recorded a fault)
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
