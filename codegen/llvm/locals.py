"""Lowering of the local values (a collaborator of `lower.Lowerer`, `lw.locals`): per-thread local arrays,
tuples and unpacking, and the unroll hint of constant `range` loops.

A local array is an `alloca` in the entry block (one per function instance: a helper's
array is one per inlined call), zeroed there and again where its declaration runs, so SROA
and mem2reg can keep it in registers once every index is a constant.  Its accesses are
bounds-checked like a shared array's, against its constant shape.  A constant-bound
`range` loop of at most `UNROLL_MAX_TRIPS` iterations in a kernel that has a local array
is unrolled here (`unrolled_for`), so its indices are constants.
A tuple is an LLVM literal struct of the elements' register types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.ir_walk import children
from anodize.language.types import I64, LocalArrayTy, ScalarTy, TupleTy

from .registry import handles, part
from .types import I8, _align, mem_type, reg_type, tuple_type

if TYPE_CHECKING:
    from .lower import Lowerer

UNROLL_MAX_TRIPS = 64  # the most iterations a loop is unrolled for
UNROLL_MAX_COST = 1024  # the most statements (nested loops counted per iteration) its copies may hold


@part("locals")
class LocalsLowering:
    """The local values of the lowering."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw
        self._has_local: bool | None = None

    # ---- local arrays --------------------------------------------------------------------
    @handles(ir.LocalArrayDecl)
    def s_LocalArrayDecl(self, s: ir.LocalArrayDecl) -> None:
        arr = llir.ArrayType(mem_type(s.ty.elem), s.ty.size)
        slot = self.lw.alloca(arr, s.name)  # in the entry block, zeroed there
        slot.type = llir.PointerType()  # opaque, so element GEPs type-check (as for tables)
        self.lw.b.store(llir.Constant(arr, None), slot)  # zeroed where the declaration runs
        self.lw.frame.vars[s.name] = (slot, s.ty)

    def local_address(self, ref: ir.LocalArrayRef, index: tuple[ir.Expr, ...]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        slot, ty = self.lw.frame.vars[ref.name]
        assert isinstance(ty, LocalArrayTy)
        dims: list[llir.Value] = [llir.Constant(llir.IntType(64), d) for d in ty.shape]
        return self.lw.bounds.addr_dims(slot, mem_type(ty.elem), dims, self.lw.bounds.index_values(index))

    @handles(ir.LocalArrayRead)
    def e_LocalArrayRead(self, e: ir.LocalArrayRead) -> llir.Value:
        ok, ptr, fidx, flen = self.local_address(e.array, e.index)
        mt = mem_type(e.ty)
        v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.lw.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return self.lw.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) if e.ty.is_bool else v

    @handles(ir.LocalArrayWrite)
    def s_LocalArrayWrite(self, s: ir.LocalArrayWrite) -> None:
        value = self.lw.expr(s.value)
        ok, ptr, fidx, flen = self.local_address(s.array, s.index)
        elem = s.array.ty.elem
        stored = self.lw.b.zext(value, I8) if elem.is_bool else value
        self.lw.bounds.guarded(s.checked, ok, s.site, fidx, flen, lambda: self.lw.b.store(stored, ptr, align=_align(elem)), None)

    @handles(ir.LocalArrayRef)
    def e_LocalArrayRef(self, e: ir.LocalArrayRef) -> llir.Value:
        raise AssertionError("a local array is not a value")

    # ---- tuples --------------------------------------------------------------------------
    @handles(ir.MakeTuple)
    def e_MakeTuple(self, e: ir.MakeTuple) -> llir.Value:
        values = [self.lw.expr(v) for v in e.values]  # every element first, left to right
        out: llir.Value = llir.Constant(tuple_type(e.ty), None)
        for k, (v, src, dst) in enumerate(zip(values, e.values, e.ty.elems, strict=True)):
            out = self.lw.b.insert_value(out, self.lw.conv(v, src.ty, dst), k)
        return out

    @handles(ir.Unpack)
    def s_Unpack(self, s: ir.Unpack) -> None:
        v = self.lw.expr(s.value)
        assert isinstance(s.value.ty, TupleTy)
        parts = [self.lw.b.extract_value(v, k) for k in range(len(s.names))]
        for name, x, src in zip(s.names, parts, s.value.ty.elems, strict=True):
            slot, ty = self.lw.frame.vars[name]
            self.lw.b.store(self.lw.conv(x, src, ty), slot)

    # ---- unrolling -----------------------------------------------------------------------
    def unrolled_for(self, s: ir.ForRange) -> bool:
        """Lower a constant-bound `range` loop of a kernel that has a local array as straight-line
        copies of its body (each with the loop variable's constant), when it runs at most
        UNROLL_MAX_TRIPS times and the copies stay under UNROLL_MAX_COST statements: every
        index of a local array inside becomes a constant, so SROA keeps the array in registers.
        (Unrolling here, rather than asking LLVM with `llvm.loop.unroll.full`, never leaves a
        "loop not unrolled" warning on the user's terminal.)  False: lower the loop as a loop."""
        if not all(isinstance(x, ir.Const) for x in (s.start, s.stop, s.step)):
            return False
        if not self.has_local_arrays():
            return False
        slot, ty = self.lw.frame.vars[s.var]
        assert isinstance(ty, ScalarTy)
        start, stop, step = (self.const_in(x, ty) for x in (s.start, s.stop, s.step))  # type: ignore[arg-type]
        values = list(range(start, stop, step)) if step else []
        if not 1 <= len(values) <= UNROLL_MAX_TRIPS or len(values) * _cost(s.body) > UNROLL_MAX_COST:
            return False
        end = self.lw.fn.append_basic_block("unroll.end")
        for v in values:
            nxt = self.lw.fn.append_basic_block("unroll.next")
            self.lw.b.store(llir.Constant(reg_type(ty), v & ((1 << ty.bits) - 1)), slot)
            self.lw.frame.loops.append((nxt, end))  # `continue`: the next copy; `break`: past the last
            self.lw.stmts(s.body)
            self.lw.frame.loops.pop()
            if not self.lw.b.block.is_terminated:
                self.lw.b.branch(nxt)
            self.lw.b.position_at_end(nxt)
        self.lw.b.branch(end)
        self.lw.b.position_at_end(end)
        return True

    @staticmethod
    def const_in(c: ir.Const, ty: ScalarTy) -> int:
        """A range bound's value as the loop variable's type reads it (wrapped, with its sign)."""
        v = int(c.value) & ((1 << ty.bits) - 1)
        return v - (1 << ty.bits) if ty.signed and v >> (ty.bits - 1) else v

    def has_local_arrays(self) -> bool:
        """Whether the kernel has a local array whose constant loops unrolling keeps in
        registers (never where the lowerer keeps local arrays in memory:
        `Lowerer.unroll_for_local_arrays`)."""
        if self._has_local is None:
            self._has_local = self.lw.unroll_for_local_arrays and _mentions_local(self.lw.k.body, set())
        return self._has_local


