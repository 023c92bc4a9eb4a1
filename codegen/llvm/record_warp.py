"""Whole records moved by the warp: 32- and 64-byte record slices read and written lane-contiguously.

The aligned copy of a kernel over record slices (record_align.py) reads a 32-byte record with
two 16-byte loads, one record a thread: each warp instruction then touches 32 sectors and uses
half of each (lanes 32 bytes apart), where a 16-byte copy kernel's touches 16 and uses all
(88% of the copy ceiling for examples/particles.py on an H200).  Here the warp moves its 32
records itself: for a record of K = size / 16 chunks (K = 2 or 4), row `j` of the warp's
32 * K chunks is one 16-byte load per lane at chunk `32 j + lane` (512 contiguous bytes an
instruction), and K rounds of `shfl.sync.idx` (four 32-bit shuffles each) hand every lane its
own record; the records a lane writes are kept in registers and leave the same way, transposed
back and stored lane-contiguously.

With R = 32 / K records per row, record `r`'s chunk `h` is row `r // R`, lane `(r % R) K + h`.
In round `p` lane `r` reads from lane `(r % R) K + (p + r // R) % K`, which sends its row
`(lane % K - p) % K`: so `r` receives its chunk `(p + r // R) % K`, every lane sending one value
and receiving one (`load_source`, `load_row`, `load_chunk`).  The stores run that backwards
(`store_source`, `store_chunk`, `store_row`).  tests/codegen/test_record_warp.py checks both
on every lane with integers, as the IR computes them (`_Ops`).

When: the GPU's aligned copy, a kernel whose threads cannot tell which thread runs which index
(coarsen.elementwise_rank, rank 1), a block of whole warps along x (`ntid.x % 32 == 0`,
`ntid.y == ntid.z == 1`, tested at run time, uniform), and the warp's 32 indices inside every
slice the body indexes at the witness or tests with `w in s` (so `w in s` is true, and every
lane's record exists).  A planned input is a record slice of 32 or 64 bytes read at the
witness, never written, with a field read in each of its 16-byte chunks (so the warp loads no
sector the lanes' own loads would not); a planned output one written only at the witness, never read, whose
every byte some field write covers on every path (so no lane stores stale register bytes over
its record, and no padding byte is written).  Other warps (the last, partial one) take the
aligned copy.  On an H100 it took the particle step from 96.5% to 98.8% of the copy ceiling
(bench/records_probe.py; bench/RESULTS.md, session 14).  `ANODIZE_RECORD_WARP=0` turns it off
(for measurements).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.record_types import record_of_info

from .coarsen import at_witness, elementwise_rank, fold, witness_accesses, witness_local
from .types import I32T, I64T, mem_type

if TYPE_CHECKING:
    from .lower import Lowerer

WARP = 32
CHUNK_BYTES = 16
SIZES = (32, 64)  # record sizes moved by the warp (K = 2, 4 chunks)


# the transpose's index arithmetic, on ints (the tests) or IR values (`_Ops`): K a power of two
def load_source(lane: Any, p: int, k: int) -> Any:
    """The lane that lane `lane` reads from in round `p` of the loads."""
    r = WARP // k
    return (lane & (r - 1)) * k + (((lane >> (r.bit_length() - 1)) + p) & (k - 1))


def load_row(lane: Any, p: int, k: int) -> Any:
    """The row lane `lane` sends in round `p` of the loads."""
    return (lane - p) & (k - 1)


def load_chunk(lane: Any, p: int, k: int) -> Any:
    """The chunk of its own record lane `lane` receives in round `p` of the loads."""
    return ((lane >> ((WARP // k).bit_length() - 1)) + p) & (k - 1)


def store_source(lane: Any, p: int, k: int) -> Any:
    """The lane that lane `lane` reads from in round `p` of the stores."""
    return ((lane - p) & (k - 1)) * (WARP // k) + (lane >> (k.bit_length() - 1))


def store_chunk(lane: Any, p: int, k: int) -> Any:
    """The chunk of its own record lane `lane` sends in round `p` of the stores."""
    return load_chunk(lane, p, k)


def store_row(lane: Any, p: int, k: int) -> Any:
    """The row lane `lane` stores what it receives in round `p` of the stores."""
    return load_row(lane, p, k)


@dataclass
class WarpPlan:
    reads: dict[str, int] = field(default_factory=dict)  # input slice -> K
    writes: dict[str, int] = field(default_factory=dict)  # output slice -> K
    checked: list[str] = field(default_factory=list)  # slices the warp's indices must lie in


def warp_plan(k: ir.KernelIR, aligned: dict[str, int]) -> WarpPlan | None:
    """The slices the warp moves in `k`'s aligned copy (`aligned`: record_align's), or None."""
    if os.environ.get("ANODIZE_RECORD_WARP", "1") == "0" or elementwise_rank(k) != 1:
        return None
    params = {p.name: p for p in k.params if p.slice_kind is not None}
    acc = witness_accesses(k)
    at_reads, at_writes, other, escaped, contains = acc.at_reads, acc.at_writes, acc.other, acc.escaped, acc.contains
    fields: dict[str, set[tuple[int, int]]] = {}  # (offset, bytes) read at the witness
    for r in acc.witness_reads:
        fields.setdefault(r.slice.name, set()).add((r.offset, _bytes(mem_type(r.ty))))
    kinds = {n: p.slice_kind for n, p in params.items() if p.slice_kind is not None}
    checked = sorted(n for n in contains | at_reads | at_writes if kinds[n].rank == 1)
    if len(checked) != len(contains | at_reads | at_writes):
        return None
    plan = WarpPlan(checked=checked)
    for name in sorted(at_reads | at_writes):
        p = params[name]
        if aligned.get(name) != CHUNK_BYTES or name in escaped or p.scalar.kind != "r":
            continue
        size = record_of_info(p.scalar).size
        if size not in SIZES:
            continue
        kk = size // CHUNK_BYTES
        if not kinds[name].output:
            if _chunks_read(fields.get(name, set()), kk):  # else the warp would load bytes no lane reads
                plan.reads[name] = kk
        elif name not in at_reads and name not in other and _covered(written(k.body, name, set(checked)), size):
            plan.writes[name] = kk
    return plan if plan.reads or plan.writes else None


def _bytes(t: llir.Type) -> int:
    if isinstance(t, llir.IntType):
        return max(t.width // 8, 1)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]


def written(body: tuple[ir.Stmt, ...], name: str, checked: set[str]) -> set[tuple[int, int]]:
    """(offset, bytes) of the field writes of `name` at the witness that every path through
    `body` makes (`w in s` true for the slices in `checked`)."""
    out: set[tuple[int, int]] = set()
    for st in body:
        if isinstance(st, ir.Write) and st.slice.name == name and at_witness(st.index):
            out.add((st.offset, _bytes(mem_type(st.value.ty))))
        elif isinstance(st, ir.If):
            v = fold(st.cond, checked)
            then, other = written(st.body, name, checked), written(st.orelse, name, checked)
            out |= then if v is True else other if v is False else then & other
    return out


def _chunks_read(reads: set[tuple[int, int]], k: int) -> bool:
    """Whether every 16-byte chunk of the record has a field read (then the aligned copy's
    loads touch every sector of it too: the warp's copy moves no more bytes)."""
    return {off // CHUNK_BYTES for off, _ in reads} >= set(range(k))


def _covered(writes: set[tuple[int, int]], size: int) -> bool:
    hit = bytearray(size)
    for off, n in writes:
        hit[off : off + n] = b"\1" * n
    return all(hit)


class _Ops:
    """An IR value with the integer operators the index arithmetic uses (i32)."""

    def __init__(self, b: llir.IRBuilder, v: llir.Value):
        self.b, self.v = b, v

    def _c(self, x: Any) -> llir.Value:
        return x.v if isinstance(x, _Ops) else llir.Constant(I32T, x)

    def __and__(self, x: Any) -> _Ops:
        return _Ops(self.b, self.b.and_(self.v, self._c(x)))

    def __rshift__(self, x: Any) -> _Ops:
        return _Ops(self.b, self.b.lshr(self.v, self._c(x)))

    def __mul__(self, x: Any) -> _Ops:
        return _Ops(self.b, self.b.mul(self.v, self._c(x)))

    def __add__(self, x: Any) -> _Ops:
        return _Ops(self.b, self.b.add(self.v, self._c(x)))

    __radd__ = __add__

    def __sub__(self, x: Any) -> _Ops:
        return _Ops(self.b, self.b.sub(self.v, self._c(x)))


class WarpLanes:
    """The Lowerer's hooks (`Lowerer.lanes`) while the warp's copy of the body is lowered."""

    def __init__(self, plan: WarpPlan, slices: dict[str, Any]):
        self.plan = plan
        self.sv = slices
        self.words: dict[str, list[llir.Value]] = {}  # an input's record, as i32 words
        self.slots: dict[str, list[llir.Value]] = {}  # an output's record, i32 word slots

    def _mine(self, lw: Lowerer, name: str, index: tuple[ir.Expr, ...]) -> bool:
        return at_witness(index) and lw.frame.slices.get(name) is self.sv.get(name)

    def read(self, lw: Lowerer, e: ir.Read) -> llir.Value | None:
        if e.slice.name not in self.plan.reads or not self._mine(lw, e.slice.name, e.index):
            return None
        b = lw.b
        mt = mem_type(e.ty)
        words = self.words[e.slice.name]
        n, w = _bytes(mt), e.offset // 4
        if n == 8:
            v = b.or_(b.zext(words[w], I64T), b.shl(b.zext(words[w + 1], I64T), llir.Constant(I64T, 32)))
        elif n == 4:
            v = words[w]
        else:
            v = b.trunc(b.lshr(words[w], llir.Constant(I32T, 8 * (e.offset % 4))), llir.IntType(8 * n))
        if v.type != mt:
            v = b.bitcast(v, mt)
        return b.icmp_unsigned("!=", v, llir.Constant(mt, 0)) if e.ty.is_bool else v

    def write(self, lw: Lowerer, s: ir.Write, value: llir.Value) -> bool:
        if s.slice.name not in self.plan.writes or not self._mine(lw, s.slice.name, s.index):
            return False
        b = lw.b
        mt = mem_type(s.value.ty)
        v = b.zext(value, mt) if s.value.ty.is_bool else value
        n, w = _bytes(mt), s.offset // 4
        iv = v if isinstance(mt, llir.IntType) else b.bitcast(v, llir.IntType(8 * n))
        slots = self.slots[s.slice.name]
        if n == 8:
            b.store(b.trunc(iv, I32T), slots[w])
            b.store(b.trunc(b.lshr(iv, llir.Constant(I64T, 32)), I32T), slots[w + 1])
        elif n == 4:
            b.store(iv, slots[w])
        else:
            sh = 8 * (s.offset % 4)
            keep = llir.Constant(I32T, ~(((1 << (8 * n)) - 1) << sh) & 0xFFFFFFFF)
            old = b.and_(b.load(slots[w], typ=I32T), keep)
            b.store(b.or_(old, b.shl(b.zext(iv, I32T), llir.Constant(I32T, sh))), slots[w])
        return True

    def contains(self, lw: Lowerer, e: ir.Contains) -> llir.Value | None:
        if witness_local(e.witness) and e.slice.name in self.plan.checked and lw.frame.slices.get(e.slice.name) is self.sv.get(e.slice.name):
            return llir.Constant(llir.IntType(1), 1)
        return None

    def witness(self, lw: Lowerer, e: ir.MakeWitness) -> llir.Value | None:
        return None  # the thread's own index


def _shfl(lw: Lowerer, v: llir.Value, src: llir.Value) -> llir.Value:
    full, clamp = llir.Constant(I32T, -1), llir.Constant(I32T, 0x1F)
    return lw.intrinsic("llvm.nvvm.shfl.sync.idx.i32", I32T, [full, v, src, clamp], "convergent", "nounwind")


def _pick(b: llir.IRBuilder, which: _Ops, vals: list[list[llir.Value]]) -> list[llir.Value]:
    """vals[which] (lane-dependent `which`), word by word."""
    out = list(vals[0])
    for j in range(1, len(vals)):
        hit = b.icmp_unsigned("==", which.v, llir.Constant(I32T, j))
        out = [b.select(hit, vals[j][w], out[w]) for w in range(4)]
    return out


def _rows(lw: Lowerer, sv: Any, wb: llir.Value, lane: llir.Value, k: int) -> list[llir.Value]:
    """The addresses of this lane's 16-byte chunk in each row of the warp's records."""
    b = lw.b
    base = b.gep(sv.ptr, [b.mul(wb, llir.Constant(I64T, k * CHUNK_BYTES))], inbounds=True, source_etype=llir.IntType(8))
    lane64 = b.zext(lane, I64T)
    vt = llir.VectorType(I32T, 4)
    return [b.gep(base, [b.add(lane64, llir.Constant(I64T, WARP * j)) if j else lane64], inbounds=True, source_etype=vt) for j in range(k)]


def lower_warp_copy(lw: Lowerer, plan: WarpPlan, done: llir.Block) -> None:
    """Emit the warp's copy of the body, taken when the warp qualifies (the module doc); the
    builder is left in the block where the aligned copy starts."""
    b = lw.b
    i = b.add(b.mul(lw.sreg64("ctaid", "x"), lw.sreg64("ntid", "x")), lw.sreg64("tid", "x"))
    lane = b.trunc(b.and_(i, llir.Constant(I64T, WARP - 1)), I32T)
    wb = b.sub(i, b.zext(lane, I64T))
    zero = llir.Constant(I64T, 0)
    ok = b.icmp_unsigned("==", b.and_(lw.sreg64("ntid", "x"), llir.Constant(I64T, WARP - 1)), zero)
    ok = b.and_(ok, b.icmp_unsigned("==", b.or_(lw.sreg64("ntid", "y"), lw.sreg64("ntid", "z")), llir.Constant(I64T, 1)))
    end = b.add(wb, llir.Constant(I64T, WARP))
    for name in plan.checked:
        ok = b.and_(ok, b.icmp_unsigned("<=", end, lw.frame.slices[name].dims[0]))
    warp = lw.fn.append_basic_block("rec.warp")
    lanewise = lw.fn.append_basic_block("rec.lanewise")
    b.cbranch(ok, warp, lanewise).set_weights([64, 1])
    b.position_at_end(warp)
    hooks = WarpLanes(plan, lw.frame.slices)
    me = _Ops(b, lane)
    vt = llir.VectorType(I32T, 4)
    for name, k in plan.reads.items():
        vecs = [b.load(a, typ=vt, align=CHUNK_BYTES) for a in _rows(lw, lw.frame.slices[name], wb, lane, k)]
        rows = [[b.extract_element(v, llir.Constant(I32T, w)) for w in range(4)] for v in vecs]
        got = []
        for p in range(k):
            send = _pick(b, load_row(me, p, k), rows)
            src = load_source(me, p, k).v
            got.append([_shfl(lw, x, src) for x in send])
        # chunk h came in round p where load_chunk(lane, p) == h
        mine: list[list[llir.Value]] = []
        for h in range(k):
            chunk = list(got[0])
            for p in range(1, k):
                hit = b.icmp_unsigned("==", load_chunk(me, p, k).v, llir.Constant(I32T, h))
                chunk = [b.select(hit, got[p][w], chunk[w]) for w in range(4)]
            mine.append(chunk)
        hooks.words[name] = [w for c in mine for w in c]
    for name, k in plan.writes.items():
        hooks.slots[name] = [lw.alloca(I32T, f"{name}.w{j}") for j in range(4 * k)]
    saved = lw.lanes
    lw.lanes = hooks
    try:
        lw.stmts(lw.k.body)
    finally:
        lw.lanes = saved
    if not b.block.is_terminated:
        for name, k in plan.writes.items():
            words = [b.load(s, typ=I32T) for s in hooks.slots[name]]
            chunks = [words[4 * h : 4 * h + 4] for h in range(k)]
            got = []
            for p in range(k):
                send = _pick(b, store_chunk(me, p, k), chunks)
                src = store_source(me, p, k).v
                got.append([_shfl(lw, x, src) for x in send])
            for j, addr in enumerate(_rows(lw, lw.frame.slices[name], wb, lane, k)):
                row = list(got[0])
                for p in range(1, k):
                    hit = b.icmp_unsigned("==", store_row(me, p, k).v, llir.Constant(I32T, j))
                    row = [b.select(hit, got[p][w], row[w]) for w in range(4)]
                vec: llir.Value = llir.Constant(vt, None)
                for w in range(4):
                    vec = b.insert_element(vec, row[w], llir.Constant(I32T, w))
                b.store(vec, addr, align=CHUNK_BYTES)
        b.branch(done)
    b.position_at_end(lanewise)