def _cost(body: tuple[ir.Stmt, ...]) -> int:
    """Statements of a body, a constant loop's body counted once per iteration."""
    n = 0
    for st in body:
        n += 1
        if isinstance(st, ir.If):
            n += _cost(st.body) + _cost(st.orelse)
        elif isinstance(st, ir.ForRange):
            trips = 1
            if all(isinstance(x, ir.Const) for x in (st.start, st.stop, st.step)) and st.step.value:  # type: ignore[union-attr]
                trips = max(1, len(range(int(st.start.value), int(st.stop.value), int(st.step.value))))  # type: ignore[union-attr]
            n += trips * _cost(st.body)
        elif isinstance(st, (ir.While, ir.GridStride)):
            n += _cost(st.body)
    return n


def _mentions_local(node: Any, seen: set[int]) -> bool:
    if isinstance(node, tuple):
        return any(_mentions_local(x, seen) for x in node)
    if isinstance(node, (ir.LocalArrayDecl, ir.LocalArrayRef)):
        return True
    if isinstance(node, ir.FuncIR):
        if id(node) in seen:
            return False
        seen.add(id(node))
        return _mentions_local(node.body, seen)
    return any(_mentions_local(c, seen) for c in children(node))


__all__ = ["LocalsLowering", "UNROLL_MAX_TRIPS", "I64", "ScalarTy"]
